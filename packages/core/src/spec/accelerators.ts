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

/** Who makes an accelerator; `custom` for devices built with `sky.accelerators.Custom`. */
export type AcceleratorManufacturer = "nvidia" | "amd" | "aws" | "google" | "intel" | "custom";

const manufacturers = [
  "nvidia",
  "amd",
  "aws",
  "google",
  "intel",
  "custom",
] as const satisfies readonly AcceleratorManufacturer[];

/** One accelerator request: which device, which variant, how many per node. Frozen; build it with `sky.accelerators`. */
export interface Accelerator {
  /** Brand: marks a value built as an accelerator (strings are not accelerators outside `skyward.toml`). */
  readonly kind: "accelerator";
  /** Canonical name used for provider matching (`A100`, `H100`, `RTX_4090`, `MI300X`, `Trainium2`, `TPU_v5e`), or the custom name. */
  readonly name: string;
  /** Who makes it; `custom` for custom accelerators. */
  readonly manufacturer: AcceleratorManufacturer;
  /** Memory per accelerator as written (`"80GB"`); undefined only for a custom accelerator given no memory. */
  readonly memory: string | undefined;
  /** {@link Accelerator.memory} in GB (`80`); undefined only for a custom accelerator given no memory. */
  readonly memoryGb: number | undefined;
  /** Accelerators per node; fractional values (a share of one device) are allowed, always > 0. */
  readonly count: number;
  /**
   * The form factor asked for (`SXM`, `PCIe`, `NVL`, …), or undefined for any. The offer query carries
   * it; offers labelled with another one are never used (see `OfferQuery.accelerator.formFactor`).
   */
  readonly formFactor: string | undefined;
  /** True for accelerators built with `sky.accelerators.Custom`. */
  readonly custom: boolean;
  /** True for AWS Trainium chips, which need the Neuron SDK rather than CUDA. */
  readonly isTrainium: boolean;
  /** Other names this accelerator is known by (`A6000` for `RTX_A6000`), for matching provider offer names. */
  readonly aliases: readonly string[];
}

/** The data behind one catalog entry, before it gets its name. */
interface CatalogEntrySource {
  readonly manufacturer: Exclude<AcceleratorManufacturer, "custom">;
  /** Architecture or product family, for humans. */
  readonly architecture: string;
  /** Memory variants per accelerator, smallest first. */
  readonly memory: readonly [string, ...string[]];
  /** The variant used when none is asked for; the first one when absent. */
  readonly defaultMemory?: string;
  readonly formFactors?: readonly [string, ...string[]];
  /** Form factors that exist only with some of the memory variants (the H100 NVL has 94GB). */
  readonly formFactorMemory?: Readonly<Record<string, readonly [string, ...string[]]>>;
  readonly aliases?: readonly string[];
}

