/**
 * The cluster message: what a worker is told about its pool once it is connected (its node, its
 * peers, the head's address, the plugins' worker modules, the metrics to send).
 */
import { type WorkerLayout, workerModules } from "../contract/plugin.js";
import type { Instance } from "../contract/provider.js";
import { clusterMetrics } from "../observe/metric-stream.js";
import type { ClusterMessage, WireValue } from "../protocol/protocol.js";
import type { Image } from "../spec/image.js";
import type { PoolSpec } from "../spec/spec.js";

/** What the cluster message of one node is made from. */
export interface ClusterMessageInput {
  /** The node's index. */
  readonly node: number;
  /** Every node of the pool, the head (index 0) first. */
  readonly peers: readonly { readonly index: number; readonly instance: Instance }[];
  readonly layout: WorkerLayout;
  readonly headPort: number;
  /** The pool's id. */
  readonly jobId: string;
  readonly spec: Pick<PoolSpec, "accelerator" | "plugins">;
  readonly image: Pick<Image, "env" | "metrics">;
  /** The values of the spec's secrets (name → value), read on the client. */
  readonly secrets: Readonly<Record<string, string>>;
  /** `options.cluster`: false turns the distributed collections off (absent: on). */
  readonly collections?: boolean;
  /** The node holding the collections, when not the head (a replica promoted when the head was lost). */
  readonly collectionsNode?: number | undefined;
}

/** The cluster message for one node. */
export function clusterMessage(input: ClusterMessageInput): ClusterMessage {
  const { layout, spec, image } = input;
  const head = input.peers[0]?.instance;
  const accelerator = spec.accelerator;
  return {
    t: "cluster",
    node: input.node,
    total_nodes: input.peers.length,
    workers_per_node: layout.workersPerNode,
    ...(layout.checkAccelerators ? { check_accelerators: true } : {}),
    ...(layout.pinAccelerators ? { pin_accelerators: true } : {}),
    head_addr: head?.privateIp ?? "127.0.0.1",
    head_port: input.headPort,
    job_id: input.jobId,
    peers: clusterPeers(input.peers),
    accelerators: accelerator?.count ?? 0,
    accelerator: accelerator
      ? {
          type: accelerator.name,
          count: accelerator.count,
          memory_gb: accelerator.memoryGb ?? 0,
          is_trainium: accelerator.isTrainium,
        }
      : null,
    network: null,
    env: image.env,
    plugins: workerModules(spec.plugins).map((module) => ({
      name: module.plugin,
      module: module.module,
      config: module.config as WireValue,
    })),
    metrics: clusterMetrics(image.metrics),
    ...(input.collections === false ? { collections: false } : {}),
    ...(input.collectionsNode ? { collections_node: input.collectionsNode } : {}),
    ...secretsField(input.secrets),
  };
}

/**
 * The `peers` field: every node's addresses and instance (`instance_id`: a node replaced on a new
 * instance is another peer even where its addresses are the same, as on one machine).
 */
export function clusterPeers(
  peers: readonly { readonly index: number; readonly instance: Instance }[],
): ClusterMessage["peers"] {
  return peers.map((peer) => ({
    node: peer.index,
    private_ip: peer.instance.privateIp ?? "",
    public_ip: peer.instance.publicIp ?? "",
    instance_id: peer.instance.id,
  }));
}

/** The `secrets` field: left out when there are none, so a pool without secrets sends what it always did. */
function secretsField(secrets: Readonly<Record<string, string>>): Pick<ClusterMessage, "secrets"> {
  return Object.keys(secrets).length > 0 ? { secrets } : {};
}

/**
 * The cluster message a picked-up worker is sent again: the settings it kept, with no environment
 * (the worker keeps its own when a cluster comes with none), and the secrets as the attaching client
 * read them (the worker never tells them back).
 */
export function keptClusterMessage(
  kept: Omit<ClusterMessage, "env" | "secrets">,
  secrets: Readonly<Record<string, string>>,
): ClusterMessage {
  const { secrets: _told, ...settings } = kept as ClusterMessage;
  return { ...settings, t: "cluster", env: {}, ...secretsField(secrets) };
}
