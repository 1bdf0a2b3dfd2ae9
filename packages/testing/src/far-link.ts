/**
 * The far link: a delaying TCP proxy put in front of a test-bed host's sshd so that the client's
 * link to that host is slow (a laptop 20–150 ms from its cloud region) while the hosts still reach
 * each other directly over the test bed's bridge. The kernel here has no `netem`, so the delay is
 * made in userspace: every chunk read from one side is released to the other `delayMs` later, in
 * order, and with a bandwidth cap no sooner than the link could have carried the bytes before it.
 */
import { createServer, type Server, type Socket, connect as tcpConnect } from "node:net";
import type { Testbed, TestbedHost, TestbedSshHostInput, TestbedSshHostsOptions } from "./testbed.js";
import { testbedSshHost } from "./testbed.js";

/** Options of {@link startFarLink}. */
export interface FarLinkOptions {
  /** Where the proxy forwards to (a host's sshd). */
  target: { host: string; port: number };
  /** The one-way delay added to each direction, in milliseconds (≥ 0). A round trip costs twice this. */
  delayMs: number;
  /** A cap on each direction's throughput in bytes per second; unset: no cap. */
  bytesPerSecond?: number;
  /** The address the proxy listens on (default `127.0.0.1`); it picks a free port. */
  listenHost?: string;
}

/** A running far link; dispose it (`await using`) or call {@link FarLink.close}. */
export interface FarLink extends AsyncDisposable {
  /** The address to connect to instead of the target. */
  host: string;
  /** The port the proxy listens on. */
  port: number;
  /** Bytes carried so far, client → target and target → client. */
  bytes(): { toTarget: number; fromTarget: number };
  /** Stops listening and ends every connection it carries. */
  close(): Promise<void>;
}

interface Pending {
  chunk: Buffer;
  releaseAt: number;
}

/** How much may wait in one direction before the proxy stops reading the sender (TCP pushes back). */
const HIGH_WATER_BYTES = 8 * 1024 * 1024;

/**
 * One direction of one connection: chunks wait in a queue released by a single timer, so order
 * holds whatever the timer wheel does with timers of different lengths.
 */
class DelayedPipe {
  private readonly queue: Pending[] = [];
  private timer: NodeJS.Timeout | undefined;
  /** When the link is next free to start sending (the bandwidth cap serialises chunks). */
  private linkFreeAt = 0;
  private ended = false;
  /** Bytes waiting in the queue. */
  queuedBytes = 0;

  constructor(
    private readonly to: Socket,
    private readonly delayMs: number,
    private readonly bytesPerSecond: number | undefined,
    private readonly count: (bytes: number) => void,
    /** Called after a release that left the queue at or below half the high water mark. */
    private readonly drained: () => void,
  ) {}

  push(chunk: Buffer): void {
    const now = performance.now();
    let sentAt = now;
    if (this.bytesPerSecond !== undefined) {
      const start = Math.max(now, this.linkFreeAt);
      this.linkFreeAt = start + (chunk.length * 1000) / this.bytesPerSecond;
      sentAt = this.linkFreeAt;
    }
    this.queue.push({ chunk, releaseAt: sentAt + this.delayMs });
    this.queuedBytes += chunk.length;
    this.schedule();
  }

  /** The source ended: end the destination once what is queued has gone through. */
  end(): void {
    this.ended = true;
    this.schedule();
  }

  stop(): void {
    clearTimeout(this.timer);
    this.queue.length = 0;
    this.queuedBytes = 0;
  }

  private schedule(): void {
    if (this.timer !== undefined) return;
    const head = this.queue[0];
    if (head === undefined) {
      if (this.ended && !this.to.destroyed) this.to.end();
      return;
    }
    this.timer = setTimeout(() => this.release(), Math.max(0, head.releaseAt - performance.now()));
  }

  private release(): void {
    this.timer = undefined;
    const now = performance.now();
    while (this.queue.length > 0 && (this.queue[0] as Pending).releaseAt <= now + 0.5) {
      const { chunk } = this.queue.shift() as Pending;
      this.queuedBytes -= chunk.length;
      if (this.to.destroyed) continue;
      this.to.write(chunk);
      this.count(chunk.length);
    }
    if (this.queuedBytes <= HIGH_WATER_BYTES / 2) this.drained();
    this.schedule();
  }
}

function pipeWithDelay(
  from: Socket,
  to: Socket,
  options: FarLinkOptions,
  count: (bytes: number) => void,
): DelayedPipe {
  const pipe = new DelayedPipe(to, options.delayMs, options.bytesPerSecond, count, () => {
    if (from.isPaused()) from.resume();
  });
  from.on("data", (chunk: Buffer) => {
    pipe.push(chunk);
    if (pipe.queuedBytes > HIGH_WATER_BYTES) from.pause();
  });
  from.on("end", () => pipe.end());
  return pipe;
}

