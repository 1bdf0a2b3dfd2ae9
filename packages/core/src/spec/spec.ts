import { z } from "zod";
import { pluginSchema, workersPerNodeConflicts } from "../contract/plugin.js";
import { providerSchema } from "../contract/provider.js";
import type { PluginV1, PoolSpec, Provider, Spec } from "../contract/types.js";
import { parseInput } from "../errors/validation.js";
import { type Accelerator, acceleratorSchema } from "./accelerators.js";
import { type Image, type ImageInput, imageSchema } from "./image.js";
import { type AllocationStrategy, type Architecture, type NodeSpec, nodeSpecSchema } from "./nodes.js";
import type { Options } from "./options.js";
import { type SecretsInput, secretsSchema } from "./secrets.js";
import { type VolumeInput, volumeSchema } from "./volume.js";

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
  /**
   * Environment variables for tasks whose values are secret (tokens, passwords): each a value, or
   * `{ env: "NAME" }` / `{ file: "path" }` read on the client at pool start. They reach the workers
   * only over their authenticated connection, are masked in output, and are part of no image hash
   * (docs/secrets.md).
   */
  secrets?: SecretsInput;
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
  "secrets",
] as const satisfies readonly (keyof SpecInput)[]);

const positiveNumber = (what: string) =>
  z
    .number({ error: `expected ${what} as a number > 0` })
    .refine((value) => Number.isFinite(value) && value > 0, { message: `expected ${what} as a number > 0` });

const NO_SECRETS = Object.freeze({});

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
          // One mounted over the other hides it (or cannot make its mount point in a read-only one).
          const nested = volumes.findIndex(
            (other, otherIndex) =>
              otherIndex < index &&
              (other.mount.startsWith(`${volume.mount}/`) || volume.mount.startsWith(`${other.mount}/`)),
          );
          if (nested !== -1) {
            context.addIssue({
              code: "custom",
              path: [index, "mount"],
              message: `${volume.mount} ${volume.mount.length < volumes[nested]!.mount.length ? "holds" : "is inside"} volumes[${nested}]'s mount point ${volumes[nested]!.mount}: one would hide the other`,
            });
          }
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
    secrets: secretsSchema.optional(),
  })
  .superRefine((value, context) => {
    for (const { index, message } of peerNetworkConflicts(value)) {
      context.addIssue({ code: "custom", path: ["plugins", index], message });
    }
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
        secrets: value.secrets ?? NO_SECRETS,
      }),
  );

/**
 * The plugins a spec cannot run: those needing a peer network ({@link PluginV1.peerNetwork}) on more
 * than one node of a provider whose instances cannot reach one another
 * (its `capabilities.peerNetwork`). Their rendezvous would wait for peers that never connect.
 */
export function peerNetworkConflicts(spec: {
  readonly provider?: Provider | undefined;
  readonly accelerator: Accelerator | null;
  readonly nodes: { readonly max: number };
  readonly plugins: readonly PluginV1[];
}): { index: number; message: string }[] {
  const network = spec.provider?.capabilities.peerNetwork ?? "private";
  if (spec.nodes.max <= 1 || network === "private") return [];
  if (network === "accelerated" && spec.accelerator !== null) return [];
  const provider = spec.provider?.name ?? "the provider";
  const why =
    network === "accelerated"
      ? `${provider}'s instances reach one another only with an accelerator, and this spec has none`
      : `${provider}'s instances share no network (each is reached on its own public address)`;
  return spec.plugins.flatMap((plugin, index) =>
    plugin.peerNetwork === true
      ? [
          {
            index,
            message: `plugin "${plugin.name}" connects its workers on different nodes to one another, but ${why}: use nodes: 1, or a provider with a private network between its instances`,
          },
        ]
      : [],
  );
}

/** Validates one spec, for the several-specs form of `sky.compute`: `sky.spec({ provider, accelerator })`. */
export function spec(input: SpecInput, path = ""): Spec {
  return parseInput(specSchema, input, path);
}

/** Merges a validated spec with validated options into the {@link PoolSpec}. */
export function resolvePoolSpec(spec: Spec, options: Options): PoolSpec {
  return Object.freeze({
    ...spec,
    worker: options.worker,
    provisionTimeout: options.provisionTimeout ?? spec.provider?.capabilities.provisionTimeout ?? 300,
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

export type { PoolSpec, Spec } from "../contract/types.js";
export type { AllocationStrategy, Architecture, NodeSpec, Nodes, NodesInput } from "./nodes.js";
export { ALLOCATION_STRATEGIES, nodeSpecSchema, nodes } from "./nodes.js";
