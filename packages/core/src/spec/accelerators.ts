/**
 * The accelerator catalog and its factories: `sky.accelerators.A100()`,
 * `sky.accelerators.H100({ count: 8, formFactor: "SXM" })`, `sky.accelerators.Custom("My-GPU", { memory: "48GB" })`.
 *
 * An accelerator is a frozen plain object naming one catalog entry (or a custom device), the
 * memory variant, the form factor and how many of them each node gets. Providers match offers
 * against its canonical `name` (see {@link canonicalAcceleratorName} and {@link acceleratorCatalog}).
 * In `skyward.toml` the accelerator is a string, resolved by {@link acceleratorFromName}.
 */

import { z } from "zod";
import { ConfigurationError, type ConfigurationIssue } from "../errors/errors.js";
import { toConfigurationIssues } from "../errors/validation.js";
import {
  type Accelerator,
  type AcceleratorCatalogEntry,
  type AcceleratorFactories,
  type AcceleratorManufacturer,
  acceleratorCatalog,
  catalogEntriesByName,
  manufacturers,
} from "./accelerator-catalog.js";
import {
  describeValue,
  parseModelName,
  quoted,
  splitCount,
  unknownNameMessage,
} from "./accelerator-names.js";

export type {
  Accelerator,
  AcceleratorCatalogEntry,
  AcceleratorFactories,
  AcceleratorManufacturer,
  AcceleratorName,
  AcceleratorOptions,
  AcceleratorOptionsFor,
  CustomAcceleratorOptions,
} from "./accelerator-catalog.js";
export { acceleratorCatalog } from "./accelerator-catalog.js";
export { acceleratorFormFactor, canonicalAcceleratorName, canonicalFormFactor } from "./accelerator-names.js";

// ---------------------------------------------------------------------------------------------
// Building and validating
// ---------------------------------------------------------------------------------------------

function oneOf(values: readonly string[]) {
  return (issue: { input?: unknown }) =>
    `expected one of ${quoted(values)}, received ${describeValue(issue.input)}`;
}

const countMessage = (issue: { input?: unknown }) =>
  `expected a positive finite number, received ${describeValue(issue.input)}`;
const countSchema = z.number({ error: countMessage }).positive({ error: countMessage });

const memoryPattern = /^\d+(?:\.\d+)?GB$/;

function memoryInGb(memory: string): number {
  return Number.parseFloat(memory);
}

const optionsObjectMessage = (issue: { code?: string; input?: unknown }) =>
  issue.code === "invalid_type"
    ? `expected an options object such as { count: 8 }, received ${describeValue(issue.input)}`
    : undefined;

function schemaForEntry(entry: AcceleratorCatalogEntry) {
  const [firstMemory, ...otherMemory] = entry.memory;
  const [firstFormFactor, ...otherFormFactors] = entry.formFactors;
  const formFactor =
    firstFormFactor === undefined
      ? z
          .undefined({
            error: (issue) =>
              `${entry.name} has no form-factor variants, received ${describeValue(issue.input)}`,
          })
          .optional()
      : z.enum([firstFormFactor, ...otherFormFactors], { error: oneOf(entry.formFactors) }).optional();
  return z
    .strictObject(
      {
        count: countSchema.optional(),
        memory: z
          .enum([firstMemory ?? entry.defaultMemory, ...otherMemory], { error: oneOf(entry.memory) })
          .optional(),
        formFactor,
      },
      { error: optionsObjectMessage },
    )
    .superRefine((options, context) => {
      if (options.formFactor === undefined || options.memory === undefined) return;
      const allowed = entry.formFactorMemory[options.formFactor];
      if (allowed && !allowed.includes(options.memory)) {
        context.addIssue({
          code: "custom",
          path: ["memory"],
          message: `expected one of ${quoted(allowed)} for form factor ${JSON.stringify(options.formFactor)}, received ${describeValue(options.memory)}`,
        });
      }
    });
}

type EntrySchema = ReturnType<typeof schemaForEntry>;
const entrySchemas = new Map<string, EntrySchema>();

