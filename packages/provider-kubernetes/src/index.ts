/**
 * `@skyward/provider-kubernetes` — a team's Kubernetes cluster for Skyward pools: each node a pod,
 * its worker started and reached through the API server (exec and port-forward).
 *
 * ```ts
 * import * as sky from "@skyward/core";
 * import { Kubernetes } from "@skyward/provider-kubernetes";
 *
 * await using pool = await sky.compute({
 *   provider: Kubernetes({ namespace: "ml", image: "python:3.12-slim" }),
 *   accelerator: sky.accelerators.T4(),
 *   nodes: 2,
 * });
 * ```
 */

export type { KubernetesClusterData } from "./kubernetes-provider.js";
export { createProviderFromConfig, Kubernetes } from "./kubernetes-provider.js";
export type { KubernetesSettings, KubernetesToleration } from "./kubernetes-settings.js";