// Memory is per device as the provider sees it (per GPU, per TPU chip, per Trainium chip), from the
// vendors' public spec sheets. Where a spec sheet and what clouds actually expose differ, the
// default is what clouds expose (B200: 180GB in HGX/DGX systems, 192GB on paper).
const catalogData = {
  // NVIDIA data centre — Blackwell
  GB300: { manufacturer: "nvidia", architecture: "Blackwell Ultra", memory: ["288GB"] },
  B300: { manufacturer: "nvidia", architecture: "Blackwell Ultra", memory: ["288GB"] },
  GB200: {
    manufacturer: "nvidia",
    architecture: "Blackwell (Grace Blackwell superchip; count counts GPUs, two per superchip)",
    memory: ["186GB", "192GB"],
    defaultMemory: "186GB",
  },
  B200: {
    manufacturer: "nvidia",
    architecture: "Blackwell",
    memory: ["180GB", "192GB"],
    defaultMemory: "180GB",
  },
  B100: { manufacturer: "nvidia", architecture: "Blackwell", memory: ["192GB"] },
  // NVIDIA data centre — Hopper
  H200: { manufacturer: "nvidia", architecture: "Hopper", memory: ["141GB"], formFactors: ["SXM", "NVL"] },
  H100: {
    manufacturer: "nvidia",
    architecture: "Hopper",
    memory: ["80GB", "94GB"],
    defaultMemory: "80GB",
    formFactors: ["SXM", "PCIe", "NVL"],
    formFactorMemory: { SXM: ["80GB"], PCIe: ["80GB"], NVL: ["94GB"] },
  },
  H800: { manufacturer: "nvidia", architecture: "Hopper", memory: ["80GB"], formFactors: ["SXM", "PCIe"] },
  H20: { manufacturer: "nvidia", architecture: "Hopper", memory: ["96GB"] },
  GH200: {
    manufacturer: "nvidia",
    architecture: "Hopper (Grace Hopper superchip)",
    memory: ["96GB", "144GB"],
    defaultMemory: "96GB",
    aliases: ["GH200 480GB"],
  },
  // NVIDIA data centre — Ampere
  A100: {
    manufacturer: "nvidia",
    architecture: "Ampere",
    memory: ["40GB", "80GB"],
    defaultMemory: "80GB",
    formFactors: ["SXM", "PCIe"],
  },
  A800: {
    manufacturer: "nvidia",
    architecture: "Ampere",
    memory: ["40GB", "80GB"],
    defaultMemory: "80GB",
    formFactors: ["SXM", "PCIe"],
    formFactorMemory: { SXM: ["80GB"] },
  },
  A40: { manufacturer: "nvidia", architecture: "Ampere", memory: ["48GB"] },
  A30: { manufacturer: "nvidia", architecture: "Ampere", memory: ["24GB"] },
  A10: { manufacturer: "nvidia", architecture: "Ampere", memory: ["24GB"] },
  A10G: { manufacturer: "nvidia", architecture: "Ampere (AWS variant of the A10)", memory: ["24GB"] },
  A16: { manufacturer: "nvidia", architecture: "Ampere (four GPUs per board)", memory: ["16GB"] },
  A2: { manufacturer: "nvidia", architecture: "Ampere", memory: ["16GB"] },
  // NVIDIA data centre — Ada Lovelace
  L40S: { manufacturer: "nvidia", architecture: "Ada Lovelace", memory: ["48GB"] },
  L40: { manufacturer: "nvidia", architecture: "Ada Lovelace", memory: ["48GB"] },
  L20: { manufacturer: "nvidia", architecture: "Ada Lovelace", memory: ["48GB"] },
  L4: { manufacturer: "nvidia", architecture: "Ada Lovelace", memory: ["24GB"] },
  // NVIDIA data centre — Turing, Volta, Pascal, Maxwell, Kepler
  T4: { manufacturer: "nvidia", architecture: "Turing", memory: ["16GB"] },
  T4G: { manufacturer: "nvidia", architecture: "Turing (AWS Graviton instances)", memory: ["16GB"] },
  V100: {
    manufacturer: "nvidia",
    architecture: "Volta",
    memory: ["16GB", "32GB"],
    defaultMemory: "32GB",
    formFactors: ["SXM", "PCIe"],
  },
  P100: {
    manufacturer: "nvidia",
    architecture: "Pascal",
    memory: ["12GB", "16GB"],
    defaultMemory: "16GB",
    formFactors: ["SXM", "PCIe"],
    formFactorMemory: { SXM: ["16GB"] },
  },
  P40: { manufacturer: "nvidia", architecture: "Pascal", memory: ["24GB"] },
  P4: { manufacturer: "nvidia", architecture: "Pascal", memory: ["8GB"] },
  M60: { manufacturer: "nvidia", architecture: "Maxwell (two GPUs per board)", memory: ["8GB"] },
  K80: { manufacturer: "nvidia", architecture: "Kepler (two GPUs per board)", memory: ["12GB"] },
  // NVIDIA workstation — Blackwell
  RTX_PRO_6000: {
    manufacturer: "nvidia",
    architecture: "Blackwell",
    memory: ["96GB"],
    formFactors: ["Workstation", "Max-Q", "Server"],
    aliases: ["RTX PRO 6000 Blackwell"],
  },
  RTX_PRO_5000: {
    manufacturer: "nvidia",
    architecture: "Blackwell",
    memory: ["48GB"],
    aliases: ["RTX PRO 5000 Blackwell"],
  },
  RTX_PRO_4500: {
    manufacturer: "nvidia",
    architecture: "Blackwell",
    memory: ["32GB"],
    aliases: ["RTX PRO 4500 Blackwell"],
  },
  RTX_PRO_4000: {
    manufacturer: "nvidia",
    architecture: "Blackwell",
    memory: ["24GB"],
    aliases: ["RTX PRO 4000 Blackwell"],
  },
  // NVIDIA workstation — Ada Lovelace
  RTX_6000_Ada: { manufacturer: "nvidia", architecture: "Ada Lovelace", memory: ["48GB"] },
  RTX_5880_Ada: { manufacturer: "nvidia", architecture: "Ada Lovelace", memory: ["48GB"] },
  RTX_5000_Ada: { manufacturer: "nvidia", architecture: "Ada Lovelace", memory: ["32GB"] },
  RTX_4500_Ada: { manufacturer: "nvidia", architecture: "Ada Lovelace", memory: ["24GB"] },
  RTX_4000_Ada: { manufacturer: "nvidia", architecture: "Ada Lovelace", memory: ["20GB"] },
  RTX_4000_SFF_Ada: { manufacturer: "nvidia", architecture: "Ada Lovelace", memory: ["20GB"] },
  RTX_2000_Ada: { manufacturer: "nvidia", architecture: "Ada Lovelace", memory: ["16GB"] },
  // NVIDIA workstation — Ampere
  RTX_A6000: { manufacturer: "nvidia", architecture: "Ampere", memory: ["48GB"], aliases: ["A6000"] },
  RTX_A5500: { manufacturer: "nvidia", architecture: "Ampere", memory: ["24GB"], aliases: ["A5500"] },
  RTX_A5000: { manufacturer: "nvidia", architecture: "Ampere", memory: ["24GB"], aliases: ["A5000"] },
  RTX_A4500: { manufacturer: "nvidia", architecture: "Ampere", memory: ["20GB"], aliases: ["A4500"] },
  RTX_A4000: { manufacturer: "nvidia", architecture: "Ampere", memory: ["16GB"], aliases: ["A4000"] },
  RTX_A2000: {
    manufacturer: "nvidia",
    architecture: "Ampere",
    memory: ["6GB", "12GB"],
    defaultMemory: "6GB",
    aliases: ["A2000"],
  },
  // NVIDIA workstation — Turing, Pascal
  Quadro_RTX_8000: { manufacturer: "nvidia", architecture: "Turing", memory: ["48GB"] },
  Quadro_RTX_6000: { manufacturer: "nvidia", architecture: "Turing", memory: ["24GB"] },
  Quadro_RTX_5000: { manufacturer: "nvidia", architecture: "Turing", memory: ["16GB"] },
  Quadro_RTX_4000: { manufacturer: "nvidia", architecture: "Turing", memory: ["8GB"] },
  Quadro_P4000: { manufacturer: "nvidia", architecture: "Pascal", memory: ["8GB"] },
  // NVIDIA consumer — Blackwell (50 series)
  RTX_5090: { manufacturer: "nvidia", architecture: "Blackwell", memory: ["32GB"] },
  RTX_5080: { manufacturer: "nvidia", architecture: "Blackwell", memory: ["16GB"] },
  RTX_5070_Ti: { manufacturer: "nvidia", architecture: "Blackwell", memory: ["16GB"] },
  RTX_5070: { manufacturer: "nvidia", architecture: "Blackwell", memory: ["12GB"] },
  RTX_5060_Ti: {
    manufacturer: "nvidia",
    architecture: "Blackwell",
    memory: ["8GB", "16GB"],
    defaultMemory: "16GB",
  },
  RTX_5060: { manufacturer: "nvidia", architecture: "Blackwell", memory: ["8GB"] },
  // NVIDIA consumer — Ada Lovelace (40 series)
  RTX_4090: { manufacturer: "nvidia", architecture: "Ada Lovelace", memory: ["24GB"] },
  RTX_4090D: { manufacturer: "nvidia", architecture: "Ada Lovelace (China variant)", memory: ["24GB"] },
  RTX_4080_Super: { manufacturer: "nvidia", architecture: "Ada Lovelace", memory: ["16GB"] },
  RTX_4080: { manufacturer: "nvidia", architecture: "Ada Lovelace", memory: ["16GB"] },
  RTX_4070_Ti_Super: { manufacturer: "nvidia", architecture: "Ada Lovelace", memory: ["16GB"] },
  RTX_4070_Ti: { manufacturer: "nvidia", architecture: "Ada Lovelace", memory: ["12GB"] },
  RTX_4070_Super: { manufacturer: "nvidia", architecture: "Ada Lovelace", memory: ["12GB"] },
  RTX_4070: { manufacturer: "nvidia", architecture: "Ada Lovelace", memory: ["12GB"] },
  RTX_4060_Ti: {
    manufacturer: "nvidia",
    architecture: "Ada Lovelace",
    memory: ["8GB", "16GB"],
    defaultMemory: "16GB",
  },
  RTX_4060: { manufacturer: "nvidia", architecture: "Ada Lovelace", memory: ["8GB"] },
  // NVIDIA consumer — Ampere (30 series)
  RTX_3090_Ti: { manufacturer: "nvidia", architecture: "Ampere", memory: ["24GB"] },
  RTX_3090: { manufacturer: "nvidia", architecture: "Ampere", memory: ["24GB"] },
  RTX_3080_Ti: { manufacturer: "nvidia", architecture: "Ampere", memory: ["12GB"] },
  RTX_3080: {
    manufacturer: "nvidia",
    architecture: "Ampere",
    memory: ["10GB", "12GB"],
    defaultMemory: "10GB",
  },
  RTX_3070_Ti: { manufacturer: "nvidia", architecture: "Ampere", memory: ["8GB"] },
  RTX_3070: { manufacturer: "nvidia", architecture: "Ampere", memory: ["8GB"] },
  RTX_3060_Ti: { manufacturer: "nvidia", architecture: "Ampere", memory: ["8GB"] },
  RTX_3060: {
    manufacturer: "nvidia",
    architecture: "Ampere",
    memory: ["8GB", "12GB"],
    defaultMemory: "12GB",
  },
  RTX_3050: { manufacturer: "nvidia", architecture: "Ampere", memory: ["6GB", "8GB"], defaultMemory: "8GB" },
  // NVIDIA consumer — Turing (20 and 16 series), Pascal (10 series), Titans
  RTX_2080_Ti: { manufacturer: "nvidia", architecture: "Turing", memory: ["11GB"] },
  RTX_2080_Super: { manufacturer: "nvidia", architecture: "Turing", memory: ["8GB"] },
  RTX_2080: { manufacturer: "nvidia", architecture: "Turing", memory: ["8GB"] },
  RTX_2070_Super: { manufacturer: "nvidia", architecture: "Turing", memory: ["8GB"] },
  RTX_2070: { manufacturer: "nvidia", architecture: "Turing", memory: ["8GB"] },
  RTX_2060_Super: { manufacturer: "nvidia", architecture: "Turing", memory: ["8GB"] },
  RTX_2060: { manufacturer: "nvidia", architecture: "Turing", memory: ["6GB", "12GB"], defaultMemory: "6GB" },
  GTX_1660_Ti: { manufacturer: "nvidia", architecture: "Turing", memory: ["6GB"] },
  GTX_1660_Super: { manufacturer: "nvidia", architecture: "Turing", memory: ["6GB"] },
  GTX_1660: { manufacturer: "nvidia", architecture: "Turing", memory: ["6GB"] },
  GTX_1080_Ti: { manufacturer: "nvidia", architecture: "Pascal", memory: ["11GB"] },
  GTX_1080: { manufacturer: "nvidia", architecture: "Pascal", memory: ["8GB"] },
  GTX_1070_Ti: { manufacturer: "nvidia", architecture: "Pascal", memory: ["8GB"] },
  GTX_1070: { manufacturer: "nvidia", architecture: "Pascal", memory: ["8GB"] },
  GTX_1060: { manufacturer: "nvidia", architecture: "Pascal", memory: ["3GB", "6GB"], defaultMemory: "6GB" },
  Titan_RTX: { manufacturer: "nvidia", architecture: "Turing", memory: ["24GB"] },
  Titan_V: { manufacturer: "nvidia", architecture: "Volta", memory: ["12GB"] },
  Titan_Xp: { manufacturer: "nvidia", architecture: "Pascal", memory: ["12GB"] },
  // AMD Instinct and Radeon
  MI355X: { manufacturer: "amd", architecture: "CDNA 4", memory: ["288GB"] },
  MI350X: { manufacturer: "amd", architecture: "CDNA 4", memory: ["288GB"] },
  MI325X: { manufacturer: "amd", architecture: "CDNA 3", memory: ["256GB"] },
  MI300X: { manufacturer: "amd", architecture: "CDNA 3", memory: ["192GB"] },
  MI300A: {
    manufacturer: "amd",
    architecture: "CDNA 3 (APU, memory shared with the CPU)",
    memory: ["128GB"],
  },
  MI250X: { manufacturer: "amd", architecture: "CDNA 2", memory: ["128GB"] },
  MI250: { manufacturer: "amd", architecture: "CDNA 2", memory: ["128GB"] },
  MI210: { manufacturer: "amd", architecture: "CDNA 2", memory: ["64GB"] },
  MI100: { manufacturer: "amd", architecture: "CDNA", memory: ["32GB"] },
  MI50: { manufacturer: "amd", architecture: "Vega 20", memory: ["16GB", "32GB"], defaultMemory: "16GB" },
  MI25: { manufacturer: "amd", architecture: "Vega 10", memory: ["16GB"] },
  Radeon_Pro_V710: { manufacturer: "amd", architecture: "RDNA 3", memory: ["28GB"], aliases: ["V710"] },
  Radeon_Pro_V520: { manufacturer: "amd", architecture: "RDNA", memory: ["8GB"], aliases: ["V520"] },
  Radeon_Pro_W7900: { manufacturer: "amd", architecture: "RDNA 3", memory: ["48GB"], aliases: ["W7900"] },
  RX_7900_XTX: {
    manufacturer: "amd",
    architecture: "RDNA 3",
    memory: ["24GB"],
    aliases: ["Radeon RX 7900 XTX"],
  },
  // AWS Trainium and Inferentia (per chip)
  Trainium1: {
    manufacturer: "aws",
    architecture: "Trainium",
    memory: ["32GB"],
    aliases: ["Trainium", "trn1"],
  },
  Trainium2: { manufacturer: "aws", architecture: "Trainium", memory: ["96GB"], aliases: ["trn2"] },
  Trainium3: { manufacturer: "aws", architecture: "Trainium", memory: ["144GB"], aliases: ["trn3"] },
  Inferentia1: {
    manufacturer: "aws",
    architecture: "Inferentia",
    memory: ["8GB"],
    aliases: ["Inferentia", "inf1"],
  },
  Inferentia2: { manufacturer: "aws", architecture: "Inferentia", memory: ["32GB"], aliases: ["inf2"] },
  // Google TPU (per chip; count counts chips)
  TPU_v2: { manufacturer: "google", architecture: "TPU", memory: ["16GB"], aliases: ["v2"] },
  TPU_v3: { manufacturer: "google", architecture: "TPU", memory: ["32GB"], aliases: ["v3"] },
  TPU_v4: { manufacturer: "google", architecture: "TPU", memory: ["32GB"], aliases: ["v4"] },
  TPU_v5e: {
    manufacturer: "google",
    architecture: "TPU",
    memory: ["16GB"],
    aliases: ["v5e", "v5litepod", "v5lite", "TPU v5 lite"],
  },
  TPU_v5p: { manufacturer: "google", architecture: "TPU", memory: ["95GB"], aliases: ["v5p"] },
  TPU_v6e: {
    manufacturer: "google",
    architecture: "TPU (Trillium)",
    memory: ["32GB"],
    aliases: ["v6e", "Trillium"],
  },
  TPU_v7: {
    manufacturer: "google",
    architecture: "TPU (Ironwood)",
    memory: ["192GB"],
    aliases: ["v7", "tpu7x", "Ironwood"],
  },
  // Intel Gaudi and Data Center GPU Max
  Gaudi: { manufacturer: "intel", architecture: "Gaudi (Habana)", memory: ["32GB"], aliases: ["Gaudi1"] },
  Gaudi2: { manufacturer: "intel", architecture: "Gaudi (Habana)", memory: ["96GB"] },
  Gaudi3: { manufacturer: "intel", architecture: "Gaudi (Habana)", memory: ["128GB"] },
  GPU_Max_1550: {
    manufacturer: "intel",
    architecture: "Xe-HPC (Ponte Vecchio)",
    memory: ["128GB"],
    aliases: ["Max 1550", "Data Center GPU Max 1550"],
  },
  GPU_Max_1100: {
    manufacturer: "intel",
    architecture: "Xe-HPC (Ponte Vecchio)",
    memory: ["48GB"],
    aliases: ["Max 1100", "Data Center GPU Max 1100"],
  },
} as const satisfies Record<string, CatalogEntrySource>;

