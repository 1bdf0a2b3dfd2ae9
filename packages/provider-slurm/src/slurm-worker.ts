/**
 * Starting a worker on a node of a pool's job: everything goes through the login node. The Python
 * runtime, the includes and the bootstrap script are unpacked once per pool in its directory on the
 * shared filesystem, and the bootstrap runs once, on the job's first node to start (one virtual
 * environment for every node) — or, with `nodeLocalDirectory`, they are staged per node there and
 * each node copies them to its own disk and runs the bootstrap for itself. Each worker is then an
 * `srun` step of the job on its node (`--overlap`, inside the allocation), listening on the node's
 * cluster address; the client reaches it through an SSH tunnel that the login node opens to that
 * address.
 */
import {
  BootstrapError,
  ConnectionError,
  collectIncludedFiles,
  describeBootstrapFailure,
  type LaunchWorkerOptions,
  parseBootstrapMarker,
  shellQuote,
  version,
  type WorkerEndpoint,
} from "@skyward/core/contract";
import { processRunsTest, renderBootstrapScript, runtimeFiles, type SshConnection } from "@skyward/ssh";
import { connectLogin, loginLabel, type SlurmLogin } from "./slurm-login.js";
import type { SlurmDeclared } from "./slurm-settings.js";

/** What a pool's cluster records for its workers. */
export interface SlurmClusterData {
  /** The partition its jobs go to (the cluster's default, resolved at prepare). */
  readonly partition: string;
  /** The pool's directory on the shared filesystem: environment, runtime, code, one directory per node. */
  readonly root: string;
}

/** Where one worker runs: its job, its node in the job and that node's address. */
export interface SlurmPlacement {
  readonly jobId: string;
  readonly nodeName: string;
  readonly nodeAddress: string;
}

const READY_PREFIX = "SKYWARD_WORKER_READY ";
const UPLOAD_MARKER = "::skyward-upload:: done";

/** The `srun` line of a step of `jobId` on `nodeName`, sharing the allocation with the others. */
export function srunStep(placement: SlurmPlacement, extra: readonly string[] = []): string {
  return [
    "srun",
    `--jobid=${placement.jobId}`,
    "--overlap",
    "--nodes=1",
    "--ntasks=1",
    `--nodelist=${placement.nodeName}`,
    ...extra,
  ]
    .map((word) => shellQuote(word))
    .join(" ");
}

/** The line a step prints to its stderr when the settings' modules do not load. */
const MODULES_FAILED = "::skyward-modules:: failed";

/** `module load …; ` for the settings' modules (the step exits, saying so, when one fails), or nothing. */
function moduleLoad(declared: SlurmDeclared): string {
  if (declared.modules.length === 0) return "";
  // `module` is a shell function that login shells define; a batch step's shell may lack it.
  return `{ command -v module >/dev/null 2>&1 || . /etc/profile.d/modules.sh 2>/dev/null || . /usr/share/lmod/lmod/init/bash 2>/dev/null; }; module load ${declared.modules.map((name) => shellQuote(name)).join(" ")} || { echo ${shellQuote(MODULES_FAILED)} >&2; exit 1; }; `;
}

/** A pool's environment on each node's own disk, when the settings make it node-local. */
function nodeLocalEnvironment(declared: SlurmDeclared, clusterId: string): string | undefined {
  return declared.nodeLocalDirectory !== undefined
    ? `${declared.nodeLocalDirectory}/${clusterId}`
    : undefined;
}

/**
 * Where a pool's environment (virtual environment, runtime, code, `env.sh`) is on its nodes: the
 * pool's directory on the shared filesystem, or its directory on each node's own disk.
 */
export function environmentRoot(
  declared: SlurmDeclared,
  cluster: { readonly id: string; readonly specific: SlurmClusterData },
): string {
  return nodeLocalEnvironment(declared, cluster.id) ?? cluster.specific.root;
}

/**
 * Removes a node-local environment from `nodeNames` of job `jobId` (a step on each), before the pool
 * gives them back while the job goes on; best effort. Nodes the job ends with clean up by themselves
 * (see {@link bootstrapPool}).
 */
