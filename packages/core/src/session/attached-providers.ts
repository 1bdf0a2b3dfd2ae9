/**
 * The providers an attached pool is made around: they provision nothing and start nothing — their
 * instances are the detached pool's, their workers' endpoints the recorded (or reconnected) ones.
 */
import { rm } from "node:fs/promises";
import { cpus, totalmem } from "node:os";
import type { Cluster, Instance, Offer, ProviderV1, WorkerEndpoint } from "../contract/types.js";
import { processAlive } from "../local/process-alive.js";
import { type DetachedNode, type DetachedPoolState, removePoolState } from "./state.js";

/**
 * A `provision` that hands out the detached pool's instances, each once; past them, it provisions
 * through `grow` (the provider the attaching caller gave), or refuses when there is none.
 */
function handOut(state: DetachedPoolState, instances: readonly Instance[], grow?: ProviderV1) {
  let handedOut = 0;
  return async (options: Parameters<ProviderV1["provision"]>[0]): Promise<readonly Instance[]> => {
    const { count } = options;
    const batch = instances.slice(handedOut, handedOut + count);
    handedOut += batch.length;
    if (batch.length === count) return batch;
    if (!grow) throw new Error(`pool ${state.id} has ${state.nodes.length} nodes and can grow no more`);
    return [...batch, ...(await grow.provision({ ...options, count: count - batch.length }))];
  };
}

function attachedOffer(state: DetachedPoolState): Offer {
  return Object.freeze({
    id: "local",
    provider: "local",
    instanceType: state.instanceType,
    accelerator: null,
    vcpus: cpus().length,
    memoryGb: Math.round(totalmem() / 1024 ** 3),
    architecture: process.arch === "arm64" ? "arm64" : "x86_64",
    region: state.region,
    spotPrice: null,
    onDemandPrice: 0,
    billingUnit: "second",
    pricesAsOf: new Date().toISOString().slice(0, 10),
    specific: Object.freeze({}),
  });
}

/**
 * A provider over the running workers of a detached `Local` pool: its instances are the pool's, its
 * workers' endpoints the recorded ones, and terminating stops those workers. With `grow` (a `Local`
 * provider the attaching caller gave) it starts new nodes through that one, in the pool's root.
 */
export function attachedLocal(
  state: DetachedPoolState,
  tokenOf: (node: DetachedNode) => string,
  grow?: ProviderV1,
): ProviderV1<{ root: string; workdir: string }> {
  const instances = state.nodes.map((node) =>
    Object.freeze({
      id: node.instanceId,
      status: "running" as const,
      publicIp: null,
      privateIp: "127.0.0.1",
      ssh: null,
      spot: false,
      hourlyPrice: node.hourlyPrice,
      offerId: "local",
      createdAt: state.detachedAt,
      tags: Object.freeze({ "skyward:cluster": state.clusterId }),
    } satisfies Instance),
  );
  const node = (id: string) => state.nodes.find((entry) => entry.instanceId === id);
  return {
    specificationVersion: "v1",
    name: "local",
    capabilities: Object.freeze({ spot: false, ...(grow ? {} : { maxInstances: state.nodes.length }) }),
    async offers() {
      return [attachedOffer(state)];
    },
    async prepare({ spec, offer }) {
      return Object.freeze({
        id: state.clusterId,
        provider: "local",
        poolId: state.id,
        region: state.region,
        spec,
        offer,
        ssh: null,
        specific: Object.freeze({ root: state.root ?? "", workdir: state.workdir ?? "" }),
      });
    },
    provision: handOut(state, instances, grow),
    async getInstance(options) {
      const entry = node(options.id);
      if (!entry) return grow ? grow.getInstance(options) : null;
      return processAlive(entry.pid)
        ? (instances.find((instance) => instance.id === options.id) ?? null)
        : null;
    },
    async launchWorker(options): Promise<WorkerEndpoint> {
      const { instance } = options;
      if (grow && !node(instance.id)) return grow.launchWorker(options);
      const entry = node(instance.id);
      if (!entry || !processAlive(entry.pid)) {
        throw new Error(`the worker of ${instance.id} (pool ${state.id}) is no longer running`);
      }
      return { host: entry.host, port: entry.port, pid: entry.pid, token: tokenOf(entry), warm: true };
    },
    async terminate(options) {
      const started = options.ids.filter((id) => !node(id));
      if (grow && started.length > 0) await grow.terminate({ ...options, ids: started });
      await Promise.all(
        options.ids.map(async (id) => {
          const entry = node(id);
          if (!entry) return;
          // Released by the pool's close: give it a moment, then make sure.
          for (const [signal, wait] of [
            [null, 2000],
            ["SIGTERM", 3000],
            ["SIGKILL", 2000],
          ] as const) {
            if (signal !== null && processAlive(entry.pid)) {
              try {
                process.kill(entry.pid, signal);
              } catch {
                // gone
              }
            }
            const deadline = Date.now() + wait;
            while (processAlive(entry.pid) && Date.now() < deadline)
              await new Promise((r) => setTimeout(r, 50));
            if (!processAlive(entry.pid)) return;
          }
        }),
      );
    },
    async teardown() {
      if (state.root) await rm(state.root, { recursive: true, force: true });
      await removePoolState(state.id);
    },
    selfDestruct() {
      return "";
    },
  } as ProviderV1<{ root: string; workdir: string }>;
}