type CatalogData = typeof catalogData;

/** The canonical name of every catalog accelerator (`"A100"`, `"RTX_4090"`, `"TPU_v5e"`, …). */
export type AcceleratorName = keyof CatalogData;

type MemoryOf<N extends AcceleratorName> = CatalogData[N]["memory"][number];
type FormFactorOf<N extends AcceleratorName> = CatalogData[N] extends {
  readonly formFactors: readonly (infer F extends string)[];
}
  ? F
  : never;

/**
 * Options of a catalog factory. `M` and `F` are the entry's memory variants and form factors, so
 * `A100({ memory: "20GB" })` and `A10G({ formFactor: "SXM" })` are type errors.
 */
export interface AcceleratorOptions<M extends string = string, F extends string = string> {
  /** Accelerators per node, > 0; fractional values share a device. Default 1. */
  readonly count?: number;
  /** The memory variant; default the entry's default (`A100`: `"80GB"`). */
  readonly memory?: M;
  /**
   * The form factor; default any. Sent to providers with the offer query; the pool drops offers
   * labelled with another form factor, and keeps (and reports, in `node.provisioned`) offers whose
   * provider cannot tell.
   */
  readonly formFactor?: F;
}

/** The options of `sky.accelerators.<Name>(…)` for one catalog entry. */
export type AcceleratorOptionsFor<N extends AcceleratorName> = AcceleratorOptions<
  MemoryOf<N>,
  FormFactorOf<N>
