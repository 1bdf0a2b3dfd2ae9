/**
 * Detaching, the session's side: a pool's {@link DetachSnapshot} becomes its state file under
 * `$SKYWARD_HOME/pools/` (0600, the workers' token encrypted, no provider credentials), written
 * before the workers are released; their collections follow once the release is applied.
 */

import { detachLocalWorkers } from "../local/local-provider.js";
import { instanceHourlyPrice } from "../pool/cost.js";
import type { DetachHandler, DetachSnapshot } from "../pool/detach.js";
import { type DetachedNode, sealToken, withoutSecrets, writePoolState } from "./state.js";

/**
 * Records the pool in its state file and releases its workers. A `Local` pool's workers are reached
 * again on loopback; any other provider's through its `reconnectWorker` (refused without one).
 */
async function recordDetached(
  snapshot: DetachSnapshot,
  release: () => Promise<readonly number[]>,
): Promise<void> {
  const { id, provider, cluster } = snapshot;
  const local = provider.name === "local";
  if (!local && typeof provider.reconnectWorker !== "function") {
    throw new Error(
      `pool ${id} runs on "${provider.name}", which cannot reach a detached pool's workers again (the provider has no reconnectWorker): it cannot be detached`,
    );
  }
  const nodes: DetachedNode[] = [];
  for (const node of snapshot.nodes) {
    const endpoint = node.endpoint;
    if (!node.connected || !endpoint || (local && endpoint.openStream)) {
      throw new Error(`pool ${id}: node ${node.index} is not connected, so the pool cannot be detached now`);
    }
    nodes.push({
      index: node.index,
      instanceId: node.instance.id,
      host: endpoint.host,
      port: endpoint.port,
      pid: endpoint.pid,
      hourlyPrice: node.instance.hourlyPrice ?? instanceHourlyPrice(node.instance, cluster.offer),
      // A worker of an earlier pool this one picked up answers that pool's token only.
      ...(endpoint.token !== undefined && endpoint.token !== snapshot.token
        ? { token: await sealToken(endpoint.token) }
        : {}),
    });
  }
  const specific = cluster.specific as { root?: unknown; workdir?: unknown };
  const offer = cluster.offer;
  const { cost, budget, budgetSeconds, takenAt } = snapshot;
  await writePoolState({
    version: 1,
    id,
    provider: provider.name,
    providerSettings: {},
    clusterId: cluster.id,
    root: local && typeof specific.root === "string" ? specific.root : null,
    workdir: local && typeof specific.workdir === "string" ? specific.workdir : null,
    instanceType: offer.instanceType,
    region: offer.region,
    spot: snapshot.nodes.some((node) => node.instance.spot),
    nodes,
    tasks: snapshot.tasks,
    ttl: snapshot.ttl,
    detachedAt: takenAt,
    pid: process.pid,
    // The workers' own token: an attached pool was constructed with the one they were started with.
    token: await sealToken(snapshot.token),
    ...(local
      ? {}
      : {
          cluster: withoutSecrets({
            id: cluster.id,
            provider: cluster.provider,
            poolId: cluster.poolId,
            region: cluster.region,
            offer: cluster.offer,
            ssh: cluster.ssh,
            specific: cluster.specific,
          }),
          instances: withoutSecrets(snapshot.nodes.map((node) => node.instance)),
        }),
    cost: { total: cost.total, hourlyRate: cost.hourlyRate },
    refs: snapshot.refs,
    worker: snapshot.worker,
    nodeBounds: snapshot.nodeBounds,
    ...(snapshot.image ? { image: await sealToken(JSON.stringify(snapshot.image)) } : {}),
    plugins: snapshot.plugins,
    settings: snapshot.settings,
    collectionsEnabled: snapshot.collectionsEnabled,
    ...(snapshot.secretNames.length > 0 ? { secretNames: snapshot.secretNames } : {}),
    budget: budget ? { max: budget.max, warnAt: budget.warnAt } : null,
    budgetDeadline: budgetSeconds === null ? null : takenAt + budgetSeconds * 1000,
  });
  // The workers keep the results and outlive this process.
  const released = new Set(await release());
  // Nothing of the collections to keep: the head node holds them, and they go on meanwhile.
  // Only those released: a node lost meanwhile is the pool's still (its replacement, cut short by
  // the detach, waits for its worker's exit).
  if (local) {
    detachLocalWorkers(nodes.filter((node) => released.has(node.index)).map((node) => node.instanceId));
  }
}

/** How pools are detached: into their state file (see {@link recordDetached}). */
export const stateFileDetach: DetachHandler = { detach: recordDetached };
