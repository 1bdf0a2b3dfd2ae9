/**
 * Starting a worker on a node reached over SSH: connect (host key checked), upload the Python
 * runtime and the image's `includes` in one tar stream, run the bootstrap script (streaming its
 * phases), start the worker detached from the SSH session, and reach it through a tunnel to the
 * node's loopback.
 */
import { createHash } from "node:crypto";
import { readdir, readFile, stat } from "node:fs/promises";
import { join, relative, sep } from "node:path";
import type { Image } from "@skyward/core";
import {
  BootstrapError,
  ConnectionError,
  collectIncludedFiles,
  contentHash,
  describeBootstrapFailure,
  type GetInstanceOptions,
  type Instance,
  type LaunchWorkerOptions,
  parseBootstrapMarker,
  pythonRuntimeDirectory,
  type ReconnectWorkerOptions,
  shellQuote,
  version,
  type WorkerEndpoint,
} from "@skyward/core/contract";
import { renderBootstrapScript } from "./bootstrap-script.js";
import {
  DEFAULT_NODE_ROOT,
  IN_USE_MARKER,
  processRunsTest,
  stopWorkerCommand,
  workerHoldsTokenTest,
  workerServesPoolCommand,
} from "./node-root.js";
import { SshConnection } from "./transport.js";
import {
  renderVolumesScript,
  resolveVolumeMounts,
  unmountVolumesCommand,
  volumePasswdFiles,
} from "./volumes.js";

/** Where the runtime is unpacked before it replaces `ROOT/runtime` (when its hash differs from the node's). */
const RUNTIME_UPLOAD = ".runtime-upload";
/** The file under the runtime directory that holds its content hash. */
const RUNTIME_HASH_FILE = ".skyward-runtime-hash";

/**
 * The Python runtime's files (read once: they are hashed, fingerprinted and sent), under `runtime/`:
 * what every node needs to run a worker, whichever way it is reached: what a launcher that does not go
 * through {@link launchSshWorker} (the Slurm and Kubernetes providers') uploads itself.
 */
export async function runtimeFiles(): Promise<{ content: Buffer; target: string; mode: number }[]> {
  const root = pythonRuntimeDirectory();
  const files: { content: Buffer; target: string; mode: number }[] = [];
  const walk = async (directory: string): Promise<void> => {
    const entries = await readdir(directory, { withFileTypes: true });
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const entry of entries) {
      const full = join(directory, entry.name);
      if (entry.name === "__pycache__" || entry.name === "tests") continue;
      if (entry.isDirectory()) await walk(full);
      else if (entry.isFile() && entry.name.endsWith(".py")) {
        files.push({
          content: await readFile(full),
          target: `runtime/${relative(root, full).split(sep).join("/")}`,
          mode: (await stat(full)).mode & 0o777,
        });
      }
    }
  };
  await walk(join(root, "skyward"));
  files.push({
    content: await readFile(join(root, "skyward_worker.py")),
    target: "runtime/skyward_worker.py",
    mode: 0o644,
  });
  return files;
}

/** The runtime's content hash: a node that has this runtime keeps it (and the bytecode its Python cached). */
function runtimeHash(files: readonly { content: Buffer; target: string; mode: number }[]): string {
  const hash = createHash("sha256");
  for (const file of files)
    hash.update(`${file.target}\0${file.mode}\0${file.content.length}\0`).update(file.content);
  return hash.digest("hex").slice(0, 24);
}

const READY_PREFIX = "SKYWARD_WORKER_READY ";
/** Printed once the files are unpacked (the bootstrap's markers follow). */
const UPLOAD_MARKER = "::skyward-upload:: done";
/** Printed instead, before the record and token of a released worker the launch can reattach to. */
const REATTACH_MARKER = "::skyward-reattach::";
/** The lines the volume phase prints after the bootstrap: `<marker> start|done|failed`. */
const VOLUMES_MARKER = "::skyward-volumes::";

