/**
 * Starting one node: the worker's command (its arguments, through the plugins' launchers), the
 * provider's launch, the connection, the cluster message and the first health check; then the node
 * is handed to the task manager and watched.
 */
import { posix } from "node:path";
import { failOver, tellNodeLost } from "../collections/fail-over.js";
import { tellAuthority } from "../collections/remote.js";
import { LaunchCommand, type LaunchContext } from "../contract/launch-command.js";
import { applyLaunchers, collectPluginBootstrapOps } from "../contract/plugin.js";
import type { Provider, WorkerEnvironment } from "../contract/provider.js";
import { BootstrapError, CancelledError } from "../errors/errors.js";
import type { SkywardEvent } from "../observe/events.js";
import { relayMetrics } from "../observe/metric-stream.js";
import type { ClusterMessage, ReadyMessage, WorkerEvent } from "../protocol/protocol.js";
import type { Image } from "../spec/image.js";
import { membershipKey, nodeClusterMessage, retellCluster } from "./cluster-retell.js";
import { firstHealthy, monitorHealth } from "./health-check.js";
import {
  abortError,
  executorOf,
  isClosing,
  type NodeRuntime,
  type PoolContext,
  placement,
  slotsPerNode,
} from "./pool-context.js";
import { WorkerConnection } from "./worker-connection.js";

/** What the pool does when a started node's worker signals trouble. */
export interface NodeWatchers {
  /** The cloud announced it reclaims the node's instance. */
  interrupted(node: NodeRuntime, connection: WorkerConnection, notice: WorkerEvent): void;
  /**
   * The connection to the node's worker was lost; `silent`: it stopped answering (it may still run,
   * and the pool ends it), rather than the connection ending (the worker, or the link, is gone).
   */
  lost(node: NodeRuntime, connection: WorkerConnection, reason: string, silent?: boolean): void;
  /** The node is lost while its connection may still look open (failed health checks). */
  unhealthy(node: NodeRuntime, reason: string): void;
}

/** What the worker's arguments are made from. */
export interface WorkerArgumentsInput {
  readonly node: number;
  readonly concurrency: number;
  readonly executor: "thread" | "process";
  readonly worker: { readonly buffer: number | "auto"; readonly reuseProcesses: boolean };
  readonly ttl: number;
  /** The provider's self-destruct command ("" for none). */
  readonly selfDestruct: string;
  /** Where the worker polls for an interruption notice, when the provider has one. */
  readonly notice: ReturnType<NonNullable<Provider["interruptionNotice"]>> | undefined;
}

/** The worker process's command-line arguments. */
export function workerArguments(input: WorkerArgumentsInput): string[] {
  const { worker } = input;
  const args = [
    "--node",
    String(input.node),
    "--host",
    "127.0.0.1",
    "--port",
    "0",
    "--concurrency",
    String(input.concurrency),
    "--buffer",
    String(worker.buffer === "auto" ? 0 : worker.buffer),
    "--executor",
    input.executor,
    "--ttl",
    String(input.ttl),
  ];
  if (!worker.reuseProcesses) args.push("--no-reuse-processes");
  if (input.selfDestruct) args.push("--self-destruct", input.selfDestruct);
  const notice = input.notice;
  if (notice) {
    args.push("--interruption-notice", `${notice.kind}=${notice.endpoint}`);
    if (notice.intervalSeconds !== undefined)
      args.push("--interruption-poll-interval", String(notice.intervalSeconds));
  }
  return args;
}

function nodeWorkerArguments(context: PoolContext, node: NodeRuntime): string[] {
  const { provider, cluster } = context;
  const where = provider && cluster ? { cluster, instance: node.instance } : undefined;
  return workerArguments({
    node: node.index,
    concurrency: slotsPerNode(context),
    executor: executorOf(context),
    worker: context.spec.worker,
    ttl: context.spec.ttl,
    selfDestruct: provider && where ? provider.selfDestruct(where) : "",
    notice: provider && where ? (provider.interruptionNotice?.(where) ?? undefined) : undefined,
  });
}

