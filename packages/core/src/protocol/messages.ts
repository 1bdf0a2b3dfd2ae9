/**
 * The wire protocol's vocabulary (docs/protocol.md): the version, the frame limits, the values a
 * message may carry and every message of protocol version 1, discriminated on `t`.
 */

/** The protocol version this side speaks. */
export const PROTOCOL_VERSION = 1;

/** The largest header a frame may have, in bytes (64 MiB). */
export const MAX_HEADER_BYTES = 64 * 1024 * 1024;

/** The largest body a frame may have, in bytes (2 GiB). */
export const MAX_BODY_BYTES = 2 * 1024 * 1024 * 1024;

/**
 * An argument stream of a task, sent as `{"$s": index}`. The client marks each streamed argument
 * with one (see {@link markInputStreams}) and keeps its `source` to answer the worker's `pull`s with
 * `in` messages; a decoded `$s` gives an `InputStream` without a source.
 */
export class InputStream {
  /** The stream's number within its task (`k` in `{"$s": k}`). */
  readonly index: number;
  /** The items to send, on the side that owns the stream. */
  readonly source: AsyncIterable<unknown> | Iterable<unknown> | undefined;

  constructor(index: number, source?: AsyncIterable<unknown> | Iterable<unknown>) {
    if (!Number.isSafeInteger(index) || index < 0) {
      throw new RangeError(`an input stream index must be a non-negative integer, received ${index}`);
    }
    this.index = index;
    this.source = source;
  }
}

/**
 * A value as it travels: JSON, plus bytes, `bigint`s, non-finite numbers (as numbers) and input
 * streams. Objects may have keys starting with `$` (they are escaped on the wire).
 */
export type WireValue =
  | null
  | boolean
  | number
  | bigint
  | string
  | Uint8Array
  | InputStream
  | readonly WireValue[]
  | WireObject;

/** An object value: string keys to values. */
export interface WireObject {
  readonly [key: string]: WireValue;
}

/** `hello` — the client's first message. */
export interface HelloMessage {
  readonly t: "hello";
  /** The protocol version the client speaks ({@link PROTOCOL_VERSION}). */
  readonly version: number;
  /** The pool's secret token. */
  readonly token: string;
  /** The client's name and version, e.g. `skyward-ts/0.1.0`. */
  readonly client: string;
}

/** The worker's executor kind. */
export type WorkerExecutor = "thread" | "process";

/** `welcome` — the worker accepted the `hello`. */
export interface WelcomeMessage {
  readonly t: "welcome";
  /** The protocol version the worker speaks. */
  readonly version: number;
  /** The worker's node index. */
  readonly node: number;
  /** The worker's process id. */
  readonly pid: number;
  /** The node's host name. */
  readonly hostname: string;
  /** The worker's Python version (`3.11.7`). */
  readonly python: string;
  /** The executor running tasks. */
  readonly executor: WorkerExecutor;
  /** Concurrent task slots. */
  readonly concurrency: number;
  /** Extra prefetched slots. */
  readonly buffer: number;
  /** Ids of finished tasks whose results the worker holds from an earlier connection. */
  readonly results: readonly string[];
  /**
   * The `cluster` message the worker runs with, less its `env`; null before it has one (the Python
   * worker sends it; a pool attaching to a detached pool's workers sends it back to them).
   */
  readonly cluster?: Omit<ClusterMessage, "env" | "secrets"> | null;
}

/** `reject` — the worker refused the `hello` and closes the connection. */
export interface RejectMessage {
  readonly t: "reject";
  /** Why (`bad token`, `unsupported version 2`). */
  readonly reason: string;
}

/** One node of the cluster, as `cluster.peers` lists it. */
export interface ClusterPeer {
  /** The node index. */
  readonly node: number;
  /** The node's private address. */
  readonly private_ip: string;
  /** The node's public address, when it has one. */
  readonly public_ip: string | null;
  /**
   * The node's instance (optional): a node replaced on a new instance is another peer even where
   * its addresses are the same.
   */
  readonly instance_id?: string;
}

