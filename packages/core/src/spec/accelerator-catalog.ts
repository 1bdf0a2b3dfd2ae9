/**
 * The accelerator catalog: every accelerator Skyward knows by name, its memory variants, form
 * factors and aliases, from the vendors' public spec sheets — the data the factories
 * (`accelerators.ts`) and the name parser (`accelerator-names.ts`) read.
 */

/** Who makes an accelerator; `custom` for devices built with `sky.accelerators.Custom`. */
export type AcceleratorManufacturer = "nvidia" | "amd" | "aws" | "google" | "intel" | "custom";

/** Every manufacturer, in the order messages list them. */
export const manufacturers = [
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

/** The catalog entries by canonical name. */
export const catalogEntriesByName: ReadonlyMap<string, AcceleratorCatalogEntry> = new Map<
  string,
  AcceleratorCatalogEntry
>(acceleratorCatalog.map((entry) => [entry.name, entry]));
