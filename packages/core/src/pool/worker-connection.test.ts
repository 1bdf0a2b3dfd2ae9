import { Buffer } from "node:buffer";
import { type ChildProcessWithoutNullStreams, spawn, spawnSync } from "node:child_process";
import { randomFillSync } from "node:crypto";
import { once } from "node:events";
import { connect as connectSocket, createServer, type Server, type Socket } from "node:net";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { afterEach, describe, expect, it } from "vitest";
// The CI rule of @skyward/testing, by path: that package depends on core, so core cannot depend on it.
import { isCi } from "../../../testing/src/prerequisites.js";
import { CancelledError, ConnectionError, ProtocolError, SerializationError } from "../errors/errors.js";
import {
  encodeFrame,
  FrameDecoder,
  type ReceivedMessage,
  type WelcomeMessage,
  type WireMessage,
  type WireValue,
} from "../protocol/protocol.js";
import { type ConnectionLoss, WorkerConnection, type WorkerConnectionOptions } from "./worker-connection.js";

const token = "s3cret";

const welcome: WelcomeMessage = {
  t: "welcome",
  version: 1,
  node: 0,
  pid: 4242,
  hostname: "test-host",
  python: "3.11.7",
  executor: "thread",
  concurrency: 2,
  buffer: 1,
  results: ["t-old"],
};

/** A field of a received message, whatever its type. */
const field = (message: ReceivedMessage, name: string): unknown => (message as Record<string, unknown>)[name];

/** One client connection as the fake worker sees it. */
class Peer {
  readonly frames: ReceivedMessage[][] = [];
  readonly socket: Socket;
  #waiters: (() => void)[] = [];

  constructor(socket: Socket) {
    this.socket = socket;
    const decoder = new FrameDecoder();
    socket.on("data", (chunk: Buffer) => {
      for (const frame of decoder.push(chunk)) this.frames.push(frame);
      for (const waiter of this.#waiters.splice(0)) waiter();
    });
    socket.on("error", () => {});
  }

  get messages(): ReceivedMessage[] {
    return this.frames.flat();
  }

  send(...messages: WireMessage[]): void {
    for (const buffer of encodeFrame(messages)) this.socket.write(buffer);
  }

  /** Waits until `test` holds for what arrived (checked after each chunk). */
  async until(test: () => boolean, timeoutMs = 5_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!test()) {
      if (Date.now() > deadline) throw new Error("timed out waiting for the client");
      await new Promise<void>((resolve) => {
        this.#waiters.push(resolve);
        setTimeout(resolve, 20);
      });
    }
  }
}

type Behaviour = (peer: Peer, hello: ReceivedMessage) => void;

/** Answers a good hello with `welcome`, a bad token with `reject`. */
const normalHandshake: Behaviour = (peer, hello) => {
  if (field(hello, "token") !== token) {
    peer.send({ t: "reject", reason: "bad token" });
    peer.socket.end();
  } else peer.send(welcome);
};

/** A TCP server speaking the worker's side of the protocol, as scripted by each test. */
class FakeWorker {
  readonly peers: Peer[] = [];
  readonly server: Server;
  #peerWaiters: ((peer: Peer) => void)[] = [];

