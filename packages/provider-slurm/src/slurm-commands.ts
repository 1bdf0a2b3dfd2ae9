/**
 * Slurm's command-line tools as this provider uses them: the `sbatch` arguments of a pool's job, and
 * the parsing of what `sinfo`, `squeue` and `sbatch` print. Pure functions (no connection), so they
 * are tested against Slurm's documented output formats without a cluster.
 */
import { shellQuote } from "@skyward/core/contract";

/** One compute node as `sinfo -N` describes it. */
export interface SlurmNode {
  readonly name: string;
  readonly partition: string;
  /** The cluster's default partition (`sinfo` marks it with `*`). */
  readonly isDefaultPartition: boolean;
  readonly cpus: number;
  readonly memoryMb: number;
  /** GPUs (GRES `gpu`) on the node. */
  readonly gpus: number;
  /** The GRES type (`a100` of `gpu:a100:4`), when typed. */
  readonly gpuType: string | undefined;
  /** `idle`, `mixed`, `allocated`, `down`, `drained`… (lower case, as `%T` prints it). */
  readonly state: string;
  /** Its address (`NodeAddr`). */
  readonly address: string;
}

/**
 * The `|`-separated rows of a tool's output, each a record of the named fields; the last field takes
 * the rest of its line (a job's comment may hold `|`). Lines with fewer fields are not rows.
 */
function rows<const Names extends readonly string[]>(
  output: string,
  names: Names,
): Record<Names[number], string>[] {
  const last = names.length - 1;
  return output
    .split("\n")
    .map((line) => line.trim().split("|"))
    .filter((fields) => fields.length >= names.length)
    .map(
      (fields) =>
        Object.fromEntries(
          names.map((name, index) => [name, index === last ? fields.slice(last).join("|") : fields[index]]),
        ) as Record<Names[number], string>,
    );
}

/** The `sinfo` output format {@link parseNodes} reads. */
export const SINFO_NODE_FORMAT = "%N|%P|%c|%m|%G|%T|%o";

