/**
 * The built-in `Local` provider: every node is a worker process on this machine, with its own node
 * id, reached over loopback with the same protocol as remote nodes. It is the default when a spec
 * names no provider.
 */
import { execFile, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { writeFileSync } from "node:fs";
import { copyFile, mkdir, mkdtemp, readdir, readFile, rm, stat, statfs, writeFile } from "node:fs/promises";
import { cpus, tmpdir, totalmem } from "node:os";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { promisify } from "node:util";
import { collectIncludedFiles } from "../config/local-files.js";
import {
  describeBootstrapFailure,
  parseBootstrapMarker,
  renderPluginOpsScript,
} from "../contract/bootstrap-ops.js";
import { shellQuote } from "../contract/launch-command.js";
import type { PluginBootstrapOp } from "../contract/plugin.js";
import {
  type Cluster,
  type Instance,
  type LaunchWorkerOptions,
  type Offer,
  offerFormFactorFit,
  type ProviderV1,
  type WorkerEndpoint,
} from "../contract/provider.js";
import { BootstrapError, ConfigurationError } from "../errors/errors.js";
import { pythonRuntimeDirectory } from "../protocol/python-runtime.js";
import { acceleratorFormFactor, canonicalAcceleratorName } from "../spec/accelerators.js";
import type { Image } from "../spec/image.js";
import { processAlive } from "./process-alive.js";
import { type PythonEnvironment, preparePythonEnvironment } from "./python-environment.js";
import { killGroup, type RunningWorker, stopWorker } from "./worker-processes.js";

const ROOT_PREFIX = "skyward-pool-";

/**
 * Removes the pool roots under `parent` that a client killed before its teardown left behind: those
 * of this user whose recorded owner process is gone. They may hold `env.sh` with the image's
 * secrets. Best effort: anything unreadable is left alone.
 */
async function removeAbandonedRoots(parent: string): Promise<void> {
  const uid = process.getuid?.();
  const names = await readdir(parent).catch(() => [] as string[]);
  await Promise.all(
    names
      .filter((name) => name.startsWith(ROOT_PREFIX))
      .map(async (name) => {
        const root = join(parent, name);
        try {
          if (uid !== undefined && (await stat(root)).uid !== uid) return;
          const pid = Number.parseInt(await readFile(join(root, "owner.pid"), "utf8"), 10);
          if (!Number.isSafeInteger(pid) || pid <= 0 || processAlive(pid)) return;
          // A detached pool's workers outlive its client: the root is theirs while one runs.
          const detached = await readFile(join(root, "detached.pids"), "utf8").catch(() => "");
          const workerPids = detached
            .split(/\s+/)
            .map(Number)
            .filter((n) => Number.isSafeInteger(n) && n > 0);
          if (workerPids.some(processAlive)) return;
          await rm(root, { recursive: true, force: true });
        } catch {
          // No owner file (being created, or not ours) or already gone: leave it.
        }
      }),
  );
}

/** Settings of the `Local` provider. */
export interface LocalSettings {
  /** Parent directory of each pool's work directory. Default: the system's temporary directory. */
  workRoot?: string;
  /**
   * What a node on this machine costs, USD per hour, for `pool.cost()` and `options.budget`. Default
   * 0: this machine is free, so a budget is never reached. Give one to account for a machine you
   * rent, or to try a budget out locally.
   */
  hourlyPrice?: number;
}

/** What the `Local` provider keeps per cluster. */
export interface LocalCluster {
  /**
   * The pool's Skyward root on this machine, shared by its nodes: `$SKYWARD_ROOT` of the plugins'
   * bootstrap ops, with `env.sh` (0600) and `bootstrap.log`; removed at teardown, or by the next
   * Local pool's `prepare` when the client that made it was killed (its `owner.pid` is gone).
   */
  readonly root: string;
  /** The pool's work directory (`ROOT/work`): `includes` land here, and it is the workers' working directory. */
  readonly workdir: string;
}

/** A cluster's environment on this machine: its Python, and the `env.sh` its workers source, if any. */
interface LocalEnvironment {
  readonly python: PythonEnvironment;
  readonly envFile: string | undefined;
}

const WORKER_READY = "SKYWARD_WORKER_READY ";
const liveWorkers = new Set<RunningWorker>();
/** Every Local provider's running workers by instance id, with their cluster's root: for {@link detachLocalWorkers}. */
const workersByInstance = new Map<string, { worker: RunningWorker; root: string }>();

/**
 * Lets the workers of these instances outlive this process (a detached pool): they are no longer
 * killed when it exits, their pipes are let go of (they were released with `keep`, so their stdin
 * closing does not stop them), and their cluster's root is marked as theirs (`detached.pids`) so
 * that no other Local pool removes it as abandoned. Their TTL stops them if nobody comes back.
 */
export function detachLocalWorkers(instanceIds: readonly string[]): void {
  const byRoot = new Map<string, number[]>();
  for (const id of instanceIds) {
    const entry = workersByInstance.get(id);
    if (!entry) continue;
    workersByInstance.delete(id);
    const { worker, root } = entry;
    liveWorkers.delete(worker);
    worker.exited = true; // for this process: it no longer answers for it
    worker.detached = true;
    worker.child.removeAllListeners("exit");
    for (const stream of [worker.child.stdin, worker.child.stdout, worker.child.stderr]) stream?.destroy();
    worker.child.unref();
    if (worker.child.pid !== undefined) byRoot.set(root, [...(byRoot.get(root) ?? []), worker.child.pid]);
  }
  for (const [root, pids] of byRoot) {
    writeFileSync(join(root, "detached.pids"), `${pids.join("\n")}\n`, { mode: 0o600 });
  }
}
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  // Last resort when the process exits without disposing its pools: no worker outlives it. (Workers
  // also stop when their stdin closes, which covers a SIGKILL of this process.)
  process.once("exit", () => {
    for (const worker of liveWorkers) killGroup(worker, "SIGKILL");
  });
}