>;

/** Options of `sky.accelerators.Custom(name, …)`. */
export interface CustomAcceleratorOptions {
  /** Memory per accelerator such as `"48GB"`. */
  readonly memory?: string;
  /** Accelerators per node, > 0. Default 1. */
  readonly count?: number;
  /**
   * A form factor label, sent to providers in the offer query as is; an offer labelled with another
   * one (compared case aside, `SXM5` as `SXM`) is dropped, an unlabelled one kept and reported.
   */
  readonly formFactor?: string;
}

/** `sky.accelerators`: one factory per catalog entry plus `Custom`. */
export type AcceleratorFactories = {
  readonly [N in AcceleratorName]: (options?: AcceleratorOptionsFor<N>) => Accelerator;
} & {
  /** An accelerator outside the catalog: `Custom("My-GPU", { memory: "48GB", count: 2 })`. */
  readonly Custom: (name: string, options?: CustomAcceleratorOptions) => Accelerator;
};

/** One entry of {@link acceleratorCatalog}, for providers matching offers against requests. */
export interface AcceleratorCatalogEntry {
  /** The canonical name (`"H100"`). */
  readonly name: AcceleratorName;
  /** Who makes it. */
  readonly manufacturer: Exclude<AcceleratorManufacturer, "custom">;
  /** Architecture or product family, for humans (`"Hopper"`). */
  readonly architecture: string;
  /** Memory variants per device, smallest first (`["40GB", "80GB"]`). */
  readonly memory: readonly string[];
  /** The variant used when none is asked for. */
  readonly defaultMemory: string;
  /** Form factors that can be asked for; empty when the entry has none. */
  readonly formFactors: readonly string[];
  /** Form factors that come only with some memory variants (`{ NVL: ["94GB"] }` for the H100). */
  readonly formFactorMemory: Readonly<Record<string, readonly string[]>>;
  /** Other names it is known by; matching ignores case, spaces, `-` and `_`. */
  readonly aliases: readonly string[];
  /** True for AWS Trainium chips. */
  readonly isTrainium: boolean;
}