function launchContext(
  context: PoolContext,
  node: NodeRuntime,
  environment: WorkerEnvironment,
): LaunchContext {
  const head = context.nodes[0]?.instance;
  const { pythonBin, venvDir, privateIp, root } = environment;
  return {
    nodeId: node.index,
    numNodes: context.nodes.length,
    headAddr: head?.privateIp ?? "127.0.0.1",
    headPort: context.headPort,
    privateIp,
    pythonBin,
    venvDir: venvDir ?? "",
    ...(root !== undefined ? { root } : venvDir ? { root: posix.dirname(venvDir) } : {}),
    concurrency: slotsPerNode(context),
    executor: executorOf(context),
    workersPerNode: context.layout.workersPerNode,
  } as LaunchContext;
}

/** Reports the provider's bootstrap progress as `bootstrap.phase` events, timing each phase. */
function phaseReporter(context: PoolContext, node: NodeRuntime) {
  const phaseStarts = new Map<string, number>();
  return (phase: string, status: "started" | "finished" | "failed", durationMs?: number, detail?: string) => {
    const now = performance.now();
    if (status === "started") phaseStarts.set(phase, now);
    const begun = phaseStarts.get(phase);
    const duration = durationMs ?? (status !== "started" && begun !== undefined ? now - begun : undefined);
    context.hub.emit({
      type: "bootstrap.phase",
      timestamp: Date.now(),
      poolId: context.id,
      node: node.index,
      phase,
      status,
      ...(duration !== undefined ? { durationMs: duration } : {}),
      ...(detail ? { detail } : {}),
    } as SkywardEvent);
  };
}

