/**
 * Starting a worker in a pod, through the API server alone: the Python runtime, the image's includes,
 * the bootstrap script and the token go in one tar stream on an exec's stdin; the bootstrap (the same
 * script SSH-reached nodes run) runs in a second exec, its phases streamed; the start script written
 * last makes the pod's waiting PID 1 become the worker; the client reaches it through port-forward.
 */
import {
  BootstrapError,
  ConnectionError,
  collectIncludedFiles,
  describeBootstrapFailure,
  type Instance,
  type LaunchWorkerOptions,
  parseBootstrapMarker,
  shellQuote,
  version,
  type WorkerEndpoint,
} from "@skyward/core/contract";
import { renderBootstrapScript, runtimeFiles, tarArchive } from "@skyward/ssh";
import type { KubernetesApi } from "./kubernetes-api.js";
import { execInPod, openPodPort } from "./pod-streams.js";
import { START_SCRIPT } from "./pods.js";

const READY_PREFIX = "SKYWARD_WORKER_READY ";
const UPLOAD_MARKER = "::skyward-upload:: done";

/**
 * The worker's start script, run by the container's PID 1: its environment, then the worker in its
 * place, so that the worker is PID 1 and the kubelet's SIGTERM (a pod deleted, evicted, preempted or
 * past its deadline) reaches it: it takes an unrequested SIGTERM for a preemption, the pool hears
 * `node.preempted` and runs its tasks again on a replacement (a stop the pool asked for came first).
 */
export function renderStartScript(root: string, command: string): string {
  const q = (path: string) => shellQuote(`${root}/${path}`);
  return [
    "set -e",
    `mkdir -p ${q("work")}`,
    `cd ${q("work")}`,
    `. ${q("env.sh")}`,
    `SKYWARD_TOKEN="$(cat ${q("worker.token")})"`,
    `export SKYWARD_TOKEN PYTHONPATH=${q("runtime")} PYTHONUNBUFFERED=1`,
    `echo "$$" > ${q("worker.pid")}`,
    `exec ${command} > ${q("worker.log")} 2>&1`,
    "",
  ].join("\n");
}

