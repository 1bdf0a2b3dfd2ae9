import { z } from "zod";
import { type PluginV1, pluginSchema, workersPerNodeConflicts } from "../contract/plugin.js";
import { type Provider, providerSchema } from "../contract/provider.js";
import { parseInput } from "../errors/validation.js";
import { type Accelerator, acceleratorSchema } from "./accelerators.js";
import { type Image, type ImageInput, imageSchema } from "./image.js";
import type { Options } from "./options.js";
import { type Volume, type VolumeInput, volumeSchema } from "./volume.js";

/** How instances are bought: spot only, on-demand only, spot falling back to on-demand, or the cheaper of both. */
export type AllocationStrategy = "spot" | "on-demand" | "spot-if-available" | "cheapest";

/** The allocation strategies, default first. */
export const ALLOCATION_STRATEGIES: readonly AllocationStrategy[] = Object.freeze([
  "spot-if-available",
  "spot",
  "on-demand",
  "cheapest",
]);

/** CPU architectures a spec may ask for. */
export type Architecture = "x86_64" | "arm64";

/** A node topology with partial readiness and/or autoscaling, as given to {@link nodes}. */
export interface NodesInput {
  /** How many nodes to run (>= 1). */
  desired: number;
  /** How many must be ready before the pool is usable. Default: `desired`. */
  min?: number;
  /** Ceiling for autoscaling. Default: `desired` (no autoscaling). */
  max?: number;
}

/** A resolved node topology: `min <= desired <= max`. */
export interface Nodes {
  readonly desired: number;
  readonly min: number;
  readonly max: number;
}

/**
 * How many nodes a pool has:
 * - `4` — exactly 4; the pool is ready when all 4 are up;
 * - `[2, 8]` — elastic: start at 2, autoscale up to 8;
 * - `sky.nodes({ desired: 8, min: 4 })` — usable once 4 are up, keeps growing to 8;
 * - `sky.nodes({ desired: 4, min: 2, max: 16 })` — early start and autoscaling.
 */
export type NodeSpec = number | readonly [number, number] | NodesInput;

const nodeCount = (what: string) =>
  z
    .number({ error: `expected ${what} as a whole number >= 1` })
    .refine((value) => Number.isInteger(value) && value >= 1, {
      message: `expected ${what} as a whole number >= 1`,
    });

const nodesObjectSchema = z
  .strictObject({
    desired: nodeCount("the desired node count"),
    min: nodeCount("the minimum node count").optional(),
    max: nodeCount("the maximum node count").optional(),
  })
  .superRefine((value, context) => {
    if (value.min !== undefined && value.max !== undefined && value.min > value.max) {
      context.addIssue({
        code: "custom",
        path: ["min"],
        message: `must be <= max (${value.max}), received ${value.min}`,
      });
      return;
    }
    if (value.min !== undefined && value.min > value.desired) {
      context.addIssue({
        code: "custom",
        path: ["min"],
        message: `must be <= desired (${value.desired}), received ${value.min}`,
      });
    }
    if (value.max !== undefined && value.max < value.desired) {
      context.addIssue({
        code: "custom",
        path: ["max"],
        message: `must be >= desired (${value.desired}), received ${value.max}`,
      });
    }
  })
  .transform(
    (value): Nodes =>
      Object.freeze({
        desired: value.desired,
        min: value.min ?? value.desired,
        max: value.max ?? value.desired,
      }),
  );

/** Validates any {@link NodeSpec} into {@link Nodes}. */
export const nodeSpecSchema = z.union(
  [
    nodeCount("the node count").transform((n): Nodes => Object.freeze({ desired: n, min: n, max: n })),
    z
      .tuple([nodeCount("the initial node count"), nodeCount("the maximum node count")], {
        error: "expected a range [min, max] of two node counts",
      })
      .superRefine(([low, high], context) => {
        if (low > high) {
          context.addIssue({
            code: "custom",
            path: [1],
            message: `must be >= the initial node count (${low}), received ${high}`,
          });
        }
      })
      .transform(([low, high]): Nodes => Object.freeze({ desired: low, min: low, max: high })),
    nodesObjectSchema,
  ],
  { message: "expected a node count (4), a range [min, max] ([2, 8]) or sky.nodes({ desired, min, max })" },
);