function entrySchema(entry: AcceleratorCatalogEntry): EntrySchema {
  let schema = entrySchemas.get(entry.name);
  if (!schema) {
    schema = schemaForEntry(entry);
    entrySchemas.set(entry.name, schema);
  }
  return schema;
}

interface AcceleratorFields {
  name: string;
  manufacturer: AcceleratorManufacturer;
  memory: string | undefined;
  count: number;
  formFactor: string | undefined;
  custom: boolean;
  isTrainium: boolean;
  aliases: readonly string[];
}

function freezeAccelerator(fields: AcceleratorFields): Accelerator {
  return Object.freeze({
    kind: "accelerator",
    name: fields.name,
    manufacturer: fields.manufacturer,
    memory: fields.memory,
    memoryGb: fields.memory === undefined ? undefined : memoryInGb(fields.memory),
    count: fields.count,
    formFactor: fields.formFactor,
    custom: fields.custom,
    isTrainium: fields.isTrainium,
    aliases: Object.freeze([...fields.aliases]),
  });
}

/** Validates catalog-factory options; issues carry paths relative to the options (`memory`, `count`). */
function checkEntryOptions(
  entry: AcceleratorCatalogEntry,
  input: unknown,
): { ok: true; accelerator: Accelerator } | { ok: false; issues: ConfigurationIssue[] } {
  const result = entrySchema(entry).safeParse(input === undefined ? {} : input);
  if (!result.success) return { ok: false, issues: toConfigurationIssues(result.error.issues, "", input) };
  const { count = 1, memory, formFactor } = result.data;
  const constrained = formFactor === undefined ? undefined : entry.formFactorMemory[formFactor];
  const defaultMemory =
    constrained && !constrained.includes(entry.defaultMemory)
      ? (constrained[0] ?? entry.defaultMemory)
      : entry.defaultMemory;
  return {
    ok: true,
    accelerator: freezeAccelerator({
      name: entry.name,
      manufacturer: entry.manufacturer,
      memory: memory ?? defaultMemory,
      count,
      formFactor,
      custom: false,
      isTrainium: entry.isTrainium,
      aliases: entry.aliases,
    }),
  };
}

function prefixed(prefix: string, issues: readonly ConfigurationIssue[]): ConfigurationIssue[] {
  return issues.map((issue) => ({
    path: issue.path ? `${prefix}.${issue.path}` : prefix,
    message: issue.message,
  }));
}

function createFromEntry(entry: AcceleratorCatalogEntry, options: unknown): Accelerator {
  const checked = checkEntryOptions(entry, options);
  if (!checked.ok) throw new ConfigurationError({ issues: prefixed(entry.name, checked.issues) });
  return checked.accelerator;
}

const customNameSchema = z
  .string({ error: (issue) => `expected a non-empty name, received ${describeValue(issue.input)}` })
  .trim()
  .min(1, { error: "expected a non-empty name" });

const customOptionsSchema = z.strictObject(
  {
    memory: z
      .string({ error: (issue) => `expected memory like "48GB", received ${describeValue(issue.input)}` })
      .regex(memoryPattern, {
        error: (issue) => `expected memory like "48GB", received ${describeValue(issue.input)}`,
      })
      .optional(),
    count: countSchema.optional(),
    formFactor: z
      .string({ error: (issue) => `expected a form factor name, received ${describeValue(issue.input)}` })
      .min(1, { error: "expected a non-empty form factor name" })
      .optional(),
  },
  { error: optionsObjectMessage },
);

function createCustom(name: unknown, options: unknown): Accelerator {
  const nameResult = customNameSchema.safeParse(name);
  const optionsResult = customOptionsSchema.safeParse(options === undefined ? {} : options);
  const issues: ConfigurationIssue[] = [];
  if (!nameResult.success)
    issues.push(...toConfigurationIssues(nameResult.error.issues, "Custom.name", name));
  if (!optionsResult.success)
    issues.push(...toConfigurationIssues(optionsResult.error.issues, "Custom", options));
  if (!nameResult.success || !optionsResult.success) throw new ConfigurationError({ issues });
  return freezeAccelerator({
    name: nameResult.data,
    manufacturer: "custom",
    memory: optionsResult.data.memory,
    count: optionsResult.data.count ?? 1,
    formFactor: optionsResult.data.formFactor,
    custom: true,
    isTrainium: false,
    aliases: [],
  });
}