/** Parses `sinfo -h -N -o "%N|%P|%c|%m|%G|%T|%o"`: one line per node and partition. */
export function parseNodes(output: string): SlurmNode[] {
  const nodes: SlurmNode[] = [];
  const fields = ["name", "partition", "cpus", "memory", "gres", "state", "address"] as const;
  for (const { name, partition, cpus, memory, gres, state, address } of rows(output, fields)) {
    const gpu = parseGpuGres(gres);
    nodes.push({
      name,
      partition: partition.replace(/\*$/, ""),
      isDefaultPartition: partition.endsWith("*"),
      cpus: Number(cpus) || 0,
      memoryMb: Number(memory) || 0,
      gpus: gpu.count,
      gpuType: gpu.type,
      // `%T` adds `*` (not responding), `~` (powered off), `#`, `!`, `%`, `$`, `@`, `^`, `-` to a state.
      state: state.replace(/[*~#!%$@^-]+$/, "").toLowerCase(),
      address,
    });
  }
  return nodes;
}

/** The GPUs of a GRES list (`gpu:a100:4(S:0-1),nic:1`, `gpu:2`, `(null)`). */
export function parseGpuGres(gres: string): { count: number; type: string | undefined } {
  let count = 0;
  let type: string | undefined;
  for (const entry of gres.split(/,(?![^(]*\))/)) {
    const match = /^gpu(?::([^:(]+))?:(\d+)/.exec(entry.trim());
    if (!match) continue;
    count += Number(match[2]);
    type ??= match[1];
  }
  return { count, type };
}

/** Expands a Slurm host list (`node[01-03,7],gpu5`) to its names, in order. */
export function expandHostList(list: string): string[] {
  const names: string[] = [];
  for (const part of list.split(/,(?![^[]*\])/)) {
    const trimmed = part.trim();
    if (trimmed === "" || trimmed === "(null)") continue;
    const match = /^([^[]*)\[([^\]]+)\](.*)$/.exec(trimmed);
    if (!match) {
      names.push(trimmed);
      continue;
    }
    const [, prefix, ranges, suffix] = match as unknown as [string, string, string, string];
    for (const range of ranges.split(",")) {
      const [from, to = from] = range.split("-") as [string, string?];
      const width = from.length;
      for (let index = Number(from); index <= Number(to); index += 1)
        names.push(`${prefix}${String(index).padStart(width, "0")}${suffix}`);
    }
  }
  return names;
}

/** One job as {@link parseJobs} reads it. */
export interface SlurmJob {
  readonly id: string;
  readonly name: string;
  /** `PENDING`, `RUNNING`, `COMPLETED`, `CANCELLED`, `PREEMPTED`, `TIMEOUT`, `NODE_FAIL`… */
  readonly state: string;
  /** Why it waits (`Priority`, `Resources`, `QOSMaxGRESPerUser`…), or `None`. */
  readonly reason: string;
  /** Its nodes, in the job's order (node 0 first), once it runs. */
  readonly nodes: readonly string[];
  readonly partition: string;
  /** How many nodes it has or asks for. */
  readonly nodeCount: number;
  readonly comment: string;
  /** When it was submitted, milliseconds since the epoch (NaN when unknown). */
  readonly submittedAt: number;
}

/** The `squeue` output format {@link parseJobs} reads. */
export const SQUEUE_FORMAT = "%i|%j|%T|%r|%N|%P|%V|%D|%k";

/** Parses `squeue -h -o "%i|%j|%T|%r|%N|%P|%V|%D|%k"` (the comment last: it may hold `|`). */
export function parseJobs(output: string): SlurmJob[] {
  const jobs: SlurmJob[] = [];
  const fields = [
    "id",
    "name",
    "state",
    "reason",
    "nodes",
    "partition",
    "submitted",
    "nodeCount",
    "comment",
  ] as const;
  for (const { id, name, state, reason, nodes, partition, submitted, nodeCount, comment } of rows(
    output,
    fields,
  )) {
    jobs.push({
      id,
      name,
      state,
      reason,
      nodes: state === "PENDING" ? [] : expandHostList(nodes),
      partition,
      nodeCount: Number(nodeCount) || 0,
      comment,
      submittedAt: Date.parse(`${submitted}Z`),
    });
  }
  return jobs;
}

/** What a pool's job asks for. */
export interface PoolJobRequest {
  readonly jobName: string;
  readonly comment: string;
  readonly nodes: number;
  readonly partition?: string;
  readonly account?: string;
  readonly qos?: string;
  readonly timeLimit?: number | string;
  /** GPUs per node, with their GRES type when the partition's GRES are typed. */
  readonly gpus?: { readonly count: number; readonly type?: string };
  readonly cpusPerNode?: number;
  readonly memoryGbPerNode?: number;
  /** Nodes it must not be given (`--exclude`): those the pool already holds. */
  readonly exclude?: readonly string[];
  readonly extra: readonly string[];
  /** Where the job's own output goes (it prints nothing unless Slurm has something to say). */
  readonly output: string;
}

/**
 * The `sbatch` arguments of a pool's job: one task per node holding the allocation (a shell that
 * sleeps until the job is cancelled or its time runs out) while workers run in it as `srun` steps.
 * Not requeued: a preempted job ends, and the pool replaces its nodes as it would a spot interruption.
 */
export function sbatchArguments(request: PoolJobRequest): string[] {
  const args = [
    "--parsable",
    `--job-name=${request.jobName}`,
    `--comment=${request.comment}`,
    `--nodes=${request.nodes}`,
    "--ntasks-per-node=1",
    "--no-requeue",
    `--output=${request.output}`,
  ];
  if (request.partition !== undefined) args.push(`--partition=${request.partition}`);
  if (request.account !== undefined) args.push(`--account=${request.account}`);
  if (request.qos !== undefined) args.push(`--qos=${request.qos}`);
  if (request.timeLimit !== undefined) args.push(`--time=${request.timeLimit}`);
  if (request.gpus && request.gpus.count > 0)
    args.push(`--gres=gpu:${request.gpus.type ? `${request.gpus.type}:` : ""}${request.gpus.count}`);
  if (request.cpusPerNode !== undefined) args.push(`--cpus-per-task=${request.cpusPerNode}`);
  if (request.memoryGbPerNode !== undefined) args.push(`--mem=${Math.ceil(request.memoryGbPerNode * 1024)}M`);
  if (request.exclude && request.exclude.length > 0) args.push(`--exclude=${request.exclude.join(",")}`);
  args.push(...request.extra);
  // `exec sleep`: the batch shell becomes the sleep, so a cancel's signal ends it at once.
  args.push("--wrap", "exec sleep infinity");
  return args;
}

/** `sbatch …` as one shell line. */
export function sbatchCommand(request: PoolJobRequest): string {
  return ["sbatch", ...sbatchArguments(request)].map((word) => shellQuote(word)).join(" ");
}

/** The job id `sbatch --parsable` printed (`42` or `42;cluster`), or undefined. */
export function parseSubmittedJobId(stdout: string): string | undefined {
  const match = /^(\d+)(;\S+)?$/m.exec(stdout.trim());
  return match?.[1];
}

/** Skyward's job name for a cluster: how `skyward instances` and `down` find its jobs. */
export function jobNameOf(clusterId: string): string {
  return `skyward-${clusterId}`;
}

/** The job comment recording the cluster and pool, read back by {@link parseJobComment}. */
export function jobComment(clusterId: string, poolId: string, region: string): string {
  return `skyward:cluster=${clusterId};pool=${poolId};region=${region}`;
}

/** The cluster and pool a job's comment names, when it is Skyward's. */
export function parseJobComment(
  comment: string,
): { cluster: string; pool: string; region: string } | undefined {
  if (!comment.startsWith("skyward:")) return undefined;
  const fields = new Map(
    comment
      .slice("skyward:".length)
      .split(";")
      .map((pair) => pair.split("=", 2) as [string, string]),
  );
  const cluster = fields.get("cluster");
  if (!cluster) return undefined;
  return { cluster, pool: fields.get("pool") ?? "", region: fields.get("region") ?? "" };
}

/**
 * Each partition's `PreemptMode` from `scontrol show partition -o` (one `Key=Value …` line per
 * partition): `OFF`, or how its jobs are preempted (`REQUEUE`, `CANCEL`, `SUSPEND`…).
 */
export function parsePreemptModes(output: string): Map<string, string> {
  const modes = new Map<string, string>();
  for (const line of output.split("\n")) {
    const name = /(?:^|\s)PartitionName=(\S+)/.exec(line)?.[1];
    if (!name) continue;
    modes.set(name, /(?:^|\s)PreemptMode=(\S+)/.exec(line)?.[1] ?? "OFF");
  }
  return modes;
}