/** `cluster` — the client tells a node its place in the cluster. */
export interface ClusterMessage {
  readonly t: "cluster";
  /** This node's index. */
  readonly node: number;
  /** How many nodes the pool has. */
  readonly total_nodes: number;
  /** Worker slots per node. */
  readonly workers_per_node: number;
  /**
   * Whether the node runs one worker per accelerator and checks it has that many GPUs before it is
   * ready (else it answers `reject`). Absent: false.
   */
  readonly check_accelerators?: boolean;
  /**
   * Whether each worker is pinned to the accelerator of its index (one worker per accelerator):
   * worker `i` of a node sees only device `i` (`CUDA_VISIBLE_DEVICES`). Absent: false.
   */
  readonly pin_accelerators?: boolean;
  /** The head node's private address. */
  readonly head_addr: string;
  /** The port reserved on the head for distributed rendezvous. */
  readonly head_port: number;
  /** The pool's job id. */
  readonly job_id: string;
  /** Every node. */
  readonly peers: readonly ClusterPeer[];
  /** Accelerators per node. */
  readonly accelerators: number;
  /** The accelerator description, or `null` for none. */
  readonly accelerator: WireValue;
  /** Network details, or `null`. */
  readonly network: WireValue;
  /** Environment variables for tasks. */
  readonly env: Readonly<Record<string, string>>;
  /**
   * The pool's secrets (name → value): set in the worker's environment and its task processes',
   * held in memory only, never told back (`welcome.cluster` leaves them out). Absent: none.
   */
  readonly secrets?: Readonly<Record<string, string>>;
  /** The plugins' worker modules, in plugin order (absent: none). */
  readonly plugins?: readonly ClusterPlugin[];
  /** The metrics collectors the worker samples (absent, `null` or `[]`: none). */
  readonly metrics?: readonly ClusterMetric[] | null;
  /** False when the pool's distributed collections are off (`options.cluster: false`); absent: on. */
  readonly collections?: boolean;
  /** The node that holds the distributed collections when it is not the head (after a failover). */
  readonly collections_node?: number;
}

/** A metrics collector, as the `cluster` message names it (the fields of a `sky.metrics` descriptor). */
export interface ClusterMetric {
  /** Which collector: `cpu`, `memory`, `gpu`, `disk`, `custom`, … */
  readonly collector: string;
  /** The metric's name in `metric` messages. */
  readonly name: string;
  /** Seconds between two samples. */
  readonly interval: number;
  /** The path whose filesystem `disk` measures. */
  readonly path?: string;
  /** The shell command a `custom` collector runs. */
  readonly command?: string;
}

/** A plugin's worker module, as the `cluster` message names it. */
export interface ClusterPlugin {
  /** The plugin's name, for errors. */
  readonly name: string;
  /** The Python module the worker imports (its hooks: `around_app`, `around_process`, `decorate`). */
  readonly module: string;
  /** The configuration handed to its hooks. */
  readonly config: WireValue;
}

/** `ready` — the worker applied `cluster` and runs tasks. */
export interface ReadyMessage {
  readonly t: "ready";
  /**
   * The head's answer only: where its worker serves the pool's distributed collections to the
   * other nodes (the client tells them with `authority`).
   */
  readonly collections?: CollectionsAddress;
}

/** Where the head's worker serves the distributed collections on the cluster network. */
export interface CollectionsAddress {
  readonly addr: string;
  readonly port: number;
  /**
   * The holder's epoch: 0 for the pool's first head, raised by each promotion. A node ignores an
   * `authority` older than what it knows, and refuses an older holder's copies (absent: 0).
   */
  readonly epoch?: number;
}

/** `authority` — the client tells a node where the head serves the distributed collections. */
export interface AuthorityMessage extends CollectionsAddress {
  readonly t: "authority";
}

/** `coll` — the client's own collection operation, sent to the head, which holds the collections. */
export interface CollectionOpMessage {
  readonly t: "coll";
  /** Unique per connection; the answer carries it. */
  readonly id: number;
  /** The handle asking: `client` or `client:<uuid>` (a lock is held by its handle). */
  readonly owner: string;
  /** `[kind, name, op, ...args]`. */
  readonly op: readonly WireValue[];
}