function buildFactories(): AcceleratorFactories {
  const factories: Record<string, (...args: readonly unknown[]) => Accelerator> = {};
  for (const entry of acceleratorCatalog)
    factories[entry.name] = (options) => createFromEntry(entry, options);
  factories.Custom = (name, options) => createCustom(name, options);
  // The loop above gives every catalog name a factory, which is what the mapped type promises.
  return Object.freeze(factories) as AcceleratorFactories;
}

/**
 * The accelerator factories, one per catalog entry plus `Custom`:
 *
 * ```ts
 * import * as sky from "@skyward/core";
 *
 * sky.accelerators.A100();                                  // 80GB, count 1
 * sky.accelerators.A100({ memory: "40GB", count: 8 });
 * sky.accelerators.H100({ formFactor: "NVL" });             // 94GB
 * sky.accelerators.Custom("My-GPU", { memory: "48GB", count: 2 });
 * ```
 *
 * Options are checked at runtime too; bad ones throw {@link ConfigurationError} with paths such as
 * `A100.memory` and `H100.count`.
 */
export const accelerators: AcceleratorFactories = buildFactories();

/**
 * Resolves an accelerator written as a string (in `skyward.toml`), throwing
 * {@link ConfigurationError} at `path` when it is not one. Accepted, case-insensitively and with
 * spaces, `-` and `_` interchangeable or absent:
 *
 * - a canonical name or alias: `"A100"`, `"rtx-4090"`, `"RTX 4090"`, `"a6000"`, `"v5e"`, `"trn2"`;
 * - vendor words in front, ignored: `NVIDIA`, `GeForce`, `Tesla`, `AMD`, `Instinct`, `Intel`,
 *   `Habana`, `Google`, `AWS` (`"NVIDIA GeForce RTX 4090"`, `"AMD Instinct MI300X"`);
 * - after the name, in any order: a memory variant (`"A100-40GB"`, `"A100 80GB"`, `"80G"`), a form
 *   factor (`"H100-SXM"`, `"H100 NVL"`; `SXM2`…`SXM6` read as `SXM`, `PCIE` as `PCIe`), and memory-type
 *   words that are ignored (`HBM3`, `GDDR6X`, …), so nvidia-smi names such as `"NVIDIA A100-SXM4-80GB"`
 *   and `"NVIDIA H100 80GB HBM3"` resolve;
 * - a count per node: `"A100:8"`, `"A100x8"`, `"A100 x 8"`, `"8x A100"` (a positive number; default 1).
 *
 * Memory variants and form factors are checked against the catalog entry exactly as the factories
 * check them. An unknown name fails with `unknown accelerator "FOO"` and up to three close names.
 */
export function acceleratorFromName(text: string, path: string): Accelerator {
  const fail = (message: string): never => {
    throw new ConfigurationError({ issues: [{ path, message }] });
  };
  if (typeof text !== "string")
    return fail(`expected an accelerator name such as "A100", received ${describeValue(text)}`);
  const trimmed = text.trim();
  if (trimmed.length === 0) return fail('expected an accelerator name such as "A100", received ""');
  const { model, count, countText } = splitCount(trimmed);
  if (count !== undefined && !(Number.isFinite(count) && count > 0)) {
    return fail(`expected a positive count after the name, received ${describeValue(countText)}`);
  }
  const parsed = parseModelName(model);
  if (!parsed) return fail(unknownNameMessage(model.trim()));
  const options: Record<string, unknown> = {};
  if (count !== undefined) options.count = count;
  if (parsed.memory !== undefined) options.memory = parsed.memory;
  if (parsed.formFactor !== undefined) options.formFactor = parsed.formFactor;
  const checked = checkEntryOptions(parsed.entry, options);
  if (!checked.ok) {
    throw new ConfigurationError({
      issues: checked.issues.map((issue) => ({
        path,
        message: `${parsed.entry.name} ${issue.path}: ${issue.message}`,
      })),
    });
  }
  return checked.accelerator;
}