export async function removeNodeEnvironments(
  login: SlurmLogin,
  declared: SlurmDeclared,
  clusterId: string,
  jobId: string,
  nodeNames: readonly string[],
  signal?: AbortSignal,
): Promise<void> {
  const environment = nodeLocalEnvironment(declared, clusterId);
  if (environment === undefined || nodeNames.length === 0) return;
  const step = [
    "srun",
    `--jobid=${jobId}`,
    "--overlap",
    `--nodes=${nodeNames.length}`,
    "--ntasks-per-node=1",
    `--nodelist=${nodeNames.join(",")}`,
    "rm",
    "-rf",
    "--",
    environment,
  ];
  await login.run(step.map((word) => shellQuote(word)).join(" "), signal).catch(() => undefined);
}

/** Whether a pool bootstraps each node for itself (a node-local environment) rather than once. */
export function bootstrapsPerNode(declared: SlurmDeclared): boolean {
  return declared.nodeLocalDirectory !== undefined;
}

/** The worker's command line, listening on the node's cluster address rather than its loopback. */
function workerCommand(
  options: LaunchWorkerOptions<SlurmClusterData>,
  root: string,
  address: string,
): string {
  const command = options.command({
    pythonBin: `${root}/venv/bin/python`,
    venvDir: `${root}/venv`,
    workerScript: `${root}/runtime/skyward_worker.py`,
    privateIp: address,
    root,
  });
  const args = [...command.args];
  const host = args.indexOf("--host");
  // The login node, not the worker's own node, opens the tunnel's far end: the worker must be
  // reachable on the cluster network (the pool's token still guards every connection).
  if (host !== -1 && host + 1 < args.length) args[host + 1] = address;
  return command.with({ args }).render();
}

/**
 * Unpacks the pool's files on the shared filesystem and runs the bootstrap on `placement`'s node
 * (copying the files to the node's own disk first when the environment is node-local), streaming its
 * phases; resolves with whether the environment was already there (warm).
 */