/** Launches the node's worker, connects to it, configures it and hands it to the task manager. */
export async function startNode(
  context: PoolContext,
  node: NodeRuntime,
  signal: AbortSignal,
  watchers: NodeWatchers,
): Promise<void> {
  const { provider, cluster } = placement(context);
  const { spec, options, hub } = context;
  const image = context.image as Image;
  const started = performance.now();
  const progress = phaseReporter(context, node);
  // Instance ids may repeat (an SSH host is its own id): each start is its own launch.
  const launch = {};
  node.launch = launch;
  const command = (environment: WorkerEnvironment) =>
    applyLaunchers(
      spec.plugins,
      LaunchCommand.create({
        launcher: environment.pythonBin,
        entrypoint: environment.workerScript,
        args: nodeWorkerArguments(context, node),
      }),
      launchContext(context, node, environment),
    );
  const endpoint = await provider.launchWorker({
    cluster,
    instance: node.instance,
    nodeId: node.index,
    image,
    command,
    env: image.env,
    token: context.token,
    ...(context.adoptedTokens ? { ownTokens: [...context.adoptedTokens] } : {}),
    pluginOps: collectPluginBootstrapOps(spec.plugins, cluster),
    timeoutSeconds: spec.bootstrapTimeout,
    connectTimeoutSeconds: spec.sshTimeout,
    connectRetryIntervalSeconds: spec.sshRetryInterval,
    onExit: (code, exitSignal) => {
      // Ended by the pool (closing, scaling down, ending a silent or unhealthy node's worker): no news.
      if (isClosing(context) || node.retiring || node.replacing === launch) return;
      hub.emit({
        type: "error",
        timestamp: Date.now(),
        poolId: context.id,
        node: node.index,
        message: `the worker process exited (${exitSignal ?? `code ${code}`})`,
      });
    },
    signal,
    progress: (report) => progress(report.phase, report.status, report.durationMs, report.detail),
  });
  let connection: WorkerConnection;
  try {
    const where = endpoint.openStream
      ? { stream: await endpoint.openStream(), host: endpoint.host }
      : { host: endpoint.host, port: endpoint.port };
    connection = await WorkerConnection.connect(where, {
      token: endpoint.token ?? context.token,
      node: node.index,
      signal,
      timeoutMs: spec.sshTimeout * 1000,
      // A worker silent this long (stopped, hung, cut off) is lost; pings keep a quiet one talking.
      silenceTimeoutMs: options.livenessTimeout * 1000,
      pingIntervalMs: Math.min(5_000, (options.livenessTimeout * 1000) / 3),
    });
  } catch (error) {
    endpoint.close?.();
    throw error;
  }
  if (endpoint.token !== undefined) {
    context.adoptedTokens ??= new Set();
    context.adoptedTokens.add(endpoint.token);
  }
  node.endpoint?.close?.();
  node.endpoint = endpoint;
  node.connection = connection;
  const kept = context.resumed ? connection.welcome.cluster : undefined;
  if (kept) context.layout = { ...context.layout, workersPerNode: kept.workers_per_node };
  node.told = undefined;
  const message = nodeClusterMessage(context, node, connection);
  const ready = await sendCluster(node, connection, message, signal);
  followCollections(context, node, connection, ready);
  // The node is in (a new one, or a replacement on another instance): the others learn of it (and
  // this one of a change made while it started), before any task is sent to it.
  node.told = membershipKey(message);
  retellCluster(context);
  await passFirstHealthCheck(context, node, connection, signal);
  hub.emit({
    type: "node.bootstrapped",
    timestamp: Date.now(),
    poolId: context.id,
    node: node.index,
    instanceId: node.instance.id,
    durationMs: performance.now() - started,
    roundTripMs: connection.roundTripMs,
  });
  const { buffer } = context.spec.worker;
  const slots = slotsPerNode(context);
  const capacity = buffer === "auto" ? "auto" : slots + buffer;
  // Through the task manager's listener, which also gets what the worker sent before it was attached.
  context.tasks.attach(node.index, connection, capacity, slots, (event) => {
    if (event.type === "interruption") watchers.interrupted(node, connection, event);
  });
  relayMetrics(connection, hub, context.id, node.index);
  connection.onLost((loss) =>
    watchers.lost(node, connection, loss.error.message, loss.reason === "heartbeat-timeout"),
  );
  const checker = options.healthChecker;
  if (checker) {
    monitorHealth(connection, checker, context.abort.signal, (reason, failures) =>
      watchers.unhealthy(node, `its health check failed ${failures} times in a row: ${reason}`),
    );
  }
  hub.emit({
    type: "node.ready",
    timestamp: Date.now(),
    poolId: context.id,
    node: node.index,
    instanceId: node.instance.id,
  });
}

/**
 * Where the distributed collections are: the node whose `ready` says it holds them is told to every
 * other node, and a later node is told on its `ready` (a holder of an older epoch than the pool
 * knows, back after a promotion, is told the newer one instead, which supersedes it).
 */
function followCollections(
  context: PoolContext,
  node: NodeRuntime,
  connection: WorkerConnection,
  ready: ReadyMessage,
): void {
  const known = context.collectionsAddress;
  if (ready.collections && (ready.collections.epoch ?? 0) >= (known?.epoch ?? 0)) {
    context.collectionsAddress = ready.collections;
    context.collectionsNode = node.index;
    tellAuthority(
      ready.collections,
      context.nodes.filter((other) => other.index !== node.index).map((other) => other.connection),
    );
  } else if (known) {
    tellAuthority(known, [connection]);
  }
}

/**
 * Node `index` is gone from the pool (lost, or let go on purpose). If it held the collections, the
 * node with the newest copy is promoted in a newer epoch and every node told (tried again while a
 * node does not answer, for longer than a node's liveness deadline); if no node has a copy, the
 * collections are lost: an `error` event says why, and so does every operation from then on.
 * Otherwise the holder is told (`$lost`): if that node held the copy, the holder need not wait
 * for it any more.
 */