/** `coll_cancel` — the client gives up on its pending operation `id` (a blocking one stops waiting). */
export interface CollectionCancelMessage {
  readonly t: "coll_cancel";
  readonly id: number;
  readonly owner: string;
}

/** `coll_answer` — the head answers a `coll`: its value, or the refusal's Python type and message. */
export interface CollectionAnswerMessage {
  readonly t: "coll_answer";
  readonly id: number;
  readonly ok: boolean;
  readonly value?: WireValue;
  readonly type?: string;
  readonly message?: string;
}

/** `submit` — run a function. */
export interface SubmitMessage {
  readonly t: "submit";
  /** The task id, unique per connection. */
  readonly id: string;
  /** The callable, `module:qualname`. */
  readonly fn: string;
  /** Positional arguments. */
  readonly args: readonly WireValue[];
  /** Keyword arguments. */
  readonly kwargs: WireObject;
  /** Seconds, or `null` for none. */
  readonly timeout: number | null;
  /** Whether the function is a generator whose items come back as `item` messages. */
  readonly stream: boolean;
  /** The worker slot to pin the task to, or `null` for any. */
  readonly worker: number | null;
  /** A task run for another task (nested dispatch): it runs on the worker's separate nested pool. */
  readonly nested?: boolean;
  /**
   * `timeout` is the pool's default, not one the call set: a function declared with
   * `@sky.function(timeout=…)` runs under its own timeout instead.
   */
  readonly default_timeout?: boolean;
  /** Keep the result on the node and answer with a remote reference `{"$r": {id, node, type, size}}`. */
  readonly keep?: boolean;
  /** The arguments hold remote references (`$r`): the worker puts the objects it keeps in their place. */
  readonly refs?: boolean;
}

/** `subtask` — a running task asks the client to run another function across the pool (nested dispatch). */
export interface SubtaskMessage {
  readonly t: "subtask";
  /** The parent task's id. */
  readonly id: string;
  /** The subtask's number, unique within its parent. */
  readonly sub: number;
  /** The callable, `module:qualname`. */
  readonly fn: string;
  /** Positional arguments. */
  readonly args: readonly WireValue[];
  /** Keyword arguments. */
  readonly kwargs: WireObject;
  /** The node to run it on, or `null` for any. */
  readonly node: number | null;
}

/**
 * `subcancel` — the running task cancelled a subtask's future: the client cancels that nested task
 * (its answer, if one still comes, is ignored by the worker).
 */
export interface SubcancelMessage {
  readonly t: "subcancel";
  /** The parent task's id. */
  readonly id: string;
  /** The subtask's number. */
  readonly sub: number;
}

/** `subresult` — a subtask returned. */
export interface SubresultMessage {
  readonly t: "subresult";
  /** The parent task's id. */
  readonly id: string;
  /** The subtask's number. */
  readonly sub: number;
  /** The returned value. */
  readonly value: WireValue;
}

/** `suberror` — a subtask failed. */
export interface SuberrorMessage {
  readonly t: "suberror";
  /** The parent task's id. */
  readonly id: string;
  /** The subtask's number. */
  readonly sub: number;
  /** What went wrong, as in `error`. */
  readonly kind: TaskErrorKind;
  /** The exception's qualified type name. */
  readonly type: string;
  /** The exception's message. */
  readonly message: string;
  /** The remote traceback. */
  readonly traceback: string;
  /** The node it ran on, or -1 when it never ran. */
  readonly node: number;
}

/** `cancel` — cancel a task. */
export interface CancelMessage {
  readonly t: "cancel";
  /** The task id. */
  readonly id: string;
}

/**
 * `withdraw` — the node is going away (an interruption notice): hand back the listed tasks that
 * have not started, so they run elsewhere. Each one handed back is answered with `withdrawn`.
 */
export interface WithdrawMessage {
  readonly t: "withdraw";
  /** The task ids. */
  readonly ids: readonly string[];
}