/**
 * How to reach an instance's SSH address. Cloud machines' host keys are recorded by instance, not
 * by address (addresses go to new machines with new keys).
 */
function connectionTarget(
  target: NonNullable<Instance["ssh"]>,
  provider: string,
  instanceId: string,
): Parameters<typeof SshConnection.connect>[0] {
  return {
    host: target.host,
    port: target.port,
    user: target.user,
    ...(target.privateKey !== undefined ? { privateKey: target.privateKey } : {}),
    ...(target.identityFile !== undefined ? { identityFile: target.identityFile } : {}),
    ...(target.hostKeyFingerprint !== undefined ? { hostKeyFingerprint: target.hostKeyFingerprint } : {}),
    ...(target.hostKeyScope === "address" ? {} : { hostKeyAlias: `${provider}:${instanceId}` }),
  };
}

/**
 * How long a refused SSH port is retried on a machine that keeps its address (your own host, a
 * login node: `hostKeyScope: "address"`), in seconds: such a machine is up, not booting, and an sshd
 * being restarted is back within seconds; a cloud node's sshd starts late in its boot, so it is
 * retried for the whole `sshTimeout`.
 */
const STANDING_HOST_REFUSED_RETRY_SECONDS = 10;

/** How long refused connections are retried: {@link STANDING_HOST_REFUSED_RETRY_SECONDS} for a machine that keeps its address. */
function refusedRetry(target: { hostKeyScope?: string }): { refusedRetrySeconds?: number } {
  return target.hostKeyScope === "address"
    ? { refusedRetrySeconds: STANDING_HOST_REFUSED_RETRY_SECONDS }
    : {};
}

/** The bootstrap script's line that sets its time limit (`SKYWARD_TIMEOUT=…`, bootstrap-script.ts). */
const BOOTSTRAP_TIMEOUT_LINE = /^SKYWARD_TIMEOUT=.*$/m;

/** What a running worker was started from; a later pool reattaches to it only when this is equal. */
async function launchFingerprint(
  files: readonly { source?: string; content?: string | Buffer; target: string }[],
  image: Image,
  command: string,
): Promise<string> {
  const hash = createHash("sha256");
  hash.update(`${version}\0${contentHash(image, version)}\0${command}\0`);
  for (const file of files) {
    hash.update(`${file.target}\0`);
    const content = file.content ?? (await readFile(file.source as string));
    // How long the bootstrap may take is not what the worker runs: a pool with another
    // bootstrapTimeout reuses it.
    hash.update(
      file.target === "bootstrap.sh" ? String(content).replace(BOOTSTRAP_TIMEOUT_LINE, "") : content,
    );
    hash.update("\0");
  }
  return hash.digest("hex").slice(0, 24);
}

/** The worker a previous pool left on the node (released, waiting out its TTL), as it recorded itself. */
interface RecordedWorker {
  readonly pid: number;
  readonly port: number;
  readonly fingerprint: string;
}

/**
 * Connects to the node, bootstraps it and starts its worker (see the module comment): the
 * `launchWorker` of every provider whose nodes are reached over SSH. The returned endpoint opens
 * tunnels over the SSH connection it keeps, until the pool closes it.
 *
 * ```ts
 * import type { ProviderV1 } from "@skyward/core/contract";
 * import { launchSshWorker } from "@skyward/ssh";
 *
 * declare const rest: Omit<ProviderV1, "launchWorker">;
 * const provider: ProviderV1 = { ...rest, launchWorker: launchSshWorker };
 * ```
 */