/** Validates a node topology: `sky.nodes({ desired: 8, min: 4 })`. */
export function nodes(input: NodesInput): Nodes {
  return parseInput(nodesObjectSchema, input, "nodes");
}

/** What to provision: one provider, one kind of node. Every field but `provider` is optional. */
export interface SpecInput {
  /** Where the nodes come from. Default: the built-in `Local` provider (this machine). */
  provider?: Provider;
  /** The accelerator per node (`sky.accelerators.A100()`); omit or `null` for CPU-only. */
  accelerator?: Accelerator | null;
  /** The node topology. Default 1. */
  nodes?: NodeSpec;
  /** Minimum vCPUs per node. */
  vcpus?: number;
  /** Minimum memory per node, GB. */
  memoryGb?: number;
  /** Minimum disk per node, GB. */
  diskGb?: number;
  /** CPU architecture. */
  architecture?: Architecture;
  /** Spot, on-demand, or both. Default `"spot-if-available"`. */
  allocation?: AllocationStrategy;
  /** The Python environment on each node. */
  image?: ImageInput | Image;
  /** The provider's region. Default: the provider's own default. */
  region?: string;
  /** Cap, USD per node per hour. */
  maxHourlyCost?: number;
  /** Seconds nodes stay up after the client lets go, waiting for it to reattach; 0 disables. Default 600. */
  ttl?: number;
  /** Buckets mounted on every node. */
  volumes?: readonly VolumeInput[];
  /** Framework plugins, in order. */
  plugins?: readonly PluginV1[];
}

/** A validated spec: every field resolved. `provider` undefined means the built-in `Local` provider. */
export interface Spec {
  readonly provider: Provider | undefined;
  readonly accelerator: Accelerator | null;
  readonly nodes: Nodes;
  readonly vcpus: number | undefined;
  readonly memoryGb: number | undefined;
  readonly diskGb: number | undefined;
  readonly architecture: Architecture | undefined;
  readonly allocation: AllocationStrategy;
  readonly image: Image;
  readonly region: string | undefined;
  readonly maxHourlyCost: number | undefined;
  readonly ttl: number;
  readonly volumes: readonly Volume[];
  readonly plugins: readonly PluginV1[];
}

/** The names of the {@link SpecInput} fields, which are the "flat" fields of `sky.compute`. */
export const SPEC_FIELDS = Object.freeze([
  "provider",
  "accelerator",
  "nodes",
  "vcpus",
  "memoryGb",
  "diskGb",
  "architecture",
  "allocation",
  "image",
  "region",
  "maxHourlyCost",
  "ttl",
  "volumes",
  "plugins",
] as const satisfies readonly (keyof SpecInput)[]);

const positiveNumber = (what: string) =>
  z
    .number({ error: `expected ${what} as a number > 0` })
    .refine((value) => Number.isFinite(value) && value > 0, { message: `expected ${what} as a number > 0` });