/** Every catalog accelerator, in catalog order (NVIDIA data centre first). Frozen. */
export const acceleratorCatalog: readonly AcceleratorCatalogEntry[] = Object.freeze(
  (Object.keys(catalogData) as AcceleratorName[]).map((name): AcceleratorCatalogEntry => {
    const source: CatalogEntrySource = catalogData[name];
    return Object.freeze({
      name,
      manufacturer: source.manufacturer,
      architecture: source.architecture,
      memory: Object.freeze([...source.memory]),
      defaultMemory: source.defaultMemory ?? source.memory[0],
      formFactors: Object.freeze([...(source.formFactors ?? [])]),
      formFactorMemory: Object.freeze({ ...source.formFactorMemory }),
      aliases: Object.freeze([...(source.aliases ?? [])]),
      isTrainium: name.startsWith("Trainium"),
    });
  }),
);

const entriesByName = new Map<string, AcceleratorCatalogEntry>(
  acceleratorCatalog.map((entry) => [entry.name, entry]),
);

// ---------------------------------------------------------------------------------------------
// Building and validating
// ---------------------------------------------------------------------------------------------

function quoted(values: readonly string[]): string {
  return values.map((value) => JSON.stringify(value)).join(", ");
}

/** How a bad value reads in a message: strings quoted, numbers as written. */
function describeValue(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value);
  if (typeof value === "number" || typeof value === "boolean" || typeof value === "bigint")
    return String(value);
  if (value === null) return "null";
  if (value === undefined) return "nothing";
  if (Array.isArray(value)) return "an array";
  return typeof value;
}

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