/** This machine's NVIDIA GPUs, as the local offer describes them. */
type LocalGpus = NonNullable<Offer["accelerator"]>;

/**
 * This machine's NVIDIA GPUs, from `nvidia-smi --query-gpu=name,memory.total` (one line per GPU,
 * memory in MiB): the first GPU's model and memory, and how many there are; null without nvidia-smi
 * (or when it fails or lists none). A model the catalog does not know keeps nvidia-smi's name.
 */
async function localGpus(): Promise<LocalGpus | null> {
  let stdout: string;
  try {
    ({ stdout } = await execFileAsync(
      "nvidia-smi",
      ["--query-gpu=name,memory.total", "--format=csv,noheader,nounits"],
      { timeout: 30_000 },
    ));
  } catch {
    return null;
  }
  const gpus = stdout
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line !== "")
    .map((line) => {
      const comma = line.lastIndexOf(",");
      return { name: line.slice(0, comma).trim(), memoryMib: Number(line.slice(comma + 1).trim()) };
    });
  const first = gpus[0];
  if (!first) return null;
  // nvidia-smi names some form factors ("NVIDIA H100 PCIe", "NVIDIA A100-SXM4-80GB"), not all
  // ("NVIDIA H100 80GB HBM3" is an SXM board): the form factor is set only when the name says it.
  const formFactor = acceleratorFormFactor(first.name);
  return Object.freeze({
    name: canonicalAcceleratorName(first.name) ?? first.name,
    count: gpus.length,
    memoryGb: Number.isFinite(first.memoryMib) ? Math.round(first.memoryMib / 1024) : 0,
    ...(formFactor === undefined ? {} : { formFactor }),
  });
}

function localOffer(accelerator: LocalGpus | null, hourlyPrice: number): Offer {
  return Object.freeze({
    id: "local",
    provider: "local",
    instanceType: accelerator ? `local (${accelerator.count}x ${accelerator.name})` : "local",
    accelerator,
    vcpus: cpus().length,
    memoryGb: Math.round(totalmem() / 1024 ** 3),
    architecture: process.arch === "arm64" ? "arm64" : "x86_64",
    region: "local",
    spotPrice: null,
    onDemandPrice: hourlyPrice,
    billingUnit: "second",
    pricesAsOf: new Date().toISOString().slice(0, 10),
    specific: Object.freeze({}),
  });
}

/**
 * The free disk, GB (GiB, as the offer's memory), of the filesystem holding `directory` — the pools'
 * work root, created later: its nearest existing ancestor is asked.
 */