/** `withdrawn` — the worker dropped a task that had not started, as `withdraw` asked; it never ran. */
export interface WithdrawnMessage {
  readonly t: "withdrawn";
  /** The task id. */
  readonly id: string;
}

/** `result` — a task returned. */
export interface ResultMessage {
  readonly t: "result";
  /** The task id. */
  readonly id: string;
  /** The returned value. */
  readonly value: WireValue;
}

/** `item` — a streaming task yielded. */
export interface ItemMessage {
  readonly t: "item";
  /** The task id. */
  readonly id: string;
  /** The item's position in the stream, from 0. */
  readonly seq: number;
  /** The yielded value. */
  readonly value: WireValue;
}

/** `end` — a streaming task finished. */
export interface EndMessage {
  readonly t: "end";
  /** The task id. */
  readonly id: string;
  /** Items a detached worker could not keep for the client (over its byte cap); absent when none. */
  readonly dropped?: number;
}

/** Why a task failed, as `error.kind` says. */
export type TaskErrorKind =
  | "exception"
  | "not_found"
  | "serialization"
  | "timeout"
  | "cancelled"
  | "worker_died";

/** `error` — a task failed. */
export interface TaskErrorMessage {
  readonly t: "error";
  /** The task id. */
  readonly id: string;
  /** What went wrong. */
  readonly kind: TaskErrorKind;
  /** The exception's qualified type name. */
  readonly type: string;
  /** The exception's message. */
  readonly message: string;
  /** The remote traceback, as Python formatted it. */
  readonly traceback: string;
  /** The node the task ran on. */
  readonly node: number;
  /** Stream items a detached worker could not keep for the client (over its byte cap); absent when none. */
  readonly dropped?: number;
}

/** `out` — captured stdout or stderr. */
export interface OutputMessage {
  readonly t: "out";
  /** The task that wrote it, or `null` for output written outside a task. */
  readonly id: string | null;
  /** Which stream. */
  readonly stream: "stdout" | "stderr";
  /** The node. */
  readonly node: number;
  /** The worker slot, or `null` outside a task. */
  readonly worker: number | null;
  /** The text written. */
  readonly data: string;
}

/** `pull` — the worker grants credit for up to `n` more items of an input stream. */
export interface PullMessage {
  readonly t: "pull";
  /** The task id. */
  readonly id: string;
  /** The stream's index (`k` of `{"$s": k}`). */
  readonly stream: number;
  /** How many more items may be sent. */
  readonly n: number;
}

/** `in` — one item of an input stream. */
export interface InputItemMessage {
  readonly t: "in";
  /** The task id. */
  readonly id: string;
  /** The stream's index. */
  readonly stream: number;
  /** The item. */
  readonly value: WireValue;
}

/** `in_end` — an input stream is exhausted. */
export interface InputEndMessage {
  readonly t: "in_end";
  /** The task id. */
  readonly id: string;
  /** The stream's index. */
  readonly stream: number;
}

/** `in_error` — an input stream threw. */
export interface InputErrorMessage {
  readonly t: "in_error";
  /** The task id. */
  readonly id: string;
  /** The stream's index. */
  readonly stream: number;
  /** What it threw. */
  readonly message: string;
}

/** `ping` — a heartbeat; answered with `pong` carrying the same `ts`. */
export interface PingMessage {
  readonly t: "ping";
  /** The sender's timestamp, echoed back. */
  readonly ts: number;
}

/** `pong` — the answer to `ping`. */
export interface PongMessage {
  readonly t: "pong";
  /** The `ts` of the ping answered. */
  readonly ts: number;
}

/** `release` — the client lets go; the worker waits `ttl` seconds for a reconnect, then stops. */
export interface ReleaseMessage {
  readonly t: "release";
  /** Seconds to wait for a reconnect. */
  readonly ttl: number;
  /**
   * The client detaches and will come back: results are kept until collected (once), and a worker
   * started with `--exit-on-stdin-eof` no longer stops when its stdin closes. Optional.
   */
  readonly keep?: boolean;
  /**
   * With `keep`: seconds until the pool's budget runs out at its hourly rate. The worker stops then
   * (running the self-destruct, as at the end of the TTL) unless a pool attached (its `cluster`
   * message cancels it). Optional.
   */
  readonly deadline?: number;
  /**
   * With `keep`: how many bytes of stream items (encoded) the worker keeps for tasks that stream
   * while no client is attached; items past it are dropped and counted (`dropped` on the task's
   * terminal message). Default 64 MiB.
   */
  readonly keep_items_bytes?: number;
}