// ---------------------------------------------------------------------------------------------
// Names: canonicalisation, skyward.toml strings, suggestions
// ---------------------------------------------------------------------------------------------

function normalizeKey(text: string): string {
  return text.replace(/[\s_-]+/g, "").toUpperCase();
}

const entriesByKey = new Map<string, AcceleratorCatalogEntry>();
for (const entry of acceleratorCatalog) {
  for (const key of new Set([entry.name, ...entry.aliases].map(normalizeKey))) {
    const clash = entriesByKey.get(key);
    if (clash) throw new Error(`accelerator catalog: "${key}" names both ${clash.name} and ${entry.name}`);
    entriesByKey.set(key, entry);
  }
}

/** Leading words that vendors and nvidia-smi put before the model name. */
const vendorWords = new Set([
  "NVIDIA",
  "GEFORCE",
  "TESLA",
  "AMD",
  "INSTINCT",
  "INTEL",
  "HABANA",
  "GOOGLE",
  "AWS",
]);
/** Trailing words that say nothing about which variant it is. */
const noiseWords = /^(?:HBM\d?E?|GDDR\dX?|EDITION|GENERATION)$/i;
const memoryWord = /^(\d+(?:\.\d+)?)\s*GB?$/i;

const formFactorKeys = new Map<string, string>(); // normalized key → the catalog's spelling
for (const entry of acceleratorCatalog) {
  for (const formFactor of entry.formFactors) formFactorKeys.set(normalizeKey(formFactor), formFactor);
}