export function collectionsNodeGone(context: PoolContext, index: number): void {
  if (context.abort.signal.aborted || context.collectionsNode === undefined) return;
  if (index !== context.collectionsNode) {
    tellNodeLost(context.nodes.find((other) => other.index === context.collectionsNode)?.connection, index);
    return;
  }
  if (context.collectionsUnavailable !== undefined) return; // being promoted already, or lost for good
  context.collectionsUnavailable = `node ${index}, which held the pool's collections, was lost: the newest copy is being promoted`;
  const livenessMs = context.options.livenessTimeout * 1000;
  void failOver(() => context.nodes, index, context.collectionsAddress?.epoch ?? 0, {
    patienceMs: Math.max(120_000, 2 * livenessMs + 30_000),
    signal: context.abort.signal,
    onRetry: (reason, retryInMs) =>
      context.hub.emit({
        type: "error",
        timestamp: Date.now(),
        poolId: context.id,
        node: index,
        message: `promoting a copy of the pool's collections (node ${index}, which held them, was lost) failed: ${reason}; trying again in ${retryInMs / 1000} s`,
      }),
  }).then((outcome) => {
    if (context.abort.signal.aborted) return;
    if (!outcome.promoted) {
      const reason = `the pool's collections are lost: node ${index}, which held them, was lost, and ${outcome.reason}`;
      context.collectionsUnavailable = reason;
      context.hub.emit({
        type: "error",
        timestamp: Date.now(),
        poolId: context.id,
        node: index,
        message: reason,
      });
      return;
    }
    context.collectionsNode = outcome.node;
    context.collectionsAddress = outcome.address;
    context.collectionsUnavailable = undefined;
    tellAuthority(
      outcome.address,
      context.nodes.filter((other) => other.index !== outcome.node).map((other) => other.connection),
    );
  });
}

/** Sends the cluster message and waits for the worker's `ready` (or its refusal). */
async function sendCluster(
  node: NodeRuntime,
  connection: WorkerConnection,
  message: ClusterMessage,
  signal: AbortSignal,
): Promise<ReadyMessage> {
  const ready = new Promise<ReadyMessage>((resolve, reject) => {
    const off = connection.onMessage((reply) => {
      if (reply.t === "ready") {
        off();
        resolve(reply);
      } else if (reply.t === "reject") {
        // The worker could not apply the cluster settings (a plugin's worker module failed to import).
        off();
        reject(
          new BootstrapError({
            node: node.index,
            phase: "plugins",
            logTail: "",
            message: `Node ${node.index} refused its settings: ${reply.reason}`,
          }),
        );
      }
    });
    void connection.closed.then((loss) => {
      off();
      reject(
        loss?.error ??
          new CancelledError({
            message: `The connection to node ${node.index} closed before it was ready`,
          }),
      );
    });
    signal.addEventListener("abort", () => reject(abortError(signal, `Starting node ${node.index}`)), {
      once: true,
    });
  });
  connection.send(message);
  return await ready;
}

/** With a health checker, a node is ready only once a check succeeds. */
async function passFirstHealthCheck(
  context: PoolContext,
  node: NodeRuntime,
  connection: WorkerConnection,
  signal: AbortSignal,
): Promise<void> {
  const checker = context.options.healthChecker;
  if (!checker) return;
  const started = performance.now();
  const reason = await firstHealthy(connection, checker, signal);
  if (signal.aborted) throw abortError(signal, `Starting node ${node.index}`);
  if (reason === undefined) {
    context.hub.emit({
      type: "bootstrap.phase",
      timestamp: Date.now(),
      poolId: context.id,
      node: node.index,
      phase: "health",
      status: "finished",
      durationMs: performance.now() - started,
    });
    return;
  }
  if (node.connection === connection) node.connection = undefined;
  await connection.close({ timeoutMs: 1000 });
  throw new BootstrapError({
    node: node.index,
    phase: "health",
    logTail: "",
    message: `Node ${node.index} failed its health check ${checker.failures} times in a row: ${reason}`,
  });
}