export async function launchSshWorker(options: LaunchWorkerOptions): Promise<WorkerEndpoint> {
  const { instance, nodeId: node, signal } = options;
  const request = options;
  const report = (phase: string, status: "started" | "finished" | "failed", durationMs?: number) =>
    options.progress?.({ phase, status, ...(durationMs !== undefined ? { durationMs } : {}) });
  const target = instance.ssh;
  if (!target)
    throw new ConnectionError({
      host: instance.id,
      node,
      message: `Instance ${instance.id} has no SSH address yet`,
    });
  const root = (target.root ?? DEFAULT_NODE_ROOT).replace(/\/+$/, "");
  const where = `${target.user}@${target.host}:${target.port}`;
  const q = (path: string) => shellQuote(`${root}/${path}`);
  // Read while the connection is made (awaited after it: a failed connect is reported first).
  const runtimeRead = runtimeFiles();
  const includesRead = collectIncludedFiles(request.image.includes, request.image.excludes);
  for (const reading of [runtimeRead, includesRead]) reading.catch(() => undefined);
  const ssh = await SshConnection.connect(connectionTarget(target, options.cluster.provider, instance.id), {
    signal,
    node,
    timeoutSeconds: options.connectTimeoutSeconds,
    retryIntervalSeconds: options.connectRetryIntervalSeconds,
    ...refusedRetry(target),
  });
  try {
    const sudo = target.user !== "root";
    const command = request
      .command({
        pythonBin: `${root}/venv/bin/python`,
        venvDir: `${root}/venv`,
        workerScript: `${root}/runtime/skyward_worker.py`,
        privateIp: instance.privateIp ?? target.host,
        root,
      })
      .render();
    const script = renderBootstrapScript({
      image: request.image,
      root,
      skywardVersion: version,
      pluginOps: request.pluginOps,
      sudo,
      pythonRequirement: request.image.python,
      uploadedRuntime: true,
    });
    const includes = await includesRead;
    // The volume phase: its script (no secrets) is part of what the worker was started from; the
    // keys go in 0600 files uploaded with the token.
    const volumes = await resolveVolumeMounts(options.cluster.spec?.volumes ?? [], {
      provider: options.cluster.provider,
      region: options.cluster.region,
      root,
    });
    const mountPoints = volumes.map((mount) => mount.volume.mount);
    const runtime = await runtimeRead;
    const files = [
      // Unpacked beside the node's runtime, which it replaces only when their hashes differ.
      ...runtime.map((file) => ({
        ...file,
        target: `${RUNTIME_UPLOAD}/${file.target.slice("runtime/".length)}`,
      })),
      { content: `${runtimeHash(runtime)}\n`, target: `${RUNTIME_UPLOAD}/${RUNTIME_HASH_FILE}`, mode: 0o644 },
      ...includes.map((file) => ({ source: file.source, target: `work/${file.target}`, mode: file.mode })),
      { content: script, target: "bootstrap.sh", mode: 0o700 },
      ...(volumes.length > 0
        ? [{ content: renderVolumesScript(volumes, root, sudo), target: "volumes.sh", mode: 0o700 }]
        : []),
    ];
    // The TTL is the pool's own (each pool's release sets it), not part of what the worker runs.
    const fingerprint = await launchFingerprint(files, request.image, command.replace(/ --ttl \S+/, ""));

    // Everything below runs in ONE session, the tar stream of the files on its stdin: each session
    // is a round trip and starts the login shell (slow where a .bashrc runs pyenv or conda init).
    // 1. A released worker of an earlier pool, started from the same code and settings and still
    //    running, is reused: the node prints its record and token and reads the stream to its end.
    //    Not one that serves a pool now (a client connected): the launch is refused below instead.
    //    This pool's own worker (its node back after a partition) is, its old connection or not.
    const json = q("worker.json");
    const ownWorker = workerHoldsTokenTest(root, [request.token, ...(request.ownTokens ?? [])]);
    const reattachCheck = `if [ -f ${json} ] && [ -f ${q("worker.token")} ] && grep -qF ${shellQuote(`"fingerprint":"${fingerprint}"`)} ${json} && ${processRunsTest(`"$(sed -n 's/^{"pid":\\([0-9]*\\),.*/\\1/p' ${json})"`)} && { ${ownWorker} || { ${workerServesPoolCommand(root)} >/dev/null; }; }; then echo ${REATTACH_MARKER}; cat ${json}; echo; cat ${q("worker.token")}; echo; exec cat >/dev/null; fi`;
    // 2. Else the root is prepared (an earlier worker stopped, its files removed) and the files unpacked.
    const prepare = [
      // sudo only where it is needed (as the bootstrap's skyward_prepare_root): a root the user may
      // make and write (under its home, or made for it) needs none, on a host without sudo too.
      sudo
        ? `{ { mkdir -p ${shellQuote(root)} 2>/dev/null && [ -w ${shellQuote(root)} ]; } || { sudo -n mkdir -p ${shellQuote(root)} && sudo -n chown "$(id -u):$(id -g)" ${shellQuote(root)}; }; }`
        : `mkdir -p ${shellQuote(root)}`,
      // A worker serving another pool now is not stopped: this launch is refused instead.
      `{ ${ownWorker} || ${workerServesPoolCommand(root)}; }`,
      ...(volumes.length > 0 ? [`skyward_old="$(cat ${q("worker.pid")} 2>/dev/null || true)"`] : []),
      stopWorkerCommand(root),
      // An earlier worker's shell unmounts its volumes as it exits: wait for it (10 s at most), so
      // that it cannot unmount what this launch mounts at the same paths.
      ...(volumes.length > 0
        ? [
            `for i in $(seq 1 50); do { [ -n "$skyward_old" ] && ${processRunsTest('"$skyward_old"')}; } || break; sleep 0.2; done`,
            unmountVolumesCommand(mountPoints, sudo),
          ]
        : []),
      `rm -rf ${q(RUNTIME_UPLOAD)} ${q("work")} ${json}${volumes.length > 0 ? ` ${q("volumes")}` : ""}`,
      `tar -x -m -C ${shellQuote(root)} -f -`,
      "cat >/dev/null",
    ].join(" && ");
    const upload = `if { ${prepare}; }; then echo ${UPLOAD_MARKER}; else skyward_s=$?; cat >/dev/null; exit "$skyward_s"; fi`;
    // 3. The runtime replaces the node's when it differs (the same one is kept, with its bytecode).
    const installRuntime = `if [ "$(cat ${q(`${RUNTIME_UPLOAD}/${RUNTIME_HASH_FILE}`)})" = "$(cat ${q(`runtime/${RUNTIME_HASH_FILE}`)} 2>/dev/null)" ]; then rm -rf ${q(RUNTIME_UPLOAD)}; else rm -rf ${q("runtime")} && mv ${q(RUNTIME_UPLOAD)} ${q("runtime")}; fi`;
    const uploadFiles = [
      ...files,
      ...volumePasswdFiles(volumes),
      { content: request.token, target: "worker.token", mode: 0o600 },
    ];

    // The worker's start, run in the bootstrap's round trip once the bootstrap succeeded: started
    // detached from this SSH session (so that it outlives the client by its TTL), then waited for
    // (250 polls 20 ms apart, on the node) and, once ready, recorded for a later pool to reattach to.
    const probeCommand = `cat ${q("worker.log")}; echo; echo "::pid $(cat ${q("worker.pid")})"; if ${processRunsTest(`"$(cat ${q("worker.pid")})"`)}; then echo ::alive; else echo ::dead; fi`;
    const waitForReady = `skyward_i=0; while [ "$skyward_i" -lt 250 ] && ! grep -q '^${READY_PREFIX}' ${q("worker.log")} 2>/dev/null && ${processRunsTest(`"$(cat ${q("worker.pid")})"`)}; do sleep 0.02; skyward_i=$((skyward_i + 1)); done`;
    // With volumes, they are mounted first (the `volumes` phase, its output kept for a failure), and a
    // shell waits for the worker and unmounts them when it exits, however it ends.
    const workerShell =
      volumes.length > 0
        ? `trap ${shellQuote(unmountVolumesCommand(mountPoints, sudo))} EXIT; trap "exit 143" TERM INT HUP; ${command}`
        : `exec ${command}`;
    const volumePhase = `{ echo "${VOLUMES_MARKER} start"; if skyward_v=$(bash ${q("volumes.sh")} 2>&1); then echo "${VOLUMES_MARKER} done"; else printf '%s\\n' "$skyward_v"; echo "${VOLUMES_MARKER} failed"; exit 1; fi; }`;
    const startCommand = [
      ...(volumes.length > 0 ? [volumePhase] : []),
      // A warm node whose root a self-destruct cleaned has no work directory when there are no includes.
      `mkdir -p ${q("work")}`,
      `cd ${q("work")}`,
      `. ${q("env.sh")}`,
      `SKYWARD_TOKEN="$(cat ${q("worker.token")})"`,
      // The root's owner is the newest worker (worker.pid): an older one still alive when its TTL
      // runs out (cut off, then resumed) leaves the self-destruct to it, see worker.py.
      `export SKYWARD_TOKEN PYTHONPATH=${q("runtime")} PYTHONUNBUFFERED=1 SKYWARD_ROOT_OWNER=${q("worker.pid")}`,
      `: > ${q("worker.log")}`,
      `(setsid ${volumes.length > 0 ? "bash" : "sh"} -c ${shellQuote(workerShell)} > ${q("worker.log")} 2>&1 < /dev/null & echo $! > ${q("worker.pid")})`,
      `{ ${waitForReady}; }`,
      `{ skyward_port=$(sed -n 's/^${READY_PREFIX}{"port": \\([0-9]*\\),.*/\\1/p' ${q("worker.log")} | head -n 1); if [ -n "$skyward_port" ]; then printf '{"pid":%s,"port":%s,"fingerprint":"%s"}' "$(cat ${q("worker.pid")})" "$skyward_port" ${shellQuote(fingerprint)} > ${q("worker.json")} && echo ::recorded; fi; }`,
      `{ ${probeCommand}; }`,
    ].join(" && ");

    // Bootstrap, streaming its phases, then the worker's start.
    let warm = false;
    let bootstrapped = false;
    let workerStarted = 0;
    let afterBootstrap = "";
    let volumesStarted = 0;
    let pending = "";
    let uploaded = false;
    let uploadStarted = 0;
    const onStdout = (chunk: Buffer | string) => {
      pending += chunk.toString();
      const lines = pending.split("\n");
      pending = lines.pop() ?? "";
      for (const line of lines) {
        if (!uploaded) {
          if (line === UPLOAD_MARKER) {
            uploaded = true;
            report("upload", "finished", performance.now() - uploadStarted);
          }
          continue;
        }
        if (bootstrapped) {
          afterBootstrap += `${line}\n`;
          if (line.startsWith(VOLUMES_MARKER)) {
            const status = line.slice(VOLUMES_MARKER.length + 1).trim();
            if (status === "start") volumesStarted = performance.now();
            report(
              "volumes",
              status === "start" ? "started" : status === "done" ? "finished" : "failed",
              status === "done" ? performance.now() - volumesStarted : undefined,
            );
          }
          continue;
        }
        const marker = parseBootstrapMarker(line);
        if (!marker) continue;
        if (marker.kind === "warm") warm = true;
        else if (marker.kind === "done") {
          bootstrapped = true;
          report("worker", "started");
          workerStarted = performance.now();
        } else {
          report(
            marker.name,
            marker.status === "start" ? "started" : marker.status === "done" ? "finished" : "failed",
            marker.durationMs,
          );
        }
      }
    };
    const logTail = () =>
      ssh.exec(`tail -n 40 ${q("bootstrap.log")}`, { timeoutSeconds: 10 }).then(
        (output) => output.stdout,
        () => "",
      );
    // 4. The bootstrap, streaming its phases, then (5.) the worker's start.
    const run = (allowReattach: boolean) =>
      ssh.execWithFiles(
        `${allowReattach ? `${reattachCheck}; ` : ""}${upload}; ${installRuntime} && bash ${q("bootstrap.sh")} && { ${startCommand}; }`,
        uploadFiles,
        { signal, timeoutSeconds: request.timeoutSeconds + 60, onStdout },
      );
    let result: { code: number | null; stdout: string; stderr: string };
    report("upload", "started");
    uploadStarted = performance.now();
    try {
      result = await run(true);
      const recorded = uploaded ? undefined : reattachable(result.stdout);
      if (recorded) {
        // The files were sent (and drained): the upload is over.
        report("upload", "finished", performance.now() - uploadStarted);
        const endpoint = await reattach(ssh, where, request, recorded);
        if (endpoint) return endpoint;
        // Recorded and running, but its tunnel does not open: a fresh start (the old one is stopped).
        report("upload", "started");
        uploadStarted = performance.now();
        result = await run(false);
      }
    } catch (error) {
      if (signal.aborted) throw error;
      if (!uploaded) {
        throw new ConnectionError({
          host: where,
          node,
          message: `uploading ${uploadFiles.length} files to ${root} on node ${node} (${where}) did not finish: ${(error as Error).message}`,
          cause: error,
        });
      }
      throw new BootstrapError({
        node,
        ...(bootstrapped ? { phase: "worker" } : {}),
        logTail: bootstrapped ? afterBootstrap.trim() : await logTail(),
        message: bootstrapped
          ? `The worker on node ${node} (${where}) did not start in time`
          : `Bootstrap on node ${node} (${where}) did not finish within ${request.timeoutSeconds} s`,
        cause: error,
      });
    }
    const inUse = new RegExp(`^${IN_USE_MARKER} (\\d+) (\\d+)$`, "m").exec(result.stdout);
    if (!uploaded && inUse) {
      throw new ConnectionError({
        host: where,
        node,
        message: `${root} on ${where} is taken: its worker (pid ${inUse[1]}, port ${inUse[2]}) serves another pool, which a connected client still uses; give this pool's hosts another root directory, or close that pool first`,
      });
    }
    if (!uploaded) {
      const stderr = result.stderr.trim() || result.stdout.trim();
      throw new ConnectionError({
        host: where,
        node,
        message:
          `uploading ${uploadFiles.length} files to ${root} on node ${node} (${where}) failed: exit code ${result.code}` +
          `${stderr ? `: ${stderr.slice(-2000)}` : ""}`,
      });
    }
    afterBootstrap += pending;
    if (!bootstrapped) {
      const tail = await logTail();
      const failed = describeBootstrapFailure(tail);
      throw new BootstrapError({
        node,
        ...(failed ? { phase: "plugins" } : {}),
        logTail: tail,
        message: `Bootstrap failed on node ${node} (${where}), exit code ${result.code}${failed ? `: ${failed}` : ""}`,
      });
    }
    if (afterBootstrap.includes(`${VOLUMES_MARKER} failed`)) {
      const tail = afterBootstrap
        .slice(afterBootstrap.indexOf(`${VOLUMES_MARKER} start`))
        .split("\n")
        .filter((line) => line !== "" && !line.startsWith(VOLUMES_MARKER))
        .slice(-20)
        .join("\n");
      throw new BootstrapError({
        node,
        phase: "volumes",
        logTail: tail,
        message: `Mounting the volumes failed on node ${node} (${where}): ${tail.split("\n").at(-1) || `exit code ${result.code}`}`,
      });
    }
    if (result.code !== 0 && !afterBootstrap.includes("::pid ")) {
      throw new BootstrapError({
        node,
        phase: "worker",
        logTail: afterBootstrap.trim().split("\n").slice(-40).join("\n"),
        message: `The worker on node ${node} (${where}) could not be started, exit code ${result.code}`,
      });
    }
    let probe = { stdout: afterBootstrap };
    const deadline = performance.now() + request.timeoutSeconds * 1000;
    let port: number | undefined;
    let pid = 0;
    while (port === undefined) {
      signal.throwIfAborted();
      const ready = probe.stdout.split("\n").find((line) => line.startsWith(READY_PREFIX));
      pid = Number(/::pid (\d+)/.exec(probe.stdout)?.[1] ?? 0);
      if (ready) {
        port = (JSON.parse(ready.slice(READY_PREFIX.length)) as { port: number }).port;
        break;
      }
      const dead = probe.stdout.includes("::dead");
      if (dead || performance.now() > deadline) {
        throw new BootstrapError({
          node,
          phase: "worker",
          logTail: probe.stdout
            .replace(/::pid.*$/s, "")
            .trim()
            .split("\n")
            .slice(-40)
            .join("\n"),
          message: dead
            ? `The worker on node ${node} (${where}) exited before it was ready`
            : `The worker on node ${node} (${where}) did not start within ${request.timeoutSeconds} s`,
        });
      }
      await new Promise((resolve) => setTimeout(resolve, 150));
      probe = await ssh.exec(probeCommand, { signal, timeoutSeconds: 15 });
    }
    const record: RecordedWorker = { pid, port, fingerprint };
    if (!/^::recorded$/m.test(probe.stdout)) {
      await ssh.exec(`printf '%s' ${shellQuote(JSON.stringify(record))} > ${q("worker.json")}`, {
        signal,
        timeoutSeconds: 15,
      });
    }
    report("worker", "finished", performance.now() - workerStarted);

    return tunnelEndpoint(ssh, where, port, pid, { warm });
  } catch (error) {
    ssh.close();
    throw error;
  }
}