/** Starts the worker of one node in its pod (see the module comment) and returns how to reach it. */
export async function launchPodWorker(
  api: KubernetesApi,
  root: string,
  options: LaunchWorkerOptions,
): Promise<WorkerEndpoint> {
  const { instance, nodeId: node, signal } = options;
  const pod = instance.id;
  const where = `pod ${api.namespace}/${pod}`;
  const q = (path: string) => shellQuote(`${root}/${path}`);
  const report = (phase: string, status: "started" | "finished" | "failed", durationMs?: number) =>
    options.progress?.({ phase, status, ...(durationMs !== undefined ? { durationMs } : {}) });

  report("upload", "started");
  const uploadStarted = performance.now();
  const [runtime, includes] = await Promise.all([
    runtimeFiles(),
    collectIncludedFiles(options.image.includes, options.image.excludes),
  ]);
  const script = renderBootstrapScript({
    image: options.image,
    root,
    skywardVersion: version,
    pluginOps: options.pluginOps,
    sudo: false,
    pythonRequirement: options.image.python,
    uploadedRuntime: true,
  });
  const archive = await tarArchive([
    ...runtime,
    ...includes.map((file) => ({ source: file.source, target: `work/${file.target}`, mode: file.mode })),
    { content: script, target: "bootstrap.sh", mode: 0o700 },
    { content: options.token, target: "worker.token", mode: 0o600 },
  ]);
  const upload = await execInPod(
    api,
    pod,
    `mkdir -p ${shellQuote(root)} && tar -x -m -o -C ${shellQuote(root)} -f - && echo ${shellQuote(UPLOAD_MARKER)}`,
    { stdin: archive, signal, timeoutSeconds: options.connectTimeoutSeconds + 120 },
  ).catch((error: unknown) => {
    throw new ConnectionError({
      host: where,
      node,
      message: `uploading the runtime to ${where} failed: ${(error as Error).message}`,
      cause: error,
    });
  });
  if (!upload.stdout.includes(UPLOAD_MARKER)) {
    throw new ConnectionError({
      host: where,
      node,
      message: `uploading the runtime to ${where} failed (exit code ${upload.code}): ${(upload.stderr || upload.stdout).trim().slice(-2000)}`,
    });
  }
  report("upload", "finished", performance.now() - uploadStarted);

  // The bootstrap, its phases reported as its markers come.
  let pending = "";
  let bootstrapped = false;
  const bootstrap = await execInPod(api, pod, `bash ${q("bootstrap.sh")}`, {
    signal,
    timeoutSeconds: options.timeoutSeconds,
    onStdout: (chunk) => {
      pending += chunk;
      const lines = pending.split("\n");
      pending = lines.pop() ?? "";
      for (const line of lines) {
        const marker = parseBootstrapMarker(line);
        if (!marker || marker.kind === "warm") continue;
        if (marker.kind === "done") bootstrapped = true;
        else
          report(
            marker.name,
            marker.status === "start" ? "started" : marker.status === "done" ? "finished" : "failed",
            marker.durationMs,
          );
      }
    },
  }).catch(async (error: unknown) => {
    if (signal.aborted) throw error;
    throw new BootstrapError({
      node,
      logTail: await logTail(api, pod, q("bootstrap.log")),
      message: `Bootstrap in ${where} did not finish within ${options.timeoutSeconds} s`,
      cause: error,
    });
  });
  if (!bootstrapped || bootstrap.code !== 0) {
    const tail = await logTail(api, pod, q("bootstrap.log"));
    const failed = describeBootstrapFailure(tail);
    throw new BootstrapError({
      node,
      ...(failed ? { phase: "plugins" } : {}),
      logTail: tail,
      message: `Bootstrap failed in ${where}, exit code ${bootstrap.code}${failed ? `: ${failed}` : ""}`,
    });
  }

  // The start script, written whole then renamed: the pod's PID 1 runs it the moment it appears.
  report("worker", "started");
  const workerStarted = performance.now();
  const command = options
    .command({
      pythonBin: `${root}/venv/bin/python`,
      venvDir: `${root}/venv`,
      workerScript: `${root}/runtime/skyward_worker.py`,
      privateIp: instance.privateIp ?? "127.0.0.1",
      root,
    })
    .render();
  const polls = Math.max(1, Math.ceil(options.timeoutSeconds / 0.1));
  const start = await execInPod(
    api,
    pod,
    [
      `printf '%s' ${shellQuote(renderStartScript(root, command))} > ${q(`${START_SCRIPT}.new`)}`,
      `mv ${q(`${START_SCRIPT}.new`)} ${q(START_SCRIPT)}`,
      `i=0; while [ "$i" -lt ${polls} ] && ! grep -q '^${READY_PREFIX}' ${q("worker.log")} 2>/dev/null; do sleep 0.1; i=$((i + 1)); done`,
      `cat ${q("worker.log")}`,
      `echo "::pid $(cat ${q("worker.pid")})"`,
    ].join(" && "),
    { signal, timeoutSeconds: options.timeoutSeconds + 30 },
  ).catch((error: unknown) => ({ code: null, stdout: "", stderr: (error as Error).message }));
  const ready = start.stdout.split("\n").find((line) => line.startsWith(READY_PREFIX));
  if (!ready) {
    throw new BootstrapError({
      node,
      phase: "worker",
      logTail: `${start.stdout}\n${start.stderr}`.trim().split("\n").slice(-40).join("\n"),
      message: `The worker in ${where} did not start within ${options.timeoutSeconds} s`,
    });
  }
  const port = (JSON.parse(ready.slice(READY_PREFIX.length)) as { port: number }).port;
  const pid = Number(/::pid (\d+)/.exec(start.stdout)?.[1] ?? 0);
  report("worker", "finished", performance.now() - workerStarted);
  return podEndpoint(api, instance, port, pid, node);
}

/** The endpoint of the worker listening on `port` of the pod's loopback. */
export function podEndpoint(
  api: KubernetesApi,
  instance: Instance,
  port: number,
  pid: number,
  node: number,
): WorkerEndpoint {
  return {
    host: `pod ${api.namespace}/${instance.id} via port-forward`,
    port,
    pid,
    openStream: () => openPodPort(api, instance.id, port, node),
  };
}

async function logTail(api: KubernetesApi, pod: string, file: string): Promise<string> {
  const result = await execInPod(api, pod, `tail -n 40 ${file}`, { timeoutSeconds: 15 }).catch(
    () => undefined,
  );
  return result?.stdout ?? "";
}