async function freeDiskGb(directory: string): Promise<number> {
  for (let current = directory; ; current = dirname(current)) {
    try {
      const info = await statfs(current);
      return Math.floor((info.bavail * info.bsize) / 1024 ** 3);
    } catch (error) {
      if (dirname(current) === current) throw error;
    }
  }
}

const execFileAsync = promisify(execFile);

/**
 * `image.apt` on this machine: the Local provider never installs system packages on the user's own
 * machine, so it checks with dpkg that they are installed (at the version given, for `name=version`)
 * and refuses the ones that are not, and refuses `apt` outright where there is no dpkg to ask.
 *
 * @throws {ConfigurationError} (path `image.apt`) naming the packages that are missing.
 */
async function checkSystemPackages(apt: readonly string[], signal?: AbortSignal): Promise<void> {
  if (apt.length === 0) return;
  const never = "the Local provider never installs system packages on this machine";
  const installed = await Promise.all(
    apt.map(async (entry) => {
      const separator = entry.indexOf("=");
      const name = separator === -1 ? entry : entry.slice(0, separator);
      const version = separator === -1 ? undefined : entry.slice(separator + 1);
      try {
        // biome-ignore lint/suspicious/noTemplateCurlyInString: dpkg-query's own format fields
        const { stdout } = await execFileAsync("dpkg-query", ["-W", "-f=${Status}\t${Version}\n", name], {
          signal,
          timeout: 30_000,
        });
        return stdout.split("\n").some((line) => {
          const [status = "", found] = line.split("\t");
          return status.split(" ")[2] === "installed" && (version === undefined || found === version);
        });
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== "ENOENT") return false;
        throw new ConfigurationError({
          issues: [
            {
              path: "image.apt",
              message: `${never}, and it has no dpkg to check that ${apt.join(", ")} ${apt.length === 1 ? "is" : "are"} installed; install them yourself and remove image.apt, or use a provider that bootstraps its own nodes`,
            },
          ],
        });
      }
    }),
  );
  const missing = apt.filter((_, index) => !installed[index]);
  if (missing.length === 0) return;
  throw new ConfigurationError({
    issues: [
      {
        path: "image.apt",
        message: `${never}, and ${missing.join(", ")} ${missing.length === 1 ? "is" : "are"} not installed; install ${missing.length === 1 ? "it" : "them"} yourself (sudo apt-get install ${missing.join(" ")}) or remove ${missing.length === 1 ? "it" : "them"} from image.apt`,
      },
    ],
  });
}

/**
 * Runs the bootstrap's `env` phase and the plugins' ops once for the cluster (its nodes share this
 * machine), with the bootstrap script's own functions: `SKYWARD_ROOT` the cluster's root, the virtual
 * environment activated, `ROOT/env.sh` (0600) written with the image's env and its `shellVars`
 * evaluated once (the workers source it), in the work directory. Only phase names reach the progress
 * events; the output goes to `ROOT/bootstrap.log`, whose tail a failure carries.
 */