/**
 * Reaches again the worker a detached pool left running on a node reached over SSH: connects (host
 * key checked, as at launch), checks that the recorded worker process still runs and that its port
 * answers through a tunnel, and returns its endpoint (tunnels over the SSH connection it keeps, until
 * the pool closes it). Uploads and starts nothing. The instance's `ssh` must carry its credentials
 * (`privateKey` or `identityFile`): a provider fills them in from its settings or key files before
 * calling it, since the pool's state file records none.
 *
 * ```ts
 * import type { ProviderV1 } from "@skyward/core/contract";
 * import { launchSshWorker, reconnectSshWorker } from "@skyward/ssh";
 *
 * declare const rest: Omit<ProviderV1, "launchWorker" | "reconnectWorker">;
 * const provider: ProviderV1 = { ...rest, launchWorker: launchSshWorker, reconnectWorker: reconnectSshWorker };
 * ```
 *
 * @throws {ConnectionError} when the node cannot be reached, or its worker no longer runs.
 */
export async function reconnectSshWorker(options: ReconnectWorkerOptions): Promise<WorkerEndpoint> {
  const { instance, nodeId: node, signal, worker } = options;
  const target = instance.ssh;
  if (!target)
    throw new ConnectionError({
      host: instance.id,
      node,
      message: `Instance ${instance.id} has no SSH address`,
    });
  const where = `${target.user}@${target.host}:${target.port}`;
  const ssh = await SshConnection.connect(connectionTarget(target, options.cluster.provider, instance.id), {
    signal,
    node,
    timeoutSeconds: options.connectTimeoutSeconds,
    retryIntervalSeconds: Math.min(2, options.connectTimeoutSeconds),
    ...refusedRetry(target),
  });
  try {
    const pid = Number(worker.pid);
    const port = Number(worker.port);
    // A worker that exited but is not reaped yet (a zombie) still answers kill -0, yet runs nothing.
    const alive = await ssh.exec(`${processRunsTest(String(pid))} && echo yes`, {
      signal,
      timeoutSeconds: 15,
    });
    if (alive.stdout.trim() !== "yes") {
      throw new ConnectionError({
        host: where,
        node,
        message: `The worker of node ${node} (${where}, pid ${pid}) no longer runs: its TTL ran out or it was stopped`,
      });
    }
    try {
      const probe = await ssh.forwardOut("127.0.0.1", port);
      probe.destroy();
    } catch (error) {
      throw new ConnectionError({
        host: where,
        node,
        message: `The worker of node ${node} (${where}) does not answer on port ${port}: ${(error as Error).message}`,
        cause: error,
      });
    }
    return tunnelEndpoint(ssh, where, port, pid, { warm: true });
  } catch (error) {
    ssh.close();
    throw error;
  }
}

