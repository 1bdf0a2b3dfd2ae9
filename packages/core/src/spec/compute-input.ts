import { isWorkersPerAccelerator } from "../contract/plugin.js";
import { ConfigurationError, type ConfigurationIssue } from "../errors/errors.js";
import { parseInput } from "../errors/validation.js";
import { type Options, type OptionsInput, optionsSchema } from "./options.js";
import {
  type PoolSpec,
  resolvePoolSpec,
  SPEC_FIELDS,
  type Spec,
  type SpecInput,
  specSchema,
} from "./spec.js";

/** Where to look for the configuration files. */
export interface ConfigLocations {
  /** Directory holding `skyward.toml`. Default `process.cwd()`. */
  cwd?: string;
  /** Home directory holding `.skyward/defaults.toml`. Default `os.homedir()`. */
  home?: string;
}

/** A named pool, ready to be validated as a spec: its provider created, its fields camelCase. */
export interface NamedPool {
  readonly spec: SpecInput;
  readonly options: OptionsInput;
  /** The prefix for error paths inside this pool (`pools.NAME`). */
  readonly path: string;
}

/** The flat form: one spec's fields given directly, plus options. */
export interface FlatComputeInput extends SpecInput {
  options?: OptionsInput;
  specs?: never;
  name?: never;
}

/** The several-specs form: providers tried by `options.selection` (`"cheapest"` or `"first"`). */
export interface MultiSpecComputeInput {
  specs: readonly (SpecInput | Spec)[];
  options?: OptionsInput;
  name?: never;
}

/** The named form: `[pools.NAME]` from `skyward.toml` (over `~/.skyward/defaults.toml`). */
export interface NamedComputeInput {
  name: string;
  options?: OptionsInput;
  /** Where the configuration files are. Default: the working directory and the home directory. */
  config?: ConfigLocations;
  specs?: never;
}

/**
 * What `sky.compute` takes, in one of three mutually exclusive forms: flat spec fields, `specs`, or
 * `name`. Mixing them is a configuration error.
 */
export type ComputeInput = FlatComputeInput | MultiSpecComputeInput | NamedComputeInput;

/** The validated pool request: one {@link PoolSpec} per spec, in the order given, and the options. */
export interface ResolvedCompute {
  readonly specs: readonly PoolSpec[];
  readonly options: Options;
  /** The pool's name when it came from `skyward.toml`. */
  readonly name: string | undefined;
  /**
   * The field path each spec's issues are reported under, by index: `specs[1]`, the named pool's
   * `pools.NAME`, or "" for the flat form (the entry point checks the specs' local paths with it).
   */
  readonly specPaths: readonly string[];
}

const FORM_KEYS = ["specs", "name", "options", "config"] as const;

function fail(issues: ConfigurationIssue[]): never {
  throw new ConfigurationError({ issues });
}

/** `record` without its undefined fields: an option given as undefined is one not given. */
function definedFields<T extends object>(record: T | undefined): Partial<T> {
  return Object.fromEntries(
    Object.entries(record ?? {}).filter(([, value]) => value !== undefined),
  ) as Partial<T>;
}

function mergeOptions(base: OptionsInput, over: OptionsInput | undefined): OptionsInput {
  if (over === undefined) return base;
  // Not a table: left for the options schema to reject, rather than spread into nothing.
  if (typeof over !== "object" || over === null || Array.isArray(over)) return over;
  const worker = base.worker || over.worker ? { ...base.worker, ...definedFields(over.worker) } : undefined;
  return { ...base, ...definedFields(over), ...(worker ? { worker } : {}) };
}

/**
 * One worker per accelerator runs every worker as a process of its own (each pinned to its device
 * before anything imports CUDA), so an explicit `worker.executor: "thread"` cannot be honoured: it is
 * refused, naming the option, rather than silently replaced.
 */
function refuseThreadsPerAccelerator(rawOptions: unknown, specs: readonly PoolSpec[]): void {
  const worker = (rawOptions as { worker?: { executor?: unknown } } | undefined)?.worker;
  if (worker?.executor !== "thread") return;
  const plugin = specs
    .flatMap((spec) => spec.plugins)
    .find((candidate) => isWorkersPerAccelerator(candidate.workersPerNode));
  if (!plugin) return;
  fail([
    {
      path: "options.worker.executor",
      message: `plugin "${plugin.name}" runs one worker process per accelerator, which the thread executor cannot do: leave executor unset ("auto") or set "process"`,
    },
  ]);
}