  constructor(behaviour: Behaviour | "silent" = normalHandshake) {
    this.server = createServer((socket) => {
      socket.setNoDelay(true);
      const peer = new Peer(socket);
      this.peers.push(peer);
      for (const waiter of this.#peerWaiters.splice(0)) waiter(peer);
      if (behaviour === "silent") return;
      let greeted = false;
      socket.on("data", () => {
        if (greeted || peer.frames.length === 0) return;
        greeted = true;
        behaviour(peer, peer.frames[0]![0]!);
      });
    });
  }

  async listen(): Promise<number> {
    this.server.listen(0, "127.0.0.1");
    await once(this.server, "listening");
    const address = this.server.address();
    if (address === null || typeof address === "string") throw new Error("no port");
    return address.port;
  }

  nextPeer(): Promise<Peer> {
    const existing = this.peers[0];
    if (existing !== undefined) return Promise.resolve(existing);
    return new Promise((resolve) => this.#peerWaiters.push(resolve));
  }

  async close(): Promise<void> {
    for (const peer of this.peers) peer.socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function startWorker(behaviour?: Behaviour | "silent"): Promise<{ worker: FakeWorker; port: number }> {
  const worker = new FakeWorker(behaviour);
  const port = await worker.listen();
  cleanups.push(() => worker.close());
  return { worker, port };
}

async function connectTo(
  port: number,
  options: Partial<WorkerConnectionOptions> = {},
): Promise<WorkerConnection> {
  const connection = await WorkerConnection.connect({ host: "127.0.0.1", port }, { token, ...options });
  cleanups.push(() => connection.close({ timeoutMs: 1_000 }));
  return connection;
}

async function rejection(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  throw new Error("the promise did not reject");
}

/** Makes the fake worker answer each of the client's pings with a pong carrying its `ts`. */
function answerPings(peer: Peer): void {
  let seen = 1;
  peer.socket.on("data", () => {
    const messages = peer.messages;
    for (const message of messages.slice(seen)) {
      if (message.t === "ping") peer.send({ t: "pong", ts: field(message, "ts") as number });
    }
    seen = messages.length;
  });
}

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

describe("handshake", () => {
  it("sends hello with the token and returns the welcome", async () => {
    const { worker, port } = await startWorker();
    const connection = await connectTo(port, { node: 3 });
    expect(connection.welcome).toEqual(welcome);
    expect(connection.isOpen).toBe(true);
    expect(connection.host).toBe(`127.0.0.1:${port}`);
    const peer = await worker.nextPeer();
    expect(peer.frames[0]).toEqual([{ t: "hello", version: 1, token, client: "skyward-ts/0.1.0" }]);
  });

  it("raises a protocol error with the worker's reason for a bad token", async () => {
    const { port } = await startWorker();
    const error = await rejection(WorkerConnection.connect({ host: "127.0.0.1", port }, { token: "wrong" }));
    expect(ProtocolError.isInstance(error)).toBe(true);
    expect(error.message).toContain("rejected the connection: bad token");
  });

  it("raises a protocol error when the worker speaks another version", async () => {
    const { port } = await startWorker((peer) => peer.send({ ...welcome, version: 2 }));
    const error = await rejection(WorkerConnection.connect({ host: "127.0.0.1", port }, { token }));
    expect(ProtocolError.isInstance(error)).toBe(true);
    expect(error.message).toContain("speaks protocol version 2; this client speaks 1");
  });

  it("raises a protocol error when the worker answers with something else", async () => {
    const { port } = await startWorker((peer) => peer.send({ t: "ready" }));
    const error = await rejection(WorkerConnection.connect({ host: "127.0.0.1", port }, { token }));
    expect(error.message).toContain('answered "hello" with "ready"');
  });

  it("raises a protocol error when the worker sends garbage", async () => {
    const { port } = await startWorker((peer) =>
      peer.socket.write(Buffer.from("HTTP/1.1 400 Bad Request\r\n\r\n")),
    );
    const error = await rejection(WorkerConnection.connect({ host: "127.0.0.1", port }, { token }));
    expect(ProtocolError.isInstance(error)).toBe(true);
  });

  it("raises a connection error when nothing listens", async () => {
    const { worker, port } = await startWorker();
    await worker.close();
    const error = await rejection(WorkerConnection.connect({ host: "127.0.0.1", port }, { token, node: 2 }));
    expect(ConnectionError.isInstance(error)).toBe(true);
    expect((error as ConnectionError).node).toBe(2);
    expect(error.message).toContain("ECONNREFUSED");
  });

  it("raises a connection error when the worker closes before answering", async () => {
    const { port } = await startWorker((peer) => peer.socket.end());
    const error = await rejection(WorkerConnection.connect({ host: "127.0.0.1", port }, { token }));
    expect(ConnectionError.isInstance(error)).toBe(true);
    expect(error.message).toContain('closed the connection before answering "hello"');
  });

  it("stops at the deadline when the worker never answers", async () => {
    const { worker, port } = await startWorker("silent");
    const started = performance.now();
    const error = await rejection(
      WorkerConnection.connect({ host: "127.0.0.1", port }, { token, timeoutMs: 150 }),
    );
    expect(ConnectionError.isInstance(error)).toBe(true);
    expect(error.message).toContain("within 150 ms");
    // It waited for the deadline (how soon after it, a loaded machine decides: the bench's business).
    expect(performance.now() - started).toBeGreaterThanOrEqual(140);
    const peer = await worker.nextPeer();
    await peer.until(() => peer.socket.readableEnded || peer.socket.destroyed);
  });

  it("stops when the signal aborts, and closes the socket", async () => {
    const { worker, port } = await startWorker("silent");
    const controller = new AbortController();
    const connecting = WorkerConnection.connect(
      { host: "127.0.0.1", port },
      { token, signal: controller.signal },
    );
    const peer = await worker.nextPeer();
    await peer.until(() => peer.frames.length > 0); // the hello arrived: the client is waiting for welcome
    controller.abort(new Error("user gave up"));
    const error = await rejection(connecting);
    expect(CancelledError.isInstance(error)).toBe(true);
    expect((error.cause as Error).message).toBe("user gave up");
    const closed = once(peer.socket, "end");
    peer.socket.resume();
    await closed;
  });

  it("refuses at once when the signal is already aborted", async () => {
    const error = await rejection(
      WorkerConnection.connect({ host: "127.0.0.1", port: 1 }, { token, signal: AbortSignal.abort() }),
    );
    expect(CancelledError.isInstance(error)).toBe(true);
  });

  it("works over any duplex stream", async () => {
    const { port } = await startWorker();
    const socket = connectSocket({ host: "127.0.0.1", port });
    const connection = await WorkerConnection.connect({ stream: socket, host: "node-0 via test" }, { token });
    cleanups.push(() => connection.close());
    expect(connection.welcome.hostname).toBe("test-host");
    expect(connection.host).toBe("node-0 via test");
  });
});

describe("sending", () => {
  it("sends every message of one turn as one frame", async () => {
    const { worker, port } = await startWorker();
    const connection = await connectTo(port);
    const peer = await worker.nextPeer();
    for (let index = 0; index < 50; index++) connection.send({ t: "cancel", id: `t-${index}` });
    await peer.until(() => peer.frames.length >= 2);
    connection.send({ t: "cancel", id: "later" });
    await peer.until(() => peer.frames.length >= 3);
    expect(peer.frames).toHaveLength(3);
    expect(peer.frames[1]).toEqual(
      Array.from({ length: 50 }, (_, index) => ({ t: "cancel", id: `t-${index}` })),
    );
    expect(peer.frames[2]).toEqual([{ t: "cancel", id: "later" }]);
  });

  it("throws a serialization error at once for an unsendable value, and keeps going", async () => {
    const { worker, port } = await startWorker();
    const connection = await connectTo(port);
    const peer = await worker.nextPeer();
    expect(() =>
      connection.send({
        t: "submit",
        id: "t-1",
        fn: "m:f",
        args: [new Map() as never],
        kwargs: {},
        timeout: null,
        stream: false,
        worker: null,
      }),
    ).toThrow(SerializationError);
    connection.send({ t: "cancel", id: "t-2" });
    await peer.until(() => peer.frames.length >= 2);
    expect(peer.frames[1]).toEqual([{ t: "cancel", id: "t-2" }]);
  });

  it("waits for drain under backpressure and gathers what was sent meanwhile into one frame", async () => {
    const { worker, port } = await startWorker();
    const connection = await connectTo(port);
    const peer = await worker.nextPeer();
    peer.socket.pause();
    const payload = new Uint8Array(64 * 1024 * 1024);
    randomFillSync(payload);
    connection.send({ t: "in", id: "t-1", stream: 0, value: payload });
    await nextTurn();
    await nextTurn();
    expect(connection.needsDrain).toBe(true);
    for (let index = 0; index < 10; index++) {
      connection.send({ t: "in", id: "t-1", stream: 0, value: index });
      await nextTurn();
    }
    expect(connection.needsDrain).toBe(true);
    const drained = connection.drain({ timeoutMs: 20_000 });
    peer.socket.resume();
    await drained;
    expect(connection.needsDrain).toBe(false);
    await peer.until(() => peer.frames.length >= 3, 20_000);
    expect(peer.frames).toHaveLength(3);
    const big = peer.frames[1]![0] as { value: Uint8Array };
    expect(Buffer.compare(big.value, payload)).toBe(0);
    expect(peer.frames[2]!.map((message) => field(message, "value"))).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
  });

  it("gives up waiting for drain at the deadline and when aborted", async () => {
    const { worker, port } = await startWorker();
    const connection = await connectTo(port);
    const peer = await worker.nextPeer();
    peer.socket.pause();
    connection.send({ t: "in", id: "t-1", stream: 0, value: new Uint8Array(32 * 1024 * 1024) });
    await nextTurn();
    await nextTurn();
    expect(connection.needsDrain).toBe(true);
    const late = await rejection(connection.drain({ timeoutMs: 50 }));
    expect(ConnectionError.isInstance(late)).toBe(true);
    const aborted = await rejection(connection.drain({ signal: AbortSignal.timeout(30) }));
    expect(CancelledError.isInstance(aborted)).toBe(true);
    peer.socket.resume();
    await connection.drain({ timeoutMs: 10_000 });
  });
});

describe("receiving", () => {
  it("routes task messages to their handler and the rest to the general listeners", async () => {
    const { worker, port } = await startWorker();
    const connection = await connectTo(port);
    const peer = await worker.nextPeer();
    const forTask: ReceivedMessage[] = [];
    const general: ReceivedMessage[] = [];
    connection.onTask("t-1", (message) => forTask.push(message));
    connection.onMessage((message) => general.push(message));
    peer.send(
      { t: "out", id: "t-1", stream: "stdout", node: 0, worker: 0, data: "hi\n" },
      { t: "item", id: "t-1", seq: 0, value: new Uint8Array([1, 2]) },
      { t: "pull", id: "t-1", stream: 0, n: 16 },
      { t: "result", id: "t-9", value: 1 },
      { t: "out", id: null, stream: "stderr", node: 0, worker: null, data: "boot\n" },
      { t: "metric", node: 0, name: "cpu", value: 12.5, unit: "%", ts: 1.5 },
      { t: "from_the_future", x: 1 } as unknown as WireMessage,
      { t: "ready" },
      { t: "end", id: "t-1" },
    );
    await peer.until(() => forTask.length === 4 && general.length === 4);
    expect(forTask.map((message) => message.t)).toEqual(["out", "item", "pull", "end"]);
    expect(forTask[1]).toEqual({ t: "item", id: "t-1", seq: 0, value: new Uint8Array([1, 2]) });
    expect(general.map((message) => message.t)).toEqual(["result", "out", "metric", "ready"]);
    connection.offTask("t-1");
    peer.send({ t: "result", id: "t-1", value: 2 });
    await peer.until(() => general.length === 5);
    expect(general[4]).toEqual({ t: "result", id: "t-1", value: 2 });
    expect(forTask).toHaveLength(4);
  });

  it("keeps messages that arrive with the welcome for the first listener", async () => {
    const { port } = await startWorker((peer) =>
      peer.send(welcome, { t: "out", id: null, stream: "stdout", node: 0, worker: null, data: "early\n" }),
    );
    const connection = await connectTo(port);
    await sleep(50);
    const general: ReceivedMessage[] = [];
    connection.onMessage((message) => general.push(message));
    await sleep(0);
    expect(general).toEqual([
      { t: "out", id: null, stream: "stdout", node: 0, worker: null, data: "early\n" },
    ]);
  });

  it("answers ping with pong", async () => {
    const { worker, port } = await startWorker();
    await connectTo(port);
    const peer = await worker.nextPeer();
    peer.send({ t: "ping", ts: 123.5 });
    await peer.until(() => peer.messages.some((message) => message.t === "pong"));
    expect(peer.messages.find((message) => message.t === "pong")).toEqual({ t: "pong", ts: 123.5 });
  });

  it("treats a worker sending a client's message as a protocol error", async () => {
    const { worker, port } = await startWorker();
    const connection = await connectTo(port);
    const peer = await worker.nextPeer();
    peer.send({ t: "cancel", id: "t-1" });
    const loss = await connection.closed;
    expect(loss?.reason).toBe("protocol-error");
    expect(loss?.error.message).toContain('unexpected "cancel"');
  });
});

describe("liveness", () => {
  it("pings when idle and stays open while the worker answers", async () => {
    const { worker, port } = await startWorker((peer) => {
      peer.send(welcome);
      answerPings(peer);
    });
    const connection = await connectTo(port, { pingIntervalMs: 40, silenceTimeoutMs: 300 });
    const peer = await worker.nextPeer();
    await sleep(700);
    expect(connection.isOpen).toBe(true);
    const pings = peer.messages.filter((message) => message.t === "ping");
    expect(pings.length).toBeGreaterThanOrEqual(5);
    expect(typeof field(pings[0]!, "ts")).toBe("number");
  });

  it("measures the round trip: the handshake's first, then the answers to its pings", async () => {
    const { port } = await startWorker((peer) => {
      setTimeout(() => peer.send(welcome), 120);
      answerPings(peer);
    });
    const connection = await connectTo(port, { pingIntervalMs: 20, silenceTimeoutMs: 2_000 });
    const handshake = connection.roundTripMs;
    expect(handshake).toBeGreaterThanOrEqual(120 - 1);
    // Pings answered at once pull the estimate down from the slow welcome.
    await sleep(600);
    expect(connection.roundTripMs).toBeLessThan(handshake / 2);
  });

  it("reports the connection lost after the silence timeout", async () => {
    const { port } = await startWorker();
    const connection = await connectTo(port, { pingIntervalMs: 20, silenceTimeoutMs: 150 });
    const losses: ConnectionLoss[] = [];
    connection.onLost((loss) => losses.push(loss));
    const started = performance.now();
    const loss = await connection.closed;
    expect(performance.now() - started).toBeGreaterThanOrEqual(100);
    expect(loss?.reason).toBe("heartbeat-timeout");
    expect(ConnectionError.isInstance(loss?.error)).toBe(true);
    expect(loss?.error.message).toMatch(/sent nothing for \d+ ms \(limit 150 ms\)/);
    expect(losses).toEqual([loss]);
    expect(connection.isOpen).toBe(false);
    expect(() => connection.send({ t: "cancel", id: "t-1" })).toThrow(/is lost/);
  });

  it("reports the end of the stream", async () => {
    const { worker, port } = await startWorker();
    const connection = await connectTo(port);
    const peer = await worker.nextPeer();
    peer.socket.end();
    const loss = await connection.closed;
    expect(loss?.reason).toBe("eof");
    expect(loss?.error.message).toContain("closed the connection");
  });

  it("reports a truncated frame at the end of the stream", async () => {
    const { worker, port } = await startWorker();
    const connection = await connectTo(port);
    const peer = await worker.nextPeer();
    const frame = Buffer.concat(encodeFrame([{ t: "result", id: "t-1", value: "x".repeat(100) }]));
    peer.socket.end(frame.subarray(0, 50));
    const loss = await connection.closed;
    expect(loss?.reason).toBe("eof");
    expect(loss?.error.message).toContain("truncated frame");
  });

  it("reports a protocol error", async () => {
    const { worker, port } = await startWorker();
    const connection = await connectTo(port);
    const peer = await worker.nextPeer();
    const prefix = Buffer.alloc(8);
    prefix.writeUInt32BE(0xffffffff, 0);
    peer.socket.write(prefix);
    const loss = await connection.closed;
    expect(loss?.reason).toBe("protocol-error");
    expect(ProtocolError.isInstance(loss?.error)).toBe(true);
    expect(loss?.error.message).toContain("limit");
    await peer.until(() => peer.socket.readableEnded || peer.socket.destroyed);
  });

  it("reports a socket error", async () => {
    const { worker, port } = await startWorker();
    const connection = await connectTo(port);
    const peer = await worker.nextPeer();
    peer.socket.resetAndDestroy();
    const loss = await connection.closed;
    expect(["socket-error", "eof"]).toContain(loss?.reason);
    expect(ConnectionError.isInstance(loss?.error)).toBe(true);
  });
});

describe("closing", () => {
  it("writes what is queued, ends the stream and settles closed without a loss", async () => {
    const { worker, port } = await startWorker((peer) => {
      peer.send(welcome);
      peer.socket.on("end", () => peer.socket.end());
    });
    const connection = await connectTo(port);
    const peer = await worker.nextPeer();
    const losses: ConnectionLoss[] = [];
    connection.onLost((loss) => losses.push(loss));
    connection.send({ t: "release", ttl: 600 });
    await connection.close();
    expect(await connection.closed).toBeUndefined();
    expect(losses).toEqual([]);
    expect(connection.isOpen).toBe(false);
    await peer.until(() => peer.socket.readableEnded);
    expect(peer.messages.at(-1)).toEqual({ t: "release", ttl: 600 });
    expect(() => connection.send({ t: "shutdown" })).toThrow(/is closed/);
  });

  it("destroys the stream at the deadline when the worker does not close its side", async () => {
    const { worker, port } = await startWorker((peer) => {
      peer.send(welcome);
      peer.socket.allowHalfOpen = true;
    });
    const connection = await connectTo(port);
    const peer = await worker.nextPeer();
    const started = performance.now();
    await connection.close({ timeoutMs: 100 });
    // It waited for the deadline, then destroyed the stream (the peer saw its end).
    expect(performance.now() - started).toBeGreaterThanOrEqual(90);
    expect(await connection.closed).toBeUndefined();
    expect(peer.socket.readableEnded).toBe(true);
  });
});

const pythonRoot = join(import.meta.dirname, "..", "..", "python");
const hasPython =
  spawnSync("python3", ["-c", "import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)"]).status === 0;

/** Starts `python3 -m skyward.worker` as docs/protocol.md says and waits for its ready line. */
async function startPythonWorker(
  extraArgs: readonly string[] = [],
): Promise<{ port: number; child: ChildProcessWithoutNullStreams }> {
  const child = spawn(
    "python3",
    [
      "-m",
      "skyward.worker",
      "--node",
      "0",
      "--host",
      "127.0.0.1",
      "--port",
      "0",
      "--concurrency",
      "2",
      "--exit-on-stdin-eof",
      ...extraArgs,
    ],
    { env: { ...process.env, PYTHONPATH: pythonRoot, SKYWARD_TOKEN: token }, stdio: "pipe" },
  );
  cleanups.push(async () => {
    child.stdin.end();
    if (child.exitCode === null && child.signalCode === null) {
      const exited = once(child, "exit");
      const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
      await exited;
      clearTimeout(timer);
    }
  });
  let stderr = "";
  child.stderr.on("data", (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const lines = createInterface({ input: child.stdout });
  const timer = setTimeout(() => child.kill("SIGKILL"), 20_000);
  for await (const line of lines) {
    if (line.startsWith("SKYWARD_WORKER_READY ")) {
      clearTimeout(timer);
      const ready = JSON.parse(line.slice("SKYWARD_WORKER_READY ".length)) as { port: number };
      return { port: ready.port, child };
    }
  }
  clearTimeout(timer);
  throw new Error(`the worker exited without its ready line: ${stderr}`);
}

// Under CI a missing Python is a failure, not a skip.
describe.skipIf(!hasPython && !isCi())("against the Python worker", () => {
  it("completes the handshake, the cluster/ready exchange and a task with bytes and big integers", async () => {
    const { port, child } = await startPythonWorker();
    const connection = await connectTo(port, { node: 0, timeoutMs: 10_000 });
    expect(connection.welcome).toMatchObject({
      t: "welcome",
      version: 1,
      node: 0,
      pid: child.pid,
      concurrency: 2,
    });

    const general: ReceivedMessage[] = [];
    connection.onMessage((message) => general.push(message));
    connection.send({
      t: "cluster",
      node: 0,
      total_nodes: 1,
      workers_per_node: 1,
      head_addr: "127.0.0.1",
      head_port: 29500,
      job_id: "job-test",
      peers: [{ node: 0, private_ip: "127.0.0.1", public_ip: null }],
      accelerators: 0,
      accelerator: null,
      network: null,
      env: { SKYWARD_TEST: "1" },
    });
    const deadline = Date.now() + 10_000;
    while (!general.some((message) => message.t === "ready")) {
      if (Date.now() > deadline) throw new Error(`no ready; received ${JSON.stringify(general)}`);
      await sleep(10);
    }

    const results = new Map<string, ReceivedMessage>();
    const submit = (id: string, fn: string, args: WireValue[]) => {
      connection.onTask(id, (message) => {
        if (message.t === "result" || message.t === "error") results.set(id, message);
      });
      connection.send({
        t: "submit",
        id,
        fn,
        args: args as never,
        kwargs: {},
        timeout: 30,
        stream: false,
        worker: null,
      });
    };
    submit("t-bytes", "operator:add", [new Uint8Array([1, 2]), new Uint8Array([3])]);
    submit("t-big", "operator:mul", [2n ** 60n, 1024]);
    submit("t-missing", "no_such_module:f", []);
    while (results.size < 3) {
      if (Date.now() > deadline) throw new Error(`results missing; received ${JSON.stringify([...results])}`);
      await sleep(10);
    }
    expect(results.get("t-bytes")).toEqual({ t: "result", id: "t-bytes", value: new Uint8Array([1, 2, 3]) });
    expect(results.get("t-big")).toEqual({ t: "result", id: "t-big", value: 2n ** 70n });
    expect(results.get("t-missing")).toMatchObject({
      t: "error",
      id: "t-missing",
      kind: "not_found",
      node: 0,
    });
  });

  it("is rejected by the worker with a bad token", async () => {
    const { port } = await startPythonWorker();
    const error = await rejection(WorkerConnection.connect({ host: "127.0.0.1", port }, { token: "wrong" }));
    expect(ProtocolError.isInstance(error)).toBe(true);
    expect(error.message).toContain("bad token");
  });

  it("closes a connection that sends garbage, or nothing, instead of a handshake", async () => {
    const { port } = await startPythonWorker(["--handshake-timeout", "1"]);
    const closedSocket = (socket: Socket) =>
      new Promise<void>((resolve) => {
        socket.on("error", () => {});
        socket.on("close", () => resolve());
      });
    // 256 KiB of garbage: its first frame's prefix is over the pre-handshake limit, so it is refused.
    const garbage = connectSocket({ host: "127.0.0.1", port });
    const garbageClosed = closedSocket(garbage);
    garbage.write(randomFillSync(Buffer.alloc(256 * 1024)));
    await garbageClosed;
    // Silence: closed at the handshake deadline (1 s here; 10 s by default).
    const silent = connectSocket({ host: "127.0.0.1", port });
    await once(silent, "connect");
    await closedSocket(silent);
    // A client that completes the handshake is not affected.
    const connection = await connectTo(port, { node: 0, timeoutMs: 10_000 });
    await sleep(1_500);
    expect(connection.isOpen).toBe(true);
    await connection.close();
  });
});