// ---------------------------------------------------------------------------------------------
// The schema used by Spec validation
// ---------------------------------------------------------------------------------------------

const notAnAcceleratorMessage = (issue: { code?: string; input?: unknown }) => {
  if (issue.code !== "invalid_type") return undefined;
  const received =
    typeof issue.input === "string"
      ? `the string ${JSON.stringify(issue.input)}; strings name accelerators only in skyward.toml`
      : describeValue(issue.input);
  return `expected an accelerator from sky.accelerators (e.g. sky.accelerators.A100()), received ${received}`;
};

function sameList(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((value, index) => value === b[index]);
}

/**
 * Validates that a value is an {@link Accelerator}: built by `sky.accelerators`, or a structurally
 * complete object (a spread of one, say) whose catalog fields agree with the catalog, or a custom one
 * (`custom: true`). The output is a frozen accelerator. Strings are rejected with a message pointing
 * at `sky.accelerators`, since they are valid only in `skyward.toml`.
 */
export const acceleratorSchema = z
  .strictObject(
    {
      kind: z.literal("accelerator", {
        error: (issue) => `expected "accelerator", received ${describeValue(issue.input)}`,
      }),
      name: z.string().trim().min(1, { error: "expected a non-empty name" }),
      manufacturer: z.enum(manufacturers, { error: oneOf(manufacturers) }),
      memory: z
        .string()
        .regex(memoryPattern, {
          error: (issue) => `expected memory like "48GB", received ${describeValue(issue.input)}`,
        })
        .optional(),
      memoryGb: z.number().positive().optional(),
      count: countSchema,
      formFactor: z.string().min(1).optional(),
      custom: z.boolean(),
      isTrainium: z.boolean(),
      aliases: z.array(z.string()).readonly(),
    },
    { error: notAnAcceleratorMessage },
  )
  // A transform, not a refinement: it runs only once the shape is valid, so no issue is reported twice.
  .transform((value, context): Accelerator => {
    const fail = (path: string, message: string) =>
      context.addIssue({ code: "custom", path: [path], message, input: value });
    const expectDerived = (path: string, ok: boolean, expected: unknown, received: unknown) => {
      if (!ok)
        fail(
          path,
          `expected ${describeValue(expected)} for ${value.name}, received ${describeValue(received)}`,
        );
    };
    const expectedGb = value.memory === undefined ? undefined : memoryInGb(value.memory);
    expectDerived("memoryGb", value.memoryGb === expectedGb, expectedGb, value.memoryGb);
    const entry = value.custom ? undefined : catalogEntriesByName.get(value.name);
    if (value.custom) {
      expectDerived("manufacturer", value.manufacturer === "custom", "custom", value.manufacturer);
    } else if (!entry) {
      fail(
        "name",
        `${unknownNameMessage(value.name)} (use sky.accelerators.Custom for accelerators outside the catalog)`,
      );
    } else {
      expectDerived(
        "manufacturer",
        value.manufacturer === entry.manufacturer,
        entry.manufacturer,
        value.manufacturer,
      );
      expectDerived("isTrainium", value.isTrainium === entry.isTrainium, entry.isTrainium, value.isTrainium);
      if (!sameList(value.aliases, entry.aliases))
        fail("aliases", `expected the catalog aliases of ${entry.name}`);
      const checked = checkEntryOptions(entry, {
        memory: value.memory,
        ...(value.formFactor === undefined ? {} : { formFactor: value.formFactor }),
      });
      if (!checked.ok) for (const issue of checked.issues) fail(issue.path, issue.message);
      if (value.memory === undefined)
        fail("memory", `expected one of ${quoted(entry.memory)}, received nothing`);
    }
    return freezeAccelerator({
      name: value.name,
      manufacturer: value.manufacturer,
      memory: value.memory,
      count: value.count,
      formFactor: value.formFactor,
      custom: value.custom,
      isTrainium: value.isTrainium,
      aliases: value.aliases,
    });
  });