/** `collect` — resend the terminal messages of finished tasks. */
export interface CollectMessage {
  readonly t: "collect";
  /** Task ids, from `welcome.results`. */
  readonly ids: readonly string[];
}

/** `unref` — forget the objects kept for these remote references. */
export interface UnrefMessage {
  readonly t: "unref";
  /** Remote reference ids. */
  readonly ids: readonly string[];
}

/** `shutdown` — cancel everything and exit. */
export interface ShutdownMessage {
  readonly t: "shutdown";
}

/** `metric` — one sample of a metric. */
export interface MetricMessage {
  readonly t: "metric";
  /** The node. */
  readonly node: number;
  /** The metric's name (`cpu`, `gpu_memory`). */
  readonly name: string;
  /** The sample. */
  readonly value: number;
  /** The unit (`%`, `MB`), or `null`. */
  readonly unit: string | null;
  /** When it was taken, in seconds since the epoch. */
  readonly ts: number;
  /** The GPU's index, for a per-GPU metric (`gpu`, `gpu_memory`, …); absent otherwise. */
  readonly gpu?: number;
  /** The worker slot of the task that reported it (`skyward.report_metric`); absent for collectors. */
  readonly worker?: number;
  /** The task that reported it; absent for collectors. */
  readonly task?: string;
  /** The step the task gave with it, when it gave one. */
  readonly step?: number;
}

/** An event a worker reports; `type` says which. */
export interface WorkerEvent {
  /** Which event (`log`, …); the other fields depend on it. */
  readonly type: string;
  readonly [field: string]: WireValue;
}

/** `event` — something happened on a node. */
export interface EventMessage {
  readonly t: "event";
  /** The node. */
  readonly node: number;
  /** The event. */
  readonly event: WorkerEvent;
}

/** Every message the client sends. */
export type ClientMessage =
  | HelloMessage
  | ClusterMessage
  | SubmitMessage
  | CancelMessage
  | WithdrawMessage
  | InputItemMessage
  | InputEndMessage
  | InputErrorMessage
  | PingMessage
  | PongMessage
  | ReleaseMessage
  | CollectMessage
  | UnrefMessage
  | ShutdownMessage
  | SubresultMessage
  | SuberrorMessage
  | AuthorityMessage
  | CollectionOpMessage
  | CollectionCancelMessage;

/** Every message a worker sends. */
export type WorkerMessage =
  | WelcomeMessage
  | RejectMessage
  | ReadyMessage
  | ResultMessage
  | ItemMessage
  | EndMessage
  | TaskErrorMessage
  | OutputMessage
  | PullMessage
  | MetricMessage
  | EventMessage
  | PingMessage
  | PongMessage
  | SubtaskMessage
  | SubcancelMessage
  | WithdrawnMessage
  | CollectionAnswerMessage;

/** The messages a worker sends about one task (`out` only when its `id` is not `null`). */
export type TaskMessage =
  | ResultMessage
  | ItemMessage
  | EndMessage
  | TaskErrorMessage
  | OutputMessage
  | PullMessage
  | SubtaskMessage
  | SubcancelMessage
  | WithdrawnMessage;

/** Every message of protocol version 1, discriminated on `t`. */
export type WireMessage = ClientMessage | WorkerMessage;

/** The `t` of every message of protocol version 1. */
export type WireMessageType = WireMessage["t"];

/**
 * A decoded message of a type this version does not know. Peers ignore these, so that newer
 * optional messages do not break older peers.
 */
export interface UnknownWireMessage {
  readonly t: string;
  readonly [field: string]: WireValue | undefined;
}

/** A decoded message: a known one (validated) or one of a type this version does not know. */
export type ReceivedMessage = WireMessage | UnknownWireMessage;