/**
 * `reconnectWorker` for a provider whose `getInstance`, given the recorded cluster, describes the
 * instance with its SSH credentials again (a key file whose path its cluster data records): looks
 * the instance up, then {@link reconnectSshWorker}. Call it from the provider's `reconnectWorker`.
 *
 * ```ts
 * import type { ProviderV1 } from "@skyward/core/contract";
 * import { launchSshWorker, reconnectThroughGetInstance } from "@skyward/ssh";
 *
 * declare const rest: Omit<ProviderV1, "launchWorker" | "reconnectWorker">;
 * const provider: ProviderV1 = {
 *   ...rest,
 *   launchWorker: launchSshWorker,
 *   reconnectWorker(options) {
 *     return reconnectThroughGetInstance(options, (lookup) => this.getInstance(lookup));
 *   },
 * };
 * ```
 *
 * @throws {ConnectionError} when the instance is gone or not running, or its worker no longer runs.
 */
export async function reconnectThroughGetInstance<Specific>(
  options: ReconnectWorkerOptions<Specific>,
  getInstance: (lookup: GetInstanceOptions<Specific>) => Promise<Instance | null>,
): Promise<WorkerEndpoint> {
  const { cluster, instance, nodeId, signal } = options;
  const found = await getInstance({ cluster, id: instance.id, signal });
  if (found?.status !== "running" || !found.ssh) {
    throw new ConnectionError({
      host: instance.id,
      node: nodeId,
      message: `instance ${instance.id} of the detached pool is ${found ? `${found.status}${found.ssh ? "" : " with no SSH address"}` : "gone"}`,
    });
  }
  return reconnectSshWorker({ ...(options as ReconnectWorkerOptions), instance: found });
}