async function runEnvAndPluginOps(
  cluster: Cluster<LocalCluster>,
  image: Image,
  python: PythonEnvironment,
  ops: readonly PluginBootstrapOp[],
  options: LaunchWorkerOptions<LocalCluster>,
): Promise<void> {
  const request = options;
  const { root, workdir } = cluster.specific;
  const script = renderPluginOpsScript({ image, root, venv: python.venvDir, work: workdir, pluginOps: ops });
  const { SKYWARD_TOKEN: _token, ...env } = process.env;
  const child = spawn("bash", ["-s"], {
    cwd: workdir,
    env,
    stdio: ["pipe", "pipe", "ignore"],
    detached: true,
  });
  const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
  let failedPhase: string | undefined;
  lines.on("line", (line) => {
    const marker = parseBootstrapMarker(line);
    if (marker?.kind === "phase" && marker.status === "failed") failedPhase = marker.name;
    if (marker?.kind === "phase" && marker.name === "plugins" && marker.status !== "failed") {
      options.progress?.({
        phase: "plugins",
        status: marker.status === "start" ? "started" : "finished",
        detail: `${ops.length} ops`,
      });
    }
  });
  const kill = () => {
    try {
      if (child.pid !== undefined) process.kill(-child.pid, "SIGKILL");
    } catch {
      // already gone
    }
  };
  const timeoutSeconds = request.timeoutSeconds;
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    kill();
  }, timeoutSeconds * 1000);
  options.signal.addEventListener("abort", kill, { once: true });
  child.stdin?.end(script);
  const code = await new Promise<number | null>((resolve, reject) => {
    child.once("error", reject);
    child.once("exit", (exitCode) => resolve(exitCode));
  }).finally(() => {
    clearTimeout(timer);
    options.signal.removeEventListener("abort", kill);
    lines.close();
  });
  if (options.signal.aborted) throw options.signal.reason;
  if (code === 0) return;
  const logTail = (await readFile(join(root, "bootstrap.log"), "utf8").catch(() => ""))
    .split("\n")
    .filter((line) => !line.startsWith("::skyward::"))
    .slice(-41)
    .join("\n")
    .trim();
  if (timedOut) {
    throw new BootstrapError({
      node: request.nodeId,
      phase: failedPhase ?? (ops.length > 0 ? "plugins" : "env"),
      logTail,
      message: `The image's shellVars and the plugins' bootstrap ops on this machine (Local) did not finish within ${timeoutSeconds} s`,
    });
  }
  if (failedPhase === "env") {
    const snippet = /^shellVars\.(\S+) failed \(exit (\d+)\)$/m.exec(logTail);
    throw new BootstrapError({
      node: request.nodeId,
      phase: "env",
      logTail,
      message: snippet
        ? `Evaluating image.shellVars.${snippet[1]} on this machine (Local) failed (exit ${snippet[2]})`
        : `Writing the image's environment (env.sh) on this machine (Local) failed, exit code ${code}`,
    });
  }
  const failed = describeBootstrapFailure(logTail);
  throw new BootstrapError({
    node: request.nodeId,
    phase: "plugins",
    logTail,
    message: `The plugins' bootstrap ops failed on this machine (Local), exit code ${code}${failed ? `: ${failed}` : ""}`,
  });
}

/**
 * The built-in provider that runs every node as a worker process on this machine:
 * `sky.compute({ provider: sky.Local(), nodes: 4 })`. Used when a spec names no provider.
 */
