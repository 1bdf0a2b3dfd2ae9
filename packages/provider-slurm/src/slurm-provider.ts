/**
 * The `Slurm` provider: a team's own cluster, shared through its scheduler. The client reaches only
 * the login node over SSH; a pool is one batch job holding an allocation of its nodes (its state is
 * the nodes' state: pending in the queue is provisioning), workers are `srun` steps in it, and the
 * job's time limit is the hard TTL the scheduler keeps even when the client is gone.
 */
import {
  acceleratorFromName,
  type CleanupResult,
  type Cluster,
  type ClusterFromTags,
  type Instance,
  type InstanceStatus,
  type LeftPoolResource,
  NoCapacityError,
  type Offer,
  type PoolResource,
  type ProgressReport,
  type ProviderV1,
  ProvisionError,
  parseInput,
  shellQuote,
} from "@skyward/core/contract";
import {
  jobComment,
  jobNameOf,
  parseJobComment,
  parseJobs,
  parseNodes,
  parsePreemptModes,
  parseSubmittedJobId,
  SINFO_NODE_FORMAT,
  type SlurmJob,
  SQUEUE_FORMAT,
  sbatchCommand,
} from "./slurm-commands.js";
import {
  recordNames,
  shrinkPendingJob,
  shrinkRunningJob,
  type TrackedJob,
  unknownNodesError,
} from "./slurm-give-back.js";
import { loginLabel, SlurmLogin } from "./slurm-login.js";
import { offerOf, type Partition, partitionsOf, USABLE_STATES } from "./slurm-offers.js";
import { rateOf, type SlurmDeclared, type SlurmSettings, settingsSchema } from "./slurm-settings.js";
import {
  bootstrapPool,
  bootstrapsPerNode,
  removeNodeEnvironments,
  type SlurmClusterData,
  type SlurmPlacement,
  startSlurmWorker,
} from "./slurm-worker.js";

/** The file in a pool's directory that records its pool id. */
const POOL_FILE = ".skyward-pool";
/** Job states in which the allocation is gone. */
const ENDED_STATES = new Set([
  "COMPLETED",
  "COMPLETING",
  "CANCELLED",
  "FAILED",
  "TIMEOUT",
  "PREEMPTED",
  "NODE_FAIL",
  "BOOT_FAIL",
  "DEADLINE",
  "OUT_OF_MEMORY",
  "REVOKED",
  "SPECIAL_EXIT",
]);

/** Instance ids are `<job>-<index>`: node `index` of job `job` (node 0 is the job's first node). */
function instanceIdOf(jobId: string, index: number): string {
  return `${jobId}-${index}`;
}

function parseInstanceId(id: string): { jobId: string; index: number } | undefined {
  const match = /^(\d+)-(\d+)$/.exec(id);
  return match ? { jobId: match[1] as string, index: Number(match[2]) } : undefined;
}

/**
 * What the pool shows of the job while it waits: pending with Slurm's reason (`Priority`,
 * `Resources`, `QOSMaxGRESPerUser`…) and its place in the partition's queue, then started.
 */
export function queueReport(
  job: Pick<SlurmJob, "id" | "state" | "reason" | "partition" | "nodes">,
  position: number | undefined,
): ProgressReport {
  if (job.state === "PENDING") {
    const place =
      position === undefined ? "" : `, position ${position} in partition ${job.partition}'s queue`;
    return { phase: "queue", status: "started", detail: `job ${job.id} pending (${job.reason})${place}` };
  }
  return {
    phase: "queue",
    status: "finished",
    detail: `job ${job.id} ${job.state.toLowerCase()} on ${job.nodes.join(", ") || "no node"}`,
  };
}

/**
 * Your Slurm cluster as a pool: one job per pool, its nodes the pool's nodes.
 *
 * @example
 * ```ts
 * import * as sky from "@skyward/core";
 * import { Slurm } from "@skyward/provider-slurm";
 *
 * await using pool = await sky.compute({
 *   provider: Slurm({
 *     login: { host: "login.hpc.example.edu", user: "alice", identityFile: "~/.ssh/id_ed25519" },
 *     partition: "gpu",
 *     account: "ml-lab",
 *     timeLimit: "2:00:00",
 *   }),
 *   accelerator: sky.accelerators.A100(),
 *   nodes: 2,
 * });
 * ```
 *
 * @throws {ConfigurationError} naming the field for invalid settings.
 */