export async function bootstrapPool(
  options: LaunchWorkerOptions<SlurmClusterData>,
  declared: SlurmDeclared,
  placement: SlurmPlacement,
): Promise<boolean> {
  const { cluster, nodeId: node, signal } = options;
  const root = cluster.specific.root;
  const environment = environmentRoot(declared, cluster);
  const perNode = bootstrapsPerNode(declared);
  // Node-local: staged per node (nodes bootstrap at once) and copied to the node's disk by its step.
  const staged = perNode ? `${root}/stage/${placement.nodeName}` : root;
  const q = (path: string) => shellQuote(`${staged}/${path}`);
  const inEnvironment = (path: string) => shellQuote(`${environment}/${path}`);
  const logTail = () =>
    tail(
      ssh,
      `${perNode ? `${srunStep(placement)} ` : ""}tail -n 40 ${inEnvironment("bootstrap.log")} 2>/dev/null`,
    );
  const report = (phase: string, status: "started" | "finished" | "failed", durationMs?: number) =>
    options.progress?.({ phase, status, ...(durationMs !== undefined ? { durationMs } : {}) });
  const [runtime, includes] = await Promise.all([
    runtimeFiles(),
    collectIncludedFiles(options.image.includes, options.image.excludes),
  ]);
  const script = renderBootstrapScript({
    image: options.image,
    root: environment,
    skywardVersion: version,
    pluginOps: options.pluginOps,
    sudo: declared.login.user !== "root",
    pythonRequirement: options.image.python,
    uploadedRuntime: true,
  });
  const files = [
    ...runtime,
    ...includes.map((file) => ({ source: file.source, target: `work/${file.target}`, mode: file.mode })),
    { content: script, target: "bootstrap.sh", mode: 0o700 },
  ];
  const ssh = await connectLogin(declared, signal, node);
  let warm = false;
  let uploaded = false;
  let done = false;
  let pending = "";
  const started = performance.now();
  report("upload", "started");
  const onStdout = (chunk: string) => {
    pending += chunk;
    const lines = pending.split("\n");
    pending = lines.pop() ?? "";
    for (const line of lines) {
      if (line === UPLOAD_MARKER) {
        uploaded = true;
        report("upload", "finished", performance.now() - started);
        continue;
      }
      const marker = parseBootstrapMarker(line);
      if (!marker) continue;
      if (marker.kind === "warm") warm = true;
      else if (marker.kind === "done") done = true;
      else
        report(
          marker.name,
          marker.status === "start" ? "started" : marker.status === "done" ? "finished" : "failed",
          marker.durationMs,
        );
    }
  };
  try {
    const unpack = `rm -rf ${q("runtime")} ${q("work")} && mkdir -p ${shellQuote(staged)} && tar -x -m -C ${shellQuote(staged)} -f - && cat >/dev/null`;
    const copy = perNode
      ? `rm -rf ${inEnvironment("runtime")} ${inEnvironment("work")} && mkdir -p ${shellQuote(environment)} && cp -a ${shellQuote(`${staged}/.`)} ${shellQuote(environment)} && `
      : "";
    const bootstrap = `${srunStep(placement)} bash -c ${shellQuote(`${moduleLoad(declared)}${copy}bash ${inEnvironment("bootstrap.sh")}`)}`;
    const result = await ssh
      .execWithFiles(
        `if { ${unpack}; }; then echo ${UPLOAD_MARKER}; else s=$?; cat >/dev/null; exit "$s"; fi; ${bootstrap}`,
        files,
        { signal, timeoutSeconds: options.timeoutSeconds + 60, onStdout },
      )
      .catch(async (error: unknown) => {
        if (signal.aborted || !uploaded) throw error;
        throw new BootstrapError({
          node,
          logTail: await logTail(),
          message: `Bootstrap on node ${node} (${placement.nodeName} of job ${placement.jobId}) did not finish within ${options.timeoutSeconds} s`,
          cause: error,
        });
      });
    if (!uploaded) {
      throw new ConnectionError({
        host: loginLabel(declared),
        node,
        message: `unpacking ${files.length} files into ${root} through the login node failed (exit code ${result.code}): ${(result.stderr.trim() || result.stdout.trim()).slice(-1000)}`,
      });
    }
    if (!done && result.stderr.includes(MODULES_FAILED)) {
      const said = result.stderr.replace(MODULES_FAILED, "").trim();
      throw new BootstrapError({
        node,
        logTail: said,
        message: `Loading the environment modules ${declared.modules.join(", ")} failed on node ${node} (${placement.nodeName} of job ${placement.jobId}), before the bootstrap: ${said.split("\n").slice(0, 3).join(" ").slice(0, 500)}`,
      });
    }
    if (!done) {
      const bootstrapLog = (await logTail()) || result.stderr.trim();
      const failed = describeBootstrapFailure(bootstrapLog);
      throw new BootstrapError({
        node,
        ...(failed ? { phase: "plugins" } : {}),
        logTail: bootstrapLog,
        message: `Bootstrap failed on node ${node} (${placement.nodeName} of job ${placement.jobId}), exit code ${result.code}${failed ? `: ${failed}` : ""}`,
      });
    }
    if (perNode) {
      // A step that lives as long as the job holds the node, and removes the environment when Slurm
      // ends it (SIGTERM: the pool's end, the time limit, a preemption, a client that died).
      const janitor = `trap 'rm -rf -- "$0"; exit 0' TERM; while :; do sleep 3600 & wait $!; done`;
      const step = `${srunStep(placement)} bash -c ${shellQuote(janitor)} ${shellQuote(environment)}`;
      await ssh.exec(`(setsid ${step} >/dev/null 2>&1 </dev/null &)`, {
        signal,
        timeoutSeconds: 30,
      });
    }
    return warm;
  } finally {
    ssh.close();
  }
}

/** What `command` (a `tail` of a log) prints, or nothing when it fails. */
async function tail(ssh: SshConnection, command: string): Promise<string> {
  return ssh.exec(command, { timeoutSeconds: 15 }).then(
    (output) => output.stdout.trim(),
    () => "",
  );
}

/**
 * The shell command that shows how a worker's start goes in its step directory `directory`: the
 * worker's log, its pid (`::pid N`), and `::alive` while its `srun` step runs, else `::dead` and the
 * step's log. The step runs detached: where the login node's init does not reap, an ended one stays a
 * zombie, which still answers `kill -0` (`processRunsTest` tells them apart).
 */
export function workerProbeCommand(directory: string): string {
  const q = (path: string) => shellQuote(`${directory}/${path}`);
  return `cat ${q("worker.log")} 2>/dev/null; echo; echo "::pid $(cat ${q("worker.pid")} 2>/dev/null)"; if ${processRunsTest(`"$(cat ${q("srun.pid")})"`)}; then echo ::alive; else echo ::dead; cat ${q("srun.log")}; fi`;
}

/**
 * Starts the worker of `placement` as an `srun` step (detached from the SSH session, so that it
 * outlives a client that dies, until its TTL or the job's time limit) and returns its endpoint once
 * it listens: tunnels through the login node to the node's address.
 */