export function Local(settings: LocalSettings = {}): ProviderV1<LocalCluster> {
  const hourlyPrice = settings.hourlyPrice ?? 0;
  if (typeof hourlyPrice !== "number" || !Number.isFinite(hourlyPrice) || hourlyPrice < 0) {
    throw new ConfigurationError({
      issues: [
        {
          path: "Local.hourlyPrice",
          message: `expected a price in USD per hour, >= 0, received ${JSON.stringify(hourlyPrice) ?? String(hourlyPrice)}`,
        },
      ],
    });
  }
  const workers = new Map<string, RunningWorker>();
  // Instances provisioned and not yet terminated: getInstance knows these and no others.
  const provisioned = new Set<string>();
  // Set up once per cluster (all its nodes share this machine): apt checked, includes copied, Python
  // ready, env.sh written when the image has shellVars or plugins have ops.
  const environments = new Map<string, Promise<LocalEnvironment>>();

  const setUp = (options: LaunchWorkerOptions<LocalCluster>): Promise<LocalEnvironment> => {
    const { cluster, image } = options;
    let environment = environments.get(cluster.id);
    if (!environment) {
      environment = (async () => {
        await checkSystemPackages(image.apt, options.signal);
        options.progress?.({ phase: "includes", status: "started", detail: image.includes.join(" ") });
        const files = await collectIncludedFiles(image.includes, image.excludes);
        for (const file of files) {
          const target = join(cluster.specific.workdir, file.target);
          await mkdir(dirname(target), { recursive: true });
          await copyFile(file.source, target);
        }
        options.progress?.({ phase: "includes", status: "finished", detail: `${files.length} files` });
        const python = await preparePythonEnvironment(image, {
          signal: options.signal,
          progress: (phase, status, detail) =>
            options.progress?.({ phase, status, ...(detail !== undefined ? { detail } : {}) }),
        });
        const ops = options.pluginOps ?? [];
        if (ops.length === 0 && Object.keys(image.shellVars).length === 0)
          return { python, envFile: undefined };
        await runEnvAndPluginOps(cluster, image, python, ops, options);
        return { python, envFile: join(cluster.specific.root, "env.sh") };
      })();
      environments.set(cluster.id, environment);
      environment.catch(() => environments.delete(cluster.id));
    }
    return environment;
  };

  const provider: ProviderV1<LocalCluster> = {
    specificationVersion: "v1",
    name: "local",
    capabilities: Object.freeze({ spot: false }),

    async offers({ query }): Promise<readonly Offer[]> {
      const offer = Object.freeze({
        ...localOffer(await localGpus(), hourlyPrice),
        // The free disk where the pools' roots go (workRoot, else the temporary directory).
        diskGb: await freeDiskGb(settings.workRoot ?? tmpdir()),
      });
      // This machine's GPUs (nvidia-smi), when a spec asks for some: the same model, enough of them.
      if (query.accelerator) {
        const gpus = offer.accelerator;
        if (!gpus || gpus.name !== query.accelerator.name || gpus.count < query.accelerator.count) return [];
        if (query.accelerator.memoryGb !== undefined && gpus.memoryGb < query.accelerator.memoryGb) return [];
        if (offerFormFactorFit(offer, query) === "differs") return [];
      }
      if (query.architecture && query.architecture !== offer.architecture) return [];
      if (query.allocation === "spot") return [];
      if (query.vcpus !== undefined && query.vcpus > offer.vcpus) return [];
      if (query.memoryGb !== undefined && query.memoryGb > offer.memoryGb) return [];
      if (query.diskGb !== undefined && query.diskGb > offer.diskGb) return [];
      // This machine is region "local": a spec naming another region is not for it.
      if (query.region !== undefined && query.region !== offer.region) return [];
      return [offer];
    },

    async prepare({ spec, offer, poolId }): Promise<Cluster<LocalCluster>> {
      if (spec.volumes.length > 0) {
        // Mounting buckets here would mount them on the user's own machine, as root: not done.
        throw new ConfigurationError({
          issues: spec.volumes.map((volume, index) => ({
            path: `volumes[${index}]`,
            message: `the Local provider does not mount volumes (${volume.bucket} on ${volume.mount}): use a remote provider (SSH, AWS, …), or read the bucket with @skyward/storage`,
          })),
        });
      }
      const parent = settings.workRoot ?? tmpdir();
      await mkdir(parent, { recursive: true });
      await removeAbandonedRoots(parent);
      const root = await mkdtemp(join(parent, ROOT_PREFIX));
      await writeFile(join(root, "owner.pid"), `${process.pid}\n`, { mode: 0o600 });
      const workdir = join(root, "work");
      await mkdir(workdir);
      return Object.freeze({
        id: `local-${randomUUID().slice(0, 8)}`,
        provider: "local",
        poolId: poolId ?? "",
        region: "local",
        spec,
        offer,
        ssh: null,
        specific: Object.freeze({ root, workdir }),
      });
    },

    async provision({ cluster, count }): Promise<readonly Instance[]> {
      const now = Date.now();
      return Array.from({ length: count }, () => {
        const id = `${cluster.id}-${randomUUID().slice(0, 8)}`;
        provisioned.add(id);
        return Object.freeze({
          id,
          status: "running" as const,
          publicIp: null,
          privateIp: "127.0.0.1",
          ssh: null,
          spot: false,
          hourlyPrice,
          offerId: cluster.offer.id,
          createdAt: now,
          tags: Object.freeze({ "skyward:cluster": cluster.id }),
        });
      });
    },

    async getInstance({ cluster, id }): Promise<Instance | null> {
      const worker = workers.get(id);
      if (!provisioned.has(id) || worker?.exited) return null;
      return Object.freeze({
        id,
        status: "running",
        publicIp: null,
        privateIp: "127.0.0.1",
        ssh: null,
        spot: false,
        hourlyPrice,
        offerId: cluster.offer.id,
        createdAt: Date.now(),
        tags: Object.freeze({ "skyward:cluster": cluster.id }),
      });
    },

    async launchWorker(options): Promise<WorkerEndpoint> {
      const { cluster, instance } = options;
      const request = options;
      installExitHook();
      const { python, envFile } = await setUp(options);
      const runtime = pythonRuntimeDirectory();
      const launch = request.command({
        pythonBin: python.pythonBin,
        venvDir: python.venvDir,
        workerScript: join(runtime, "skyward_worker.py"),
        privateIp: "127.0.0.1",
        root: cluster.specific.root,
      });
      // The worker's stdin is a pipe from this process: it ends when the client dies, however it dies.
      const command = launch.with({ args: [...launch.args, "--exit-on-stdin-eof"] });
      const pythonPath = [runtime, process.env.PYTHONPATH].filter(Boolean).join(":");
      // As over SSH, the worker starts with env.sh sourced: the image's env and evaluated shellVars.
      const source = envFile === undefined ? "" : `. ${shellQuote(envFile)} && `;
      const child = spawn("/bin/sh", ["-c", `${source}exec ${command.render()}`], {
        cwd: cluster.specific.workdir,
        env: {
          ...process.env,
          ...request.env,
          SKYWARD_TOKEN: request.token,
          PYTHONPATH: pythonPath,
          PYTHONUNBUFFERED: "1",
        },
        stdio: ["pipe", "pipe", "pipe"],
        detached: true,
      });
      const worker: RunningWorker = { child, exited: false };
      workers.set(instance.id, worker);
      liveWorkers.add(worker);
      workersByInstance.set(instance.id, { worker, root: cluster.specific.root });
      const stderrTail: string[] = [];
      const stderr = createInterface({ input: child.stderr as NodeJS.ReadableStream });
      stderr.on("line", (line) => {
        stderrTail.push(line);
        if (stderrTail.length > 60) stderrTail.shift();
        request.onOutput?.("stderr", line);
      });
      return new Promise<WorkerEndpoint>((resolvePromise, reject) => {
        let settled = false;
        const fail = (message: string, cause?: unknown) => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          options.signal.removeEventListener("abort", onAbort);
          killGroup(worker, "SIGKILL");
          reject(
            new BootstrapError({
              node: request.nodeId,
              phase: "worker",
              logTail: stderrTail.join("\n"),
              message,
              cause,
            }),
          );
        };
        const timer = setTimeout(
          () => fail(`The worker of node ${request.nodeId} did not start within ${request.timeoutSeconds} s`),
          request.timeoutSeconds * 1000,
        );
        const onAbort = () =>
          fail(`Starting the worker of node ${request.nodeId} was aborted`, options.signal.reason);
        options.signal.addEventListener("abort", onAbort, { once: true });
        child.once("error", (error) =>
          fail(`Could not start the worker of node ${request.nodeId}: ${error.message}`, error),
        );
        child.once("exit", (code, signal) => {
          worker.exited = true;
          liveWorkers.delete(worker);
          workersByInstance.delete(instance.id);
          if (!settled) {
            // Let the last stderr lines arrive before reporting them.
            setTimeout(
              () =>
                fail(
                  `The worker of node ${request.nodeId} exited (${signal ?? `code ${code}`}) before it was ready`,
                ),
              50,
            );
          } else request.onExit?.(code, signal);
        });
        const stdout = createInterface({ input: child.stdout as NodeJS.ReadableStream });
        stdout.on("line", (line) => {
          if (!settled && line.startsWith(WORKER_READY)) {
            try {
              const ready = JSON.parse(line.slice(WORKER_READY.length)) as { port: number; pid: number };
              settled = true;
              clearTimeout(timer);
              options.signal.removeEventListener("abort", onAbort);
              resolvePromise({ host: "127.0.0.1", port: ready.port, pid: ready.pid });
            } catch (error) {
              fail(
                `The worker of node ${request.nodeId} announced itself in an unexpected form: ${line}`,
                error,
              );
            }
            return;
          }
          request.onOutput?.("stdout", line);
        });
      });
    },

    async terminate({ ids, signal }): Promise<void> {
      await Promise.all(
        ids.map(async (id) => {
          provisioned.delete(id);
          const worker = workers.get(id);
          if (!worker) return;
          workers.delete(id);
          // A worker that exited by itself (killed, crashed) may leave its tasks' processes in its
          // group: they are stopped too. A detached one's are not this pool's to stop.
          if (worker.detached) return;
          await stopWorker(worker, signal);
        }),
      );
    },

    async teardown({ cluster }): Promise<void> {
      const mine = [...new Set([...workers.keys(), ...provisioned])].filter((id) =>
        id.startsWith(`${cluster.id}-`),
      );
      await provider.terminate({ cluster, ids: mine, signal: AbortSignal.timeout(10_000) });
      environments.delete(cluster.id);
      await rm(cluster.specific.root, { recursive: true, force: true });
    },

    selfDestruct(): string {
      // A local worker simply exits when its TTL runs out; there is no machine to shut down.
      return "";
    },
  };
  return provider;
}