/**
 * Starts a delaying TCP proxy to `options.target`. Each connection to it opens one to the target;
 * bytes each way are held `delayMs` (and paced by `bytesPerSecond` when set).
 *
 * @example
 * ```ts
 * import { startFarLink } from "@skyward/testing";
 *
 * await using link = await startFarLink({ target: { host: "10.213.9.2", port: 22 }, delayMs: 20 });
 * // ssh -p link.port root@link.host: every round trip now costs at least 40 ms
 * ```
 */
export async function startFarLink(options: FarLinkOptions): Promise<FarLink> {
  if (!Number.isFinite(options.delayMs) || options.delayMs < 0) {
    throw new RangeError(`delayMs: expected a number ≥ 0, received ${String(options.delayMs)}`);
  }
  if (
    options.bytesPerSecond !== undefined &&
    (!Number.isFinite(options.bytesPerSecond) || options.bytesPerSecond <= 0)
  ) {
    throw new RangeError(`bytesPerSecond: expected a number > 0, received ${String(options.bytesPerSecond)}`);
  }
  const listenHost = options.listenHost ?? "127.0.0.1";
  const totals = { toTarget: 0, fromTarget: 0 };
  const connections = new Set<Socket>();
  const pipes = new Set<DelayedPipe>();
  const server: Server = createServer((client) => {
    client.setNoDelay(true);
    const upstream = tcpConnect({ host: options.target.host, port: options.target.port });
    upstream.setNoDelay(true);
    connections.add(client);
    connections.add(upstream);
    const up = pipeWithDelay(client, upstream, options, (bytes) => {
      totals.toTarget += bytes;
    });
    const down = pipeWithDelay(upstream, client, options, (bytes) => {
      totals.fromTarget += bytes;
    });
    pipes.add(up);
    pipes.add(down);
    const finish = (): void => {
      up.stop();
      down.stop();
      pipes.delete(up);
      pipes.delete(down);
      client.destroy();
      upstream.destroy();
      connections.delete(client);
      connections.delete(upstream);
    };
    // An error or a reset on either side ends both: a far link drops, it does not half-fail.
    client.on("error", finish);
    upstream.on("error", finish);
    client.on("close", finish);
    upstream.on("close", finish);
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, listenHost, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("the far link has no TCP port");
  let closing: Promise<void> | undefined;
  const close = (): Promise<void> => {
    closing ??= new Promise<void>((resolve) => {
      for (const pipe of pipes) pipe.stop();
      for (const socket of connections) socket.destroy();
      server.close(() => resolve());
    });
    return closing;
  };
  return {
    host: listenHost,
    port: address.port,
    bytes: () => ({ ...totals }),
    close,
    [Symbol.asyncDispose]: close,
  };
}

/** Options of {@link testbedFarHosts}. */
export interface TestbedFarHostsOptions extends Omit<TestbedSshHostsOptions, "indices"> {
  /** The one-way delay of each client link, in milliseconds. */
  delayMs: number;
  /** A cap on each client link's throughput per direction, in bytes per second. */
  bytesPerSecond?: number;
}

/** The test bed's hosts reached through far links; dispose it to close the links. */
export interface TestbedFarHosts extends AsyncDisposable {
  /** `SSH({ hosts })` entries: the link's address and port, the host's own address as `privateIp`. */
  hosts: Array<TestbedSshHostInput & { privateIp: string }>;
  /** One link per host, in order. */
  links: readonly FarLink[];
  /** Bytes through every link together. */
  bytes(): { toTarget: number; fromTarget: number };
  close(): Promise<void>;
}

/**
 * Puts a far link in front of every host's sshd. The client reaches each host through its link;
 * the hosts keep their bridge addresses as `privateIp`, so traffic between them stays direct.
 */
export async function testbedFarHosts(
  testbed: Pick<Testbed, "hosts" | "bridgeAddress">,
  options: TestbedFarHostsOptions,
): Promise<TestbedFarHosts> {
  const { delayMs, bytesPerSecond, ...hostOptions } = options;
  const links: FarLink[] = [];
  try {
    for (const host of testbed.hosts) {
      links.push(
        await startFarLink({
          target: { host: host.host, port: host.port },
          delayMs,
          ...(bytesPerSecond === undefined ? {} : { bytesPerSecond }),
        }),
      );
    }
  } catch (error) {
    await Promise.all(links.map((link) => link.close()));
    throw error;
  }
  const close = async (): Promise<void> => {
    await Promise.all(links.map((link) => link.close()));
  };
  return {
    hosts: testbed.hosts.map((host: TestbedHost, index) => {
      const link = links[index] as FarLink;
      return {
        ...testbedSshHost(host, hostOptions),
        host: link.host,
        port: link.port as 22,
        privateIp: host.host,
      };
    }),
    links,
    bytes: () =>
      links.reduce(
        (total, link) => {
          const each = link.bytes();
          return { toTarget: total.toTarget + each.toTarget, fromTarget: total.fromTarget + each.fromTarget };
        },
        { toTarget: 0, fromTarget: 0 },
      ),
    close,
    [Symbol.asyncDispose]: close,
  };
}