/**
 * Reads the `[pools.NAME]` entry a named request means (with its provider created). The entry point
 * supplies it: resolving `skyward.toml` is its business, not the spec's.
 */
export type NamedPoolLoader = (input: NamedComputeInput) => Promise<NamedPool>;

const noNamedPools: NamedPoolLoader = async () =>
  fail([{ path: "name", message: "a named pool is read from skyward.toml, which only sky.compute reads" }]);

/**
 * Validates a `sky.compute` request before anything else happens: the form, every spec, the options,
 * and (for the named form) the entry `loadNamedPool` reads. The local paths the specs name are the
 * entry point's to check (`config/local-files.ts`, `checkLocalInputs`): this reads no file.
 */
export async function validateComputeInput(
  input: ComputeInput,
  loadNamedPool: NamedPoolLoader = noNamedPools,
): Promise<ResolvedCompute> {
  if (typeof input !== "object" || input === null || Array.isArray(input)) {
    fail([{ path: "", message: "expected an object: flat spec fields, { specs: [...] } or { name }" }]);
  }
  const record = input as unknown as Record<string, unknown>;
  const flatKeys = Object.keys(record).filter((key) => (SPEC_FIELDS as readonly string[]).includes(key));
  const unknownKeys = Object.keys(record).filter(
    (key) =>
      !(SPEC_FIELDS as readonly string[]).includes(key) && !(FORM_KEYS as readonly string[]).includes(key),
  );
  if (unknownKeys.length > 0) {
    fail(
      unknownKeys.map((key) => ({
        path: key,
        message: `unknown field (expected spec fields ${SPEC_FIELDS.join(", ")}, or specs, name, options)`,
      })),
    );
  }
  const hasSpecs = record.specs !== undefined;
  const hasName = record.name !== undefined;
  if (hasSpecs && flatKeys.length > 0) {
    fail([
      {
        path: "specs",
        message: `cannot be combined with flat spec fields (${flatKeys.join(", ")}): put them inside each spec`,
      },
    ]);
  }
  if (hasName && (hasSpecs || flatKeys.length > 0)) {
    fail([
      {
        path: "name",
        message: `a named pool cannot be combined with ${hasSpecs ? "specs" : `spec fields (${flatKeys.join(", ")})`}`,
      },
    ]);
  }
  if (record.config !== undefined && !hasName) {
    fail([{ path: "config", message: "only allowed with name (it says where skyward.toml is)" }]);
  }

  if (hasName) {
    if (typeof record.name !== "string" || record.name.length === 0) {
      fail([{ path: "name", message: "expected the name of a [pools.*] entry in skyward.toml" }]);
    }
    const named = input as NamedComputeInput;
    const pool = await loadNamedPool(named);
    const spec = parseInput(specSchema, pool.spec, pool.path);
    const rawOptions = mergeOptions(pool.options, named.options);
    const options = parseInput(optionsSchema, rawOptions, "options");
    const resolved = resolvePoolSpec(spec, options);
    refuseThreadsPerAccelerator(rawOptions, [resolved]);
    return Object.freeze({
      specs: Object.freeze([resolved]),
      options,
      name: named.name,
      specPaths: Object.freeze([pool.path]),
    });
  }

  const options = parseInput(optionsSchema, record.options ?? {}, "options");
  if (hasSpecs) {
    if (!Array.isArray(record.specs)) fail([{ path: "specs", message: "expected an array of specs" }]);
    if (record.specs.length === 0) fail([{ path: "specs", message: "expected at least one spec" }]);
    const issues: ConfigurationIssue[] = [];
    const specs: PoolSpec[] = [];
    record.specs.forEach((entry: unknown, index: number) => {
      try {
        specs.push(resolvePoolSpec(parseInput(specSchema, entry, `specs[${index}]`), options));
      } catch (error) {
        if (!ConfigurationError.isInstance(error)) throw error;
        issues.push(...error.issues);
      }
    });
    if (issues.length > 0) fail(issues);
    refuseThreadsPerAccelerator(record.options, specs);
    const specPaths = Object.freeze(specs.map((_, index) => `specs[${index}]`));
    return Object.freeze({ specs: Object.freeze(specs), options, name: undefined, specPaths });
  }

  const flat: Record<string, unknown> = {};
  for (const key of flatKeys) flat[key] = record[key];
  const spec = resolvePoolSpec(parseInput(specSchema, flat), options);
  refuseThreadsPerAccelerator(record.options, [spec]);
  return Object.freeze({
    specs: Object.freeze([spec]),
    options,
    name: undefined,
    specPaths: Object.freeze([""]),
  });
}
