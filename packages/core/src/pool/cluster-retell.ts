/**
 * The cluster message of a node of a started pool, and telling it again: when the pool's membership
 * changes (a node replaced on a new instance, added, or removed), every other node ready by then is
 * sent its `cluster` message again with the new peers and `total_nodes`, so that its tasks see the
 * current pool (`instance_info()`, a broadcast from a task) and its plugins form their process
 * groups again (docs/protocol.md, "Cluster").
 */
import type { ClusterMessage } from "../protocol/protocol.js";
import type { Image } from "../spec/image.js";
import { clusterMessage, clusterPeers, keptClusterMessage } from "./cluster-message.js";
import type { NodeRuntime, PoolContext } from "./pool-context.js";
import type { WorkerConnection } from "./worker-connection.js";

/** The `collections_node` of a pool whose collections no node holds: no node starts a store. */
export const NO_HOLDER = -1;

/**
 * The cluster message for `node` now. A resumed pool knows neither the plugins nor the metrics its
 * workers were started with: they are sent back as the worker has them (`welcome.cluster`), with the
 * pool's current membership.
 */
export function nodeClusterMessage(
  context: PoolContext,
  node: NodeRuntime,
  connection: WorkerConnection,
): ClusterMessage {
  const { spec } = context;
  const secrets = context.secrets.of(spec.secrets);
  const kept = context.resumed ? connection.welcome.cluster : undefined;
  if (kept) {
    const message = keptClusterMessage(kept, secrets);
    // The membership the worker kept is the one it was started with; a node told again gets today's.
    return node.told === undefined ? message : { ...message, ...membershipFields(context) };
  }
  return clusterMessage({
    node: node.index,
    peers: context.nodes,
    layout: context.layout,
    headPort: context.headPort,
    jobId: context.id,
    spec,
    image: context.image as Image,
    secrets,
    collections: context.options.cluster,
    // While no node holds them (a copy being promoted, or none left), a new node starts no empty store.
    collectionsNode: context.collectionsUnavailable === undefined ? context.collectionsNode : NO_HOLDER,
  });
}

function membershipFields(context: PoolContext): Pick<ClusterMessage, "total_nodes" | "head_addr" | "peers"> {
  return {
    total_nodes: context.nodes.length,
    head_addr: context.nodes[0]?.instance.privateIp ?? "127.0.0.1",
    peers: clusterPeers(context.nodes),
  };
}

/** What a cluster message says of the pool's membership: its nodes, their instances, the head. */
export function membershipKey(message: ClusterMessage): string {
  return JSON.stringify([message.total_nodes, message.head_addr, message.head_port, message.peers]);
}

/**
 * The pool's membership may have changed: every node that is ready (it answered a cluster message)
 * and was told another membership is sent its cluster message again. It is not waited for: the
 * worker applies it before any message sent after it (a task) and answers `ready`, which nobody
 * waits for.
 */
export function retellCluster(context: PoolContext): void {
  for (const node of context.nodes) {
    const connection = node.connection;
    if (connection === undefined || node.told === undefined || node.retiring) continue;
    const message = nodeClusterMessage(context, node, connection);
    const key = membershipKey(message);
    if (key === node.told) continue;
    node.told = key;
    connection.send(message);
  }
}