export function Slurm(settings: SlurmSettings): ProviderV1<SlurmClusterData> {
  return build(parseInput(settingsSchema, settings, "Slurm"));
}

function build(declared: SlurmDeclared): ProviderV1<SlurmClusterData> {
  const login = new SlurmLogin(declared);
  /** Jobs this provider submitted: their pool, their nodes, and which of them the pool let go. */
  const jobs = new Map<string, TrackedJob>();
  /**
   * One bootstrap per pool (shared filesystem: one environment for all its nodes), or per pool and
   * job and node when the environment is node-local (keys `<cluster>/<job>/<node>`: a job's end
   * removes its nodes' environments).
   */
  const bootstraps = new Map<string, Promise<boolean>>();
  const bootstrapKey = (clusterId: string, placement: SlurmPlacement) =>
    bootstrapsPerNode(declared) ? `${clusterId}/${placement.jobId}/${placement.nodeName}` : clusterId;
  /** Node `index` of `job`: where the job placed it, even after the job was shrunk. */
  const nodeOf = (job: SlurmJob, index: number): string | undefined => {
    const names = jobs.get(job.id)?.names;
    return names ? names[index] : job.nodes[index];
  };
  /** The indices of `job`'s nodes that are the pool's: all but those it let go of. */
  const indicesOf = (job: SlurmJob): number[] => {
    const tracked = jobs.get(job.id);
    const count = tracked?.nodes ?? Math.max(job.nodeCount, 1);
    return Array.from({ length: count }, (_, index) => index).filter(
      (index) => !tracked?.released.has(index),
    );
  };
  const where = loginLabel(declared);
  /** Where pools' directories are: `<sharedDirectory>/pools`, by default under the home on the cluster. */
  const poolsDirectory = async (signal?: AbortSignal): Promise<string> =>
    `${declared.sharedDirectory ?? `${(await login.checked(["sh", "-c", 'printf %s "$HOME"'], signal)).trim()}/.skyward`}/pools`;

  const readNodes = async (signal?: AbortSignal) =>
    parseNodes(await login.checked(["sinfo", "-h", "-N", "-o", SINFO_NODE_FORMAT], signal));
  const readJob = async (jobId: string, signal?: AbortSignal): Promise<SlurmJob | undefined> => {
    const result = await login.run(
      `squeue -h -j ${shellQuote(jobId)} -o ${shellQuote(SQUEUE_FORMAT)}`,
      signal,
    );
    // squeue fails with "Invalid job id specified" once the job has left the controller's memory.
    if (result.code !== 0) return undefined;
    const job = parseJobs(result.stdout).find((entry) => entry.id === jobId);
    const tracked = jobs.get(jobId);
    if (job && tracked) recordNames(tracked, job);
    return job;
  };
  /** Each pending job's place in its partition's queue (1 is next), in the scheduler's order. */
  const queuePositions = async (signal?: AbortSignal): Promise<Map<string, number>> => {
    const order = await login.checked(
      ["squeue", "-h", "-t", "PENDING", "--sort=-p,i", "-o", "%i|%P"],
      signal,
    );
    const positions = new Map<string, number>();
    const seen = new Map<string, number>();
    for (const line of order.split("\n")) {
      const [id, partition] = line.trim().split("|");
      if (!id || !partition) continue;
      const place = (seen.get(partition) ?? 0) + 1;
      seen.set(partition, place);
      positions.set(id, place);
    }
    return positions;
  };
  const readPartitions = async (signal?: AbortSignal) => {
    const [nodes, modes] = await Promise.all([
      readNodes(signal),
      login.checked(["scontrol", "show", "partition", "-o"], signal).then(parsePreemptModes),
    ]);
    return partitionsOf(nodes, modes);
  };
  const choosePartition = (partitions: Map<string, Partition>): Partition => {
    const wanted = declared.partition;
    const partition =
      wanted !== undefined
        ? partitions.get(wanted)
        : [...partitions.values()].find((entry) => entry.isDefault);
    if (!partition) {
      // Sorted: sinfo lists partitions in no fixed order, and the message should read the same each time.
      const known = [...partitions.keys()].sort().join(", ") || "none";
      throw new NoCapacityError({
        attempts: [
          {
            provider: "slurm",
            reason:
              wanted !== undefined
                ? `no such partition "${wanted}" on ${where} (partitions: ${known})`
                : `${where} has no default partition: set Slurm({ partition }) (partitions: ${known})`,
          },
        ],
      });
    }
    return partition;
  };
  /** Submits a job of `count` nodes for `cluster`'s pool; refused at submit is a `ProvisionError`. */
  const submitJob = async (
    cluster: Cluster<SlurmClusterData>,
    count: number,
    exclude: readonly string[],
    signal?: AbortSignal,
  ): Promise<SlurmJob> => {
    const { partition } = cluster.specific;
    const spec = cluster.spec;
    const gpuType =
      typeof cluster.offer.specific.gpuType === "string" ? cluster.offer.specific.gpuType : undefined;
    const command = sbatchCommand({
      jobName: jobNameOf(cluster.id),
      comment: jobComment(cluster.id, cluster.poolId, partition),
      nodes: count,
      partition,
      ...(declared.account !== undefined ? { account: declared.account } : {}),
      ...(declared.qos !== undefined ? { qos: declared.qos } : {}),
      ...(declared.timeLimit !== undefined ? { timeLimit: declared.timeLimit } : {}),
      ...(spec.accelerator
        ? { gpus: { count: spec.accelerator.count, ...(gpuType !== undefined ? { type: gpuType } : {}) } }
        : {}),
      ...(spec.vcpus !== undefined ? { cpusPerNode: spec.vcpus } : {}),
      ...(spec.memoryGb !== undefined ? { memoryGbPerNode: spec.memoryGb } : {}),
      exclude,
      extra: declared.sbatchOptions,
      output: "/dev/null",
    });
    const submitted = await login.run(command, signal);
    const jobId = submitted.code === 0 ? parseSubmittedJobId(submitted.stdout) : undefined;
    if (jobId === undefined) {
      // Refused at submit (no such account, a QoS limit, a request no node can meet): never queued.
      throw new ProvisionError({
        provider: "slurm",
        isRetryable: false,
        message: `Slurm refused the pool's job at submit (${count} nodes in partition "${partition}"${declared.account ? `, account "${declared.account}"` : ""}${declared.qos ? `, QoS "${declared.qos}"` : ""}): ${(submitted.stderr.trim() || submitted.stdout.trim()).replace(/^sbatch: error: /gm, "")}`,
      });
    }
    jobs.set(jobId, {
      cluster: cluster.id,
      nodes: count,
      released: new Set(),
      left: new Set(),
      names: undefined,
    });
    return (
      (await readJob(jobId, signal)) ?? {
        id: jobId,
        name: jobNameOf(cluster.id),
        state: "PENDING",
        reason: "None",
        nodes: [],
        partition,
        nodeCount: count,
        comment: jobComment(cluster.id, cluster.poolId, partition),
        submittedAt: Date.now(),
      }
    );
  };
  const instanceFor = (
    cluster: Pick<Cluster, "id" | "poolId" | "offer"> | ClusterFromTags,
    job: SlurmJob,
    index: number,
    addresses: ReadonlyMap<string, string>,
    position: number | undefined,
    preemptible: boolean,
  ): Instance => {
    const status: InstanceStatus =
      job.state === "RUNNING" ? "running" : ENDED_STATES.has(job.state) ? "terminated" : "pending";
    const node = nodeOf(job, index);
    const address = node !== undefined ? (addresses.get(node) ?? null) : null;
    const running = status === "running" && address !== null;
    const comment = parseJobComment(job.comment);
    return Object.freeze({
      id: instanceIdOf(job.id, index),
      status: status === "running" && !running ? "pending" : status,
      publicIp: null,
      privateIp: address,
      // Every node is reached through the login node; the worker launcher tunnels on from there.
      ssh: running
        ? Object.freeze({
            host: declared.login.host,
            port: declared.login.port,
            user: declared.login.user,
            hostKeyScope: "address" as const,
          })
        : null,
      spot: preemptible,
      hourlyPrice: rateOf(declared, job.partition),
      offerId: cluster.offer?.id ?? `slurm:${job.partition}`,
      createdAt: Number.isNaN(job.submittedAt) ? Date.now() : job.submittedAt,
      tags: Object.freeze({
        "skyward:cluster": comment?.cluster ?? cluster.id,
        "skyward:pool": comment?.pool ?? cluster.poolId,
        "skyward:region": job.partition,
        "slurm:job": job.id,
        "slurm:state": job.state,
        ...(node !== undefined ? { "slurm:node": node } : {}),
        // Why it waits and where it is in the queue, as `squeue` says: shown while provisioning.
        ...(job.state === "PENDING" ? { "slurm:reason": job.reason } : {}),
        ...(position !== undefined ? { "slurm:queue-position": String(position) } : {}),
      }),
    });
  };

  return {
    specificationVersion: "v1",
    name: "slurm",
    cacheKey: where,
    // A preemptible partition's capacity is spot capacity: cheaper to get, taken back by the scheduler.
    capabilities: Object.freeze({ spot: true, peerNetwork: "private" as const }),

    async offers({ query, signal }): Promise<readonly Offer[]> {
      const partitions = await readPartitions(signal);
      const candidates =
        query.region !== undefined
          ? [partitions.get(query.region)].filter((entry): entry is Partition => entry !== undefined)
          : [choosePartition(partitions)];
      const offers: Offer[] = [];
      const reasons: string[] = [];
      for (const partition of candidates) {
        const offer = offerOf(declared, partition, query);
        if (typeof offer === "string") reasons.push(offer);
        else if (offer !== undefined) offers.push(offer);
      }
      if (offers.length === 0 && reasons.length > 0) {
        throw new NoCapacityError({
          attempts: reasons.map((reason) => ({ provider: "slurm", reason })),
          message: `the Slurm cluster at ${where} cannot run the spec: ${reasons.join("; ")}`,
        });
      }
      return offers;
    },

    async prepare({ spec, offer, poolId, signal }): Promise<Cluster<SlurmClusterData>> {
      const id = `slurm-${Math.random().toString(36).slice(2, 10)}`;
      const root = `${await poolsDirectory(signal)}/${id}`;
      const partition = String(offer.specific.partition ?? offer.region);
      // The pool's directory, recording its pool: what `cleanup` finds when a dead client left it.
      await login.checked(
        [
          "sh",
          "-c",
          `mkdir -p ${shellQuote(root)} && printf %s ${shellQuote(poolId ?? "")} > ${shellQuote(`${root}/${POOL_FILE}`)}`,
        ],
        signal,
      );
      return Object.freeze({
        id,
        provider: "slurm",
        poolId: poolId ?? "",
        region: partition,
        spec,
        offer,
        ssh: null,
        specific: Object.freeze({ partition, root }),
      });
    },

    async provision({ cluster, count, signal }): Promise<readonly Instance[]> {
      const { partition } = cluster.specific;
      const nodes = (await readNodes(signal)).filter((node) => node.partition === partition);
      const usable = nodes.filter((node) => USABLE_STATES.has(node.state));
      if (count > usable.length) {
        throw new ProvisionError({
          provider: "slurm",
          isRetryable: false,
          message: `the pool asks for ${count} nodes; partition "${partition}" has ${usable.length} usable of ${nodes.length} (${nodes.map((node) => `${node.name} ${node.state}`).join(", ")}): Slurm could never start the job`,
        });
      }
      const addresses = new Map(nodes.map((node) => [node.name, node.address]));
      const preemptible = cluster.offer.spotPrice !== null;
      // The pool's first nodes are one job, which Slurm starts all at once; nodes an elastic pool adds
      // later are one job each, so that each can be given back alone (scancel).
      const own = [...jobs.values()].filter((job) => job.cluster === cluster.id);
      const sizes = own.length > 0 ? Array.from({ length: count }, () => 1) : [count];
      // Each of the pool's nodes is a machine of its own: Slurm would otherwise fit an added job beside
      // one the pool holds.
      const held = own.flatMap(
        (job) =>
          job.names?.filter(
            (name, index): name is string => name !== undefined && !job.released.has(index),
          ) ?? [],
      );
      const instances: Instance[] = [];
      for (const size of sizes) {
        const job = await submitJob(cluster, size, held, signal);
        held.push(...job.nodes);
        for (let index = 0; index < size; index += 1)
          instances.push(instanceFor(cluster, job, index, addresses, undefined, preemptible));
      }
      return instances;
    },

    async getInstance({ cluster, id, signal, progress }): Promise<Instance | null> {
      const parsed = parseInstanceId(id);
      if (!parsed) return null;
      if (jobs.get(parsed.jobId)?.released.has(parsed.index)) return null;
      const job = await readJob(parsed.jobId, signal);
      if (!job) return null;
      const addresses = new Map(
        job.nodes.length > 0 ? (await readNodes(signal)).map((node) => [node.name, node.address]) : [],
      );
      const position = job.state === "PENDING" ? (await queuePositions(signal)).get(job.id) : undefined;
      // The job's first instance speaks for the job: its nodes wait in the queue together.
      if (parsed.index === 0) progress?.(queueReport(job, position));
      return instanceFor(cluster, job, parsed.index, addresses, position, cluster.offer?.spotPrice != null);
    },

    async launchWorker(options) {
      const { instance, cluster } = options;
      const jobId = instance.tags["slurm:job"];
      const nodeName = instance.tags["slurm:node"];
      if (!jobId || !nodeName || !instance.privateIp) {
        throw new ProvisionError({
          provider: "slurm",
          message: `instance ${instance.id} has no node yet (job ${jobId ?? "?"} is ${instance.tags["slurm:state"] ?? "unknown"})`,
        });
      }
      const placement: SlurmPlacement = { jobId, nodeName, nodeAddress: instance.privateIp };
      const key = bootstrapKey(cluster.id, placement);
      let bootstrap = bootstraps.get(key);
      if (!bootstrap) {
        bootstrap = bootstrapPool(options, declared, placement);
        bootstraps.set(key, bootstrap);
        // A failed bootstrap is tried again by the next launch (a replacement node), not remembered.
        bootstrap.catch(() => bootstraps.delete(key));
      }
      const warm = await bootstrap;
      return startSlurmWorker(options, declared, placement, warm);
    },

    async terminate({ ids, signal }): Promise<void> {
      const parsedIds = ids.flatMap((id) => parseInstanceId(id) ?? []);
      // A job whose nodes are not known yet (pending, or started but never looked at) is read first:
      // a node let go of must leave it, not stay allocated until the pool ends.
      const unread = new Set(
        parsedIds
          .filter(({ jobId }) => jobs.has(jobId) && jobs.get(jobId)?.names === undefined)
          .map(({ jobId }) => jobId),
      );
      /** Those of them still in the queue. */
      const queued = new Set<string>();
      for (const jobId of unread) if (await readJob(jobId, signal)) queued.add(jobId);
      const cancel = new Set<string>();
      const shrink = new Set<string>();
      /** The nodes this call lets go of, by job: marked released again only once Slurm took them. */
      const releasing = new Map<string, number[]>();
      for (const parsed of parsedIds) {
        const known = jobs.get(parsed.jobId);
        if (!known) {
          // Not submitted by this process (`skyward down`): the whole job goes.
          cancel.add(parsed.jobId);
          continue;
        }
        if (known.released.has(parsed.index)) continue;
        known.released.add(parsed.index);
        releasing.set(parsed.jobId, [...(releasing.get(parsed.jobId) ?? []), parsed.index]);
        if (known.released.size >= known.nodes) cancel.add(parsed.jobId);
        // Shrunk when known or still queued; a job gone from the queue (ended) holds no node any more.
        else if (known.names !== undefined || queued.has(parsed.jobId)) shrink.add(parsed.jobId);
      }
      try {
        for (const jobId of shrink) {
          const known = jobs.get(jobId);
          if (!known || cancel.has(jobId)) continue;
          if (known.names === undefined) {
            if (await shrinkPendingJob(login, jobId, known, signal)) {
              releasing.delete(jobId);
              continue;
            }
            // Not held: it started (or ended) since it was read.
            const job = await readJob(jobId, signal);
            if (!job || ENDED_STATES.has(job.state)) continue;
            if (known.names === undefined) throw unknownNodesError(jobId, job.state);
          }
          const running = known as TrackedJob & { names: readonly (string | undefined)[] };
          await shrinkRunningJob(
            login,
            jobId,
            running,
            (given) => removeNodeEnvironments(login, declared, known.cluster, jobId, given, signal),
            signal,
          );
          releasing.delete(jobId);
        }
        if (cancel.size > 0) await login.checked(["scancel", ...cancel], signal);
      } catch (error) {
        // Not given back: asked again, these nodes are tried again, never taken as already released.
        for (const [jobId, indices] of releasing) {
          const known = jobs.get(jobId);
          for (const index of indices) if (!known?.left.has(index)) known?.released.delete(index);
        }
        throw error;
      }
    },

    async teardown({ cluster, signal }): Promise<void> {
      for (const [jobId, job] of jobs) if (job.cluster === cluster.id) jobs.delete(jobId);
      await login.checked(["scancel", `--name=${jobNameOf(cluster.id)}`], signal);
      const root = cluster.specific?.root;
      if (root) await login.run(`rm -rf ${shellQuote(root)}`, signal);
      for (const key of bootstraps.keys())
        if (key === cluster.id || key.startsWith(`${cluster.id}/`)) bootstraps.delete(key);
      login.close();
    },

    async cleanup({ pools, signal, waitSeconds = 0 }): Promise<CleanupResult> {
      const directory = await poolsDirectory(signal);
      const listing = await login.checked(
        [
          "sh",
          "-c",
          `cd ${shellQuote(directory)} 2>/dev/null || exit 0; for d in */; do [ -d "$d" ] || continue; d=\${d%/}; printf '%s|%s\\n' "$d" "$(cat "$d/${POOL_FILE}" 2>/dev/null)"; done`,
        ],
        signal,
      );
      const liveJobs = async () =>
        new Map(
          parseJobs(await login.checked(["squeue", "-h", "--me", "-o", SQUEUE_FORMAT], signal)).flatMap(
            (job) => {
              const comment = parseJobComment(job.comment);
              return comment ? [[comment.cluster, job.id] as const] : [];
            },
          ),
        );
      const selected = listing
        .split("\n")
        .map((line) => line.split("|"))
        .filter((fields): fields is [string, string] => fields[0] !== undefined && fields[0] !== "")
        .map(([cluster, recorded]) => ({ cluster, poolId: recorded || cluster }))
        .filter(
          ({ cluster, poolId }) => pools === "all" || pools.includes(poolId) || pools.includes(cluster),
        );
      // A job just cancelled stays in the queue while it completes: its directory waits for it, up to waitSeconds.
      const deadline = Date.now() + waitSeconds * 1000;
      let live = await liveJobs();
      while (selected.some(({ cluster }) => live.has(cluster)) && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 1000));
        live = await liveJobs();
      }
      const removed: PoolResource[] = [];
      const left: LeftPoolResource[] = [];
      for (const { cluster, poolId } of selected) {
        const resource = { poolId, kind: "pool directory", id: `${directory}/${cluster}` };
        const job = live.get(cluster);
        if (job !== undefined) {
          left.push({ ...resource, reason: `its job ${job} is still in the queue` });
          continue;
        }
        await login.checked(["rm", "-rf", "--", resource.id], signal);
        removed.push(resource);
      }
      return { removed, left };
    },

    selfDestruct({ instance }): string {
      // Run on the node by the worker when its TTL runs out with no client: the allocation ends.
      const jobId = instance.tags["slurm:job"] ?? parseInstanceId(instance.id)?.jobId;
      return jobId ? `scancel ${shellQuote(jobId)}` : "true";
    },

    async listInstances({ signal }): Promise<readonly Instance[]> {
      const listed = parseJobs(await login.checked(["squeue", "-h", "--me", "-o", SQUEUE_FORMAT], signal));
      const partitions = await readPartitions(signal);
      const addresses = new Map(
        [...partitions.values()].flatMap((partition) =>
          partition.nodes.map((node) => [node.name, node.address] as const),
        ),
      );
      const positions = await queuePositions(signal);
      const instances: Instance[] = [];
      for (const job of listed) {
        const comment = parseJobComment(job.comment);
        if (!comment) continue;
        const cluster: ClusterFromTags = {
          id: comment.cluster,
          provider: "slurm",
          poolId: comment.pool,
          region: job.partition,
          ssh: null,
        };
        for (const index of indicesOf(job))
          instances.push(
            instanceFor(
              cluster,
              job,
              index,
              addresses,
              positions.get(job.id),
              partitions.get(job.partition)?.preemptible ?? false,
            ),
          );
      }
      return instances;
    },
  };
}

/**
 * Creates the provider from a `[providers.NAME]` table of `skyward.toml` (`type = "slurm"`), its keys
 * and those of its `login` table already camelCased by the core; `accelerator` may be a name
 * (`accelerator = "A100"`).
 *
 * ```toml
 * [providers.cluster]
 * type = "slurm"
 * partition = "gpu"
 * account = "ml-lab"
 * time_limit = "2:00:00"
 * login = { host = "login.hpc.example.edu", user = "alice", identity_file = "~/.ssh/id_ed25519" }
 * ```
 */
export function createProviderFromConfig(settings: Record<string, unknown>): ProviderV1<SlurmClusterData> {
  const { accelerator } = settings;
  return build(
    parseInput(settingsSchema, {
      ...settings,
      ...(typeof accelerator === "string"
        ? { accelerator: acceleratorFromName(accelerator, "accelerator") }
        : {}),
    }),
  );
}