/** The endpoint of a worker listening on the node's loopback, reached through tunnels over `ssh`. */
function tunnelEndpoint(
  ssh: SshConnection,
  where: string,
  port: number,
  pid: number,
  extra: { warm: boolean; token?: string },
): WorkerEndpoint {
  return {
    host: `${where} via ssh`,
    port,
    pid,
    warm: extra.warm,
    ...(extra.token !== undefined ? { token: extra.token } : {}),
    openStream: () => ssh.forwardOut("127.0.0.1", port),
    close: () => ssh.close(),
  };
}

/** The record and token a launch's session printed after {@link REATTACH_MARKER}, if it did. */
function reattachable(stdout: string): { recorded: RecordedWorker; token: string } | undefined {
  const lines = stdout.split("\n");
  const at = lines.indexOf(REATTACH_MARKER);
  if (at === -1) return undefined;
  const [json, token] = [lines[at + 1], lines[at + 2]?.trim()];
  if (!json || !token) return undefined;
  try {
    const recorded = JSON.parse(json) as RecordedWorker;
    return Number.isInteger(recorded.pid) && Number.isInteger(recorded.port)
      ? { recorded, token }
      : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The endpoint of the worker a previous pool left on the node (released, waiting out its TTL), which
 * the node found started from the same code and settings and still running (see `reattachable`),
 * once a tunnel to it opens (the pool's handshake, with the recorded token, then checks the rest);
 * undefined when none opens.
 */
async function reattach(
  ssh: SshConnection,
  where: string,
  request: LaunchWorkerOptions,
  { recorded, token }: { recorded: RecordedWorker; token: string },
): Promise<WorkerEndpoint | undefined> {
  try {
    const probe = await ssh.forwardOut("127.0.0.1", recorded.port, { signal: request.signal });
    probe.destroy();
  } catch {
    return undefined;
  }
  request.progress?.({ phase: "reattach", status: "finished", durationMs: 0 });
  return tunnelEndpoint(ssh, where, recorded.port, recorded.pid, { warm: true, token });
}