/**
 * A provider over the running workers of a detached pool on `provider` (SSH-reached): its first
 * instances are the pool's, their workers' endpoints those `reconnectWorker` reached; with `grow`
 * (the pool may start nodes: attach-growth.ts) it provisions more through `provider`, in the
 * recorded cluster, and launches their workers as `provider` does. `getInstance`, `terminate`,
 * `teardown` and the self-destruct are the real provider's: closing the pool terminates its
 * instances, as for any pool.
 */
export function attachedRemote(
  state: DetachedPoolState,
  provider: ProviderV1,
  tokenOf: (node: DetachedNode) => string,
  cluster: Omit<Cluster, "spec">,
  endpoints: readonly WorkerEndpoint[],
  grow: boolean,
): ProviderV1 {
  const instances = (state.instances ?? []).map((instance) =>
    Object.freeze({ ...instance, status: "running" as const }),
  );
  const launched = new Set<number>();
  return {
    specificationVersion: "v1",
    name: provider.name,
    capabilities: Object.freeze(
      grow ? { ...provider.capabilities } : { ...provider.capabilities, maxInstances: state.nodes.length },
    ),
    async offers() {
      return [cluster.offer];
    },
    async prepare({ spec }) {
      return Object.freeze({ ...cluster, spec }) as Cluster;
    },
    provision: handOut(state, instances, grow ? provider : undefined),
    getInstance: (options) => provider.getInstance(options),
    async launchWorker(options): Promise<WorkerEndpoint> {
      const { instance, nodeId } = options;
      const index = state.nodes.findIndex((node) => node.instanceId === instance.id);
      // A node the attached pool started (on a host it had let go of, too): its worker is launched
      // as on any pool of the provider.
      if (grow && (index < 0 || launched.has(index))) return provider.launchWorker(options);
      const endpoint = endpoints[index];
      if (!endpoint || launched.has(index)) {
        throw new Error(`pool ${state.id}: node ${nodeId} (${instance.id}) has no worker to attach to`);
      }
      launched.add(index);
      // The worker's own token: an earlier pool's, for a worker the detached pool had picked up.
      return { ...endpoint, token: tokenOf(state.nodes[index] as DetachedNode), warm: true };
    },
    terminate: (options) => provider.terminate(options),
    async teardown(options) {
      try {
        await provider.teardown(options);
      } finally {
        await removePoolState(state.id);
      }
    },
    selfDestruct: (options) => provider.selfDestruct(options),
    // Detached again (`skyward attach` without --close does): the real provider reaches it next time.
    reconnectWorker: (options) =>
      (provider as Required<Pick<ProviderV1, "reconnectWorker">>).reconnectWorker(options),
    ...(provider.interruptionNotice
      ? { interruptionNotice: provider.interruptionNotice.bind(provider) }
      : {}),
  } as ProviderV1;
}