function formFactorOfWords(words: readonly string[]): string | undefined {
  const key = normalizeKey(words.join(""));
  if (/^SXM\d?$/.test(key)) return "SXM";
  if (/^PCIE\d?$/.test(key)) return "PCIe";
  return formFactorKeys.get(key);
}

interface ParsedName {
  entry: AcceleratorCatalogEntry;
  memory: string | undefined;
  formFactor: string | undefined;
}

/** Resolves a model name with optional vendor prefix, memory and form-factor words; no count. */
function parseModelName(text: string): ParsedName | undefined {
  const direct = entriesByKey.get(normalizeKey(text));
  if (direct) return { entry: direct, memory: undefined, formFactor: undefined };
  const words = text.split(/[\s_-]+/).filter((word) => word.length > 0);
  while (words.length > 1 && vendorWords.has(words[0]?.toUpperCase() ?? "")) words.shift();
  let memory: string | undefined;
  let formFactor: string | undefined;
  let stripped = true;
  while (stripped) {
    stripped = false;
    const afterVendor = entriesByKey.get(normalizeKey(words.join("")));
    if (afterVendor) return { entry: afterVendor, memory, formFactor };
    const last = words.at(-1) ?? "";
    const memoryMatch = memoryWord.exec(last);
    if (words.length > 1 && memoryMatch && memory === undefined) {
      memory = `${memoryMatch[1]}GB`;
      words.pop();
      stripped = true;
    } else if (words.length > 1 && noiseWords.test(last)) {
      words.pop();
      stripped = true;
    } else if (formFactor === undefined) {
      for (const size of [2, 1]) {
        const candidate = words.length > size ? formFactorOfWords(words.slice(-size)) : undefined;
        if (candidate !== undefined) {
          formFactor = candidate;
          words.splice(-size);
          stripped = true;
          break;
        }
      }
    }
  }
  return undefined;
}

interface ParsedText {
  model: string;
  count: number | undefined;
  countText: string | undefined;
}

const countSuffixColon = /^(.*?)\s*:\s*(.*)$/;
const countSuffixTimes = /^(.+?)[\s_-]*[x×]\s*(\d+(?:\.\d+)?)$/i;
const countPrefixTimes = /^(\d+(?:\.\d+)?)\s*[x×]\s*(.+)$/i;