/** Validates a {@link SpecInput} into a {@link Spec}. */
export const specSchema = z
  .strictObject({
    provider: providerSchema.optional(),
    accelerator: acceleratorSchema.nullable().default(null),
    nodes: nodeSpecSchema.prefault(1),
    vcpus: positiveNumber("vCPUs").optional(),
    memoryGb: positiveNumber("memory in GB").optional(),
    diskGb: z
      .number({ error: "expected disk size in GB as a whole number > 0" })
      .int({ message: "expected disk size in GB as a whole number > 0" })
      .min(1, { message: "expected disk size in GB as a whole number > 0" })
      .optional(),
    architecture: z.enum(["x86_64", "arm64"], { message: 'expected "x86_64" or "arm64"' }).optional(),
    allocation: z
      .enum(["spot-if-available", "spot", "on-demand", "cheapest"], {
        message: 'expected "spot-if-available", "spot", "on-demand" or "cheapest"',
      })
      .default("spot-if-available"),
    image: imageSchema.optional(),
    region: z.string().min(1, { message: "expected a region name" }).optional(),
    maxHourlyCost: positiveNumber("a price in USD per node per hour").optional(),
    ttl: z
      .number({ error: "expected seconds as a whole number >= 0" })
      .int({ message: "expected seconds as a whole number >= 0" })
      .min(0, { message: "expected seconds as a whole number >= 0" })
      .default(600),
    volumes: z
      .array(volumeSchema, { error: "expected an array of volumes" })
      .default([])
      .superRefine((volumes, context) => {
        const seen = new Set<string>();
        volumes.forEach((volume, index) => {
          if (seen.has(volume.mount)) {
            context.addIssue({
              code: "custom",
              path: [index, "mount"],
              message: `duplicate mount point ${volume.mount}`,
            });
          }
          seen.add(volume.mount);
        });
      }),
    plugins: z
      .array(pluginSchema, { error: "expected an array of plugins" })
      .default([])
      .superRefine((plugins, context) => {
        const seen = new Set<string>();
        plugins.forEach((plugin, index) => {
          if (seen.has(plugin.name)) {
            context.addIssue({ code: "custom", path: [index], message: `duplicate plugin "${plugin.name}"` });
          }
          seen.add(plugin.name);
        });
        for (const { index, message } of workersPerNodeConflicts(plugins)) {
          context.addIssue({ code: "custom", path: [index], message });
        }
      }),
  })
  .transform(
    (value): Spec =>
      Object.freeze({
        provider: value.provider,
        accelerator: value.accelerator,
        nodes: value.nodes,
        vcpus: value.vcpus,
        memoryGb: value.memoryGb,
        diskGb: value.diskGb,
        architecture: value.architecture,
        allocation: value.allocation,
        image: value.image ?? imageSchema.parse({}),
        region: value.region,
        maxHourlyCost: value.maxHourlyCost,
        ttl: value.ttl,
        volumes: Object.freeze([...value.volumes]),
        plugins: Object.freeze([...value.plugins]),
      }),
  );

/** Validates one spec, for the several-specs form of `sky.compute`: `sky.spec({ provider, accelerator })`. */
export function spec(input: SpecInput, path = ""): Spec {
  return parseInput(specSchema, input, path);
}

/**
 * The resolved pool specification the rest of the system consumes: one spec merged with the pool's
 * options, every field present.
 */
export interface PoolSpec extends Spec {
  readonly worker: Options["worker"];
  readonly provisionTimeout: number;
  readonly sshTimeout: number;
  readonly bootstrapTimeout: number;
  readonly sshRetryInterval: number;
  readonly provisionRetryDelay: number;
  readonly maxProvisionAttempts: number;
  readonly autoscaleCooldown: number;
  readonly autoscaleIdleTimeout: number;
  readonly reconcileTickInterval: number;
  readonly defaultComputeTimeout: number;
  readonly cluster: boolean;
  readonly retryOnInterruption: number;
  /** The accelerator's canonical name for provider matching, or undefined for CPU-only. */
  readonly acceleratorName: string | undefined;
  /** Accelerators per node (0 for CPU-only). */
  readonly acceleratorCount: number;
  /** Requested memory per accelerator in GB, 0 when unspecified or CPU-only. */
  readonly acceleratorMemoryGb: number;
}

/** Merges a validated spec with validated options into the {@link PoolSpec}. */
export function resolvePoolSpec(spec: Spec, options: Options): PoolSpec {
  return Object.freeze({
    ...spec,
    worker: options.worker,
    provisionTimeout: options.provisionTimeout,
    sshTimeout: options.sshTimeout,
    bootstrapTimeout: options.bootstrapTimeout ?? spec.image.bootstrapTimeout,
    sshRetryInterval: options.sshRetryInterval,
    provisionRetryDelay: options.provisionRetryDelay,
    maxProvisionAttempts: options.maxProvisionAttempts,
    autoscaleCooldown: options.autoscaleCooldown,
    autoscaleIdleTimeout: options.autoscaleIdleTimeout,
    reconcileTickInterval: options.reconcileTickInterval,
    defaultComputeTimeout: options.defaultComputeTimeout,
    cluster: options.cluster,
    retryOnInterruption: options.retryOnInterruption,
    acceleratorName: spec.accelerator?.name,
    acceleratorCount: spec.accelerator?.count ?? 0,
    acceleratorMemoryGb: spec.accelerator?.memoryGb ?? 0,
  });
}
