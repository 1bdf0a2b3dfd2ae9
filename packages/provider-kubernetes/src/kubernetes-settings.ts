/**
 * The Kubernetes provider's settings: what a user may set, checked by name before the cluster is
 * asked anything.
 */
import { parseInput } from "@skyward/core/contract";
import { z } from "zod";

/** A toleration a node's taint needs (`kubectl explain pod.spec.tolerations`). */
export interface KubernetesToleration {
  /** The taint key it matches; empty with `operator: "Exists"` matches every key. */
  readonly key?: string;
  /** `"Equal"` (default) or `"Exists"`. */
  readonly operator?: "Equal" | "Exists";
  /** The taint value it matches, with `"Equal"`. */
  readonly value?: string;
  /** The taint effect it matches; every effect when empty. */
  readonly effect?: "NoSchedule" | "PreferNoSchedule" | "NoExecute";
  /** With `NoExecute`: seconds the pod stays bound after the taint appears. */
  readonly tolerationSeconds?: number;
}

/** Settings of the Kubernetes provider; every field is optional. */
export interface KubernetesSettings {
  /**
   * The kubeconfig file. Default: `$KUBECONFIG`, else `~/.kube/config`, else the service account of
   * the pod this runs in. Its credentials are read by `@kubernetes/client-node` and never logged.
   */
  kubeconfig?: string;
  /** The kubeconfig context to use. Default: its current context. */
  context?: string;
  /** The namespace pods are created in. Default: the context's namespace, else `"default"`. */
  namespace?: string;
  /** The container image every pod runs: it must have `bash`, `tar` and a Python ≥ 3.10 as `python3`. */
  image?: string;
  /** When the kubelet pulls the image: `"IfNotPresent"` (default), `"Always"` or `"Never"`. */
  imagePullPolicy?: "IfNotPresent" | "Always" | "Never";
  /** Pods go only to nodes with these labels (GPU type, pool of machines); ANDed with the accelerator's label. */
  nodeSelector?: Readonly<Record<string, string>>;
  /** Tolerations for tainted (e.g. GPU) nodes. */
  tolerations?: readonly KubernetesToleration[];
  /** The service account pods run as. Default: the namespace's default; its token is not mounted. */
  serviceAccount?: string;
  /** What one pod costs per hour, USD, for `pool.cost()` and `maxHourlyCost`. Default 0. */
  ratePerHour?: number;
  /** Added per requested GPU, USD per hour. Default 0. */
  gpuRatePerHour?: number;
  /** CPUs a pod requests when the spec sets no `vcpus`. Default 1. */
  defaultVcpus?: number;
  /** Memory a pod requests when the spec sets no `memoryGb`, GB. Default 1. */
  defaultMemoryGb?: number;
  /**
   * The most seconds a pod may run, whatever happens to the client (`activeDeadlineSeconds`: the
   * kubelet ends it then). Default 86400 (a day). A released worker ends its pod sooner, after the TTL.
   */
  activeDeadlineSeconds?: number;
  /** Skyward's directory inside each pod. Default `/opt/skyward`. */
  root?: string;
  /** Extra labels on every pod (team, cost centre); Skyward's own labels cannot be overridden. */
  labels?: Readonly<Record<string, string>>;
}

const labelValue = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
const labelKey =
  /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
const labels = z.record(
  z.string().regex(labelKey, { message: "expected a label key (prefix/name)" }),
  z
    .string()
    .max(63)
    .regex(labelValue, { message: "expected a label value (63 characters of [A-Za-z0-9._-])" }),
);
const dnsName = z
  .string()
  .max(63)
  .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, { message: "expected a DNS label (lower case, digits, -)" });

/** The settings schema: every field checked, unknown ones refused by name. */
export const settingsSchema = z.strictObject({
  kubeconfig: z.string().min(1, { message: "expected the kubeconfig file's path" }).optional(),
  context: z.string().min(1, { message: "expected a context name" }).optional(),
  namespace: dnsName.optional(),
  image: z.string().min(1, { message: "expected a container image" }).default("python:3.12-slim"),
  imagePullPolicy: z.enum(["IfNotPresent", "Always", "Never"]).default("IfNotPresent"),
  nodeSelector: labels.default({}),
  tolerations: z
    .array(
      z.strictObject({
        key: z.string().optional(),
        operator: z.enum(["Equal", "Exists"]).optional(),
        value: z.string().optional(),
        effect: z.enum(["NoSchedule", "PreferNoSchedule", "NoExecute"]).optional(),
        tolerationSeconds: z.number().int().optional(),
      }),
    )
    .default([]),
  serviceAccount: dnsName.optional(),
  ratePerHour: z.number().nonnegative({ message: "expected USD per hour, 0 or more" }).default(0),
  gpuRatePerHour: z.number().nonnegative({ message: "expected USD per GPU per hour, 0 or more" }).default(0),
  defaultVcpus: z.number().positive({ message: "expected CPUs, more than 0" }).default(1),
  defaultMemoryGb: z.number().positive({ message: "expected GB, more than 0" }).default(1),
  activeDeadlineSeconds: z
    .number()
    .int({ message: "expected whole seconds" })
    .positive({ message: "expected seconds, more than 0" })
    .default(86_400),
  root: z
    .string()
    .regex(/^\/[A-Za-z0-9._/-]*$/, { message: "expected an absolute path" })
    .transform((path) => path.replace(/\/+$/, "") || "/")
    .default("/opt/skyward"),
  labels: labels.default({}),
});

/** The settings as parsed, defaults filled in. */
export type ParsedKubernetesSettings = z.output<typeof settingsSchema>;

/** Parses settings, or throws a `ConfigurationError` naming each bad field under `prefix`. */
export function parseSettings(
  settings: KubernetesSettings | undefined,
  prefix: string,
): ParsedKubernetesSettings {
  return parseInput(settingsSchema, settings ?? {}, prefix);
}