export async function startSlurmWorker(
  options: LaunchWorkerOptions<SlurmClusterData>,
  declared: SlurmDeclared,
  placement: SlurmPlacement,
  warm: boolean,
): Promise<WorkerEndpoint> {
  const { cluster, nodeId: node, signal } = options;
  const root = cluster.specific.root;
  const environment = environmentRoot(declared, cluster);
  const directory = `${root}/nodes/${placement.jobId}-${node}`;
  const q = (path: string) => shellQuote(`${directory}/${path}`);
  const started = performance.now();
  options.progress?.({ phase: "worker", status: "started" });
  const start = [
    "#!/bin/bash",
    `${moduleLoad(declared)}cd ${shellQuote(`${environment}/work`)} && . ${shellQuote(`${environment}/env.sh`)} || exit 1`,
    `SKYWARD_TOKEN="$(cat ${q("worker.token")})"`,
    `export SKYWARD_TOKEN PYTHONPATH=${shellQuote(`${environment}/runtime`)} PYTHONUNBUFFERED=1`,
    `echo $$ > ${q("worker.pid")}`,
    // When Slurm ends the step (preemption, the time limit, scancel) it sends SIGTERM, then SIGKILL
    // after its KillWait: the worker takes SIGTERM for a preemption (the pool hears `node.preempted`
    // and runs its tasks again elsewhere), unless the pool asked it to stop first.
    `exec ${workerCommand(options, environment, placement.nodeAddress)} > ${q("worker.log")} 2>&1`,
    "",
  ].join("\n");
  const gpus = cluster.spec?.accelerator?.count ?? 0;
  const vcpus = cluster.spec?.vcpus;
  const step = srunStep(placement, [
    ...(gpus > 0 ? [`--gres=gpu:${gpus}`] : []),
    ...(vcpus !== undefined ? [`--cpus-per-task=${vcpus}`] : []),
  ]);
  const ssh = await connectLogin(declared, signal, node);
  try {
    const launch = await ssh.execWithFiles(
      `mkdir -p ${shellQuote(directory)} && tar -x -m -C ${shellQuote(directory)} -f - && cat >/dev/null && ` +
        `(setsid ${step} bash ${q("start.sh")} > ${q("srun.log")} 2>&1 < /dev/null & echo $! > ${q("srun.pid")})`,
      [
        { content: start, target: "start.sh", mode: 0o700 },
        { content: options.token, target: "worker.token", mode: 0o600 },
      ],
      { signal, timeoutSeconds: 60 },
    );
    if (launch.code !== 0) {
      throw new BootstrapError({
        node,
        phase: "worker",
        logTail: launch.stderr.trim(),
        message: `The worker's step on node ${node} (${placement.nodeName} of job ${placement.jobId}) could not be started, exit code ${launch.code}`,
      });
    }
    const probe = workerProbeCommand(directory);
    const deadline = performance.now() + options.timeoutSeconds * 1000;
    for (;;) {
      signal.throwIfAborted();
      const output = (await ssh.exec(probe, { signal, timeoutSeconds: 15 })).stdout;
      const ready = output.split("\n").find((line) => line.startsWith(READY_PREFIX));
      if (ready) {
        const port = (JSON.parse(ready.slice(READY_PREFIX.length)) as { port: number }).port;
        const pid = Number(/::pid (\d+)/.exec(output)?.[1] ?? 0);
        options.progress?.({ phase: "worker", status: "finished", durationMs: performance.now() - started });
        return {
          host: `${placement.nodeName} (${placement.nodeAddress}) via ${loginLabel(declared)}`,
          port,
          pid,
          warm,
          openStream: () => ssh.forwardOut(placement.nodeAddress, port),
          close: () => ssh.close(),
        };
      }
      const dead = /^::dead$/m.test(output);
      if (dead || performance.now() > deadline) {
        throw new BootstrapError({
          node,
          phase: "worker",
          logTail: output
            .replace(/::pid.*?\n/s, "")
            .trim()
            .split("\n")
            .slice(-40)
            .join("\n"),
          message: dead
            ? `The worker on node ${node} (${placement.nodeName} of job ${placement.jobId}) exited before it was ready`
            : `The worker on node ${node} (${placement.nodeName} of job ${placement.jobId}) did not start within ${options.timeoutSeconds} s`,
        });
      }
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  } catch (error) {
    ssh.close();
    throw error;
  }
}