/** Splits a count (`A100:8`, `A100x8`, `8x A100`) off the model name. */
function splitCount(text: string): ParsedText {
  const colon = countSuffixColon.exec(text);
  if (colon) {
    const countText = colon[2] ?? "";
    return {
      model: colon[1] ?? "",
      count: /^\d+(?:\.\d+)?$/.test(countText) ? Number(countText) : Number.NaN,
      countText,
    };
  }
  for (const [pattern, modelIndex, countIndex] of [
    [countSuffixTimes, 1, 2],
    [countPrefixTimes, 2, 1],
  ] as const) {
    const match = pattern.exec(text);
    const model = match?.[modelIndex];
    const countText = match?.[countIndex];
    // "GTX1080" must not read as "GT" × 1080: the x form counts only when the rest is a known name.
    if (model !== undefined && countText !== undefined && parseModelName(model)) {
      return { model, count: Number(countText), countText };
    }
  }
  return { model: text, count: undefined, countText: undefined };
}

function levenshtein(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, index) => index);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const substitution = (previous[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1);
      current.push(Math.min((previous[j] ?? 0) + 1, (current[j - 1] ?? 0) + 1, substitution));
    }
    previous = current;
  }
  return previous[b.length] ?? 0;
}

/** Up to `limit` catalog names closest to `text`, closest first; nothing when nothing is close. */
function closestAcceleratorNames(text: string, limit = 3): string[] {
  const key = normalizeKey(text);
  if (key.length === 0) return [];
  const best = new Map<string, number>();
  for (const [candidateKey, entry] of entriesByKey) {
    const distance =
      candidateKey.includes(key) || key.includes(candidateKey)
        ? Math.abs(candidateKey.length - key.length) / 2
        : levenshtein(key, candidateKey);
    const known = best.get(entry.name);
    if (known === undefined || distance < known) best.set(entry.name, distance);
  }
  const threshold = Math.max(2, Math.ceil(key.length / 2));
  return [...best]
    .filter(([, distance]) => distance <= threshold)
    .sort((a, b) => a[1] - b[1] || a[0].localeCompare(b[0]))
    .slice(0, limit)
    .map(([name]) => name);
}

function unknownNameMessage(name: string): string {
  const suggestions = closestAcceleratorNames(name);
  const hint = suggestions.length > 0 ? `; did you mean ${quoted(suggestions)}?` : "";
  return `unknown accelerator ${JSON.stringify(name)}${hint}`;
}

/**
 * The canonical catalog name for an accelerator name as a provider or a person writes it, or
 * undefined when it names nothing in the catalog. Accepts everything {@link acceleratorFromName}
 * accepts and ignores the variant: `"NVIDIA A100-SXM4-80GB"` → `"A100"`, `"rtx 4090"` → `"RTX_4090"`,
 * `"H100 NVL"` → `"H100"`, `"Tesla V100-SXM2-16GB"` → `"V100"`.
 */
export function canonicalAcceleratorName(text: string): AcceleratorName | undefined {
  if (typeof text !== "string") return undefined;
  return parseModelName(splitCount(text.trim()).model)?.entry.name;
}

/**
 * The form factor an accelerator name as a provider writes it says, in the catalog's spelling, or
 * undefined when it says none, names nothing in the catalog, or names one its catalog entry has no
 * variant of (an RTX 4090 is only ever PCIe: `"GeForce RTX 4090 PCIe"` → undefined): `"H100 SXM"` →
 * `"SXM"`, `"NVIDIA A100-SXM4-80GB"` → `"SXM"`, `"NVIDIA H100 PCIe"` → `"PCIe"`, `"H100 NVL"` →
 * `"NVL"`, `"NVIDIA H100 80GB HBM3"` → undefined. For providers labelling their offers
 * (`Offer.accelerator.formFactor`).
 */
export function acceleratorFormFactor(text: string): string | undefined {
  if (typeof text !== "string") return undefined;
  const parsed = parseModelName(splitCount(text.trim()).model);
  return parsed?.formFactor !== undefined && parsed.entry.formFactors.includes(parsed.formFactor)
    ? parsed.formFactor
    : undefined;
}

/**
 * A form factor in the catalog's spelling (`"sxm5"` → `"SXM"`, `"PCIE"` → `"PCIe"`, `"nvl"` →
 * `"NVL"`), or the text itself trimmed when the catalog does not know it (a custom accelerator's);
 * undefined for nothing or blank text. Two form factors are the same when their canonical forms
 * are equal, case aside.
 */
export function canonicalFormFactor(text: string | undefined): string | undefined {
  if (typeof text !== "string" || text.trim() === "") return undefined;
  const words = text.trim().split(/[\s_-]+/);
  return formFactorOfWords(words) ?? text.trim();
}

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
    const entry = value.custom ? undefined : entriesByName.get(value.name);
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
