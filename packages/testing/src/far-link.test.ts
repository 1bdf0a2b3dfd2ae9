import { once } from "node:events";
import { createServer, type Server, type Socket, connect as tcpConnect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFarLink, testbedFarHosts } from "./far-link.js";
import { createTestbed, requireTestbed, type Testbed } from "./testbed.js";

/** A TCP echo server on 127.0.0.1: every byte comes straight back. */
async function startEcho(): Promise<{ server: Server; port: number }> {
  const server = createServer((socket) => socket.pipe(socket));
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("no port");
  return { server, port: address.port };
}

async function connected(port: number): Promise<Socket> {
  const socket = tcpConnect({ host: "127.0.0.1", port });
  socket.setNoDelay(true);
  await once(socket, "connect");
  return socket;
}

/** Milliseconds from writing `payload` until all of it has come back. */
async function roundTripMs(socket: Socket, payload: Buffer): Promise<{ ms: number; echoed: Buffer }> {
  const parts: Buffer[] = [];
  let received = 0;
  const started = performance.now();
  const done = new Promise<void>((resolve) => {
    const onData = (chunk: Buffer): void => {
      parts.push(chunk);
      received += chunk.length;
      if (received >= payload.length) {
        socket.off("data", onData);
        resolve();
      }
    };
    socket.on("data", onData);
  });
  socket.write(payload);
  await done;
  return { ms: performance.now() - started, echoed: Buffer.concat(parts) };
}

describe("startFarLink", () => {
  let echo: { server: Server; port: number };
  beforeAll(async () => {
    echo = await startEcho();
  });
  afterAll(() => {
    echo.server.close();
  });

  it("delays each direction: a round trip through it takes at least twice the delay, a direct one does not", async () => {
    const delayMs = 60;
    await using link = await startFarLink({ target: { host: "127.0.0.1", port: echo.port }, delayMs });
    const far = await connected(link.port);
    const near = await connected(echo.port);
    try {
      const viaLink = await roundTripMs(far, Buffer.from("ping"));
      const direct = await roundTripMs(near, Buffer.from("ping"));
      expect(viaLink.echoed.toString()).toBe("ping");
      expect(viaLink.ms).toBeGreaterThanOrEqual(2 * delayMs - 1);
      expect(direct.ms).toBeLessThan(viaLink.ms);
      expect(link.bytes()).toEqual({ toTarget: 4, fromTarget: 4 });
    } finally {
      far.destroy();
      near.destroy();
    }
  });

  it("keeps the order of many chunks written back to back", async () => {
    await using link = await startFarLink({ target: { host: "127.0.0.1", port: echo.port }, delayMs: 5 });
    const socket = await connected(link.port);
    try {
      const payload = Buffer.from(Array.from({ length: 5000 }, (_, index) => `${index},`).join(""));
      const parts: Buffer[] = [];
      let received = 0;
      const done = new Promise<void>((resolve) => {
        socket.on("data", (chunk: Buffer) => {
          parts.push(chunk);
          received += chunk.length;
          if (received >= payload.length) resolve();
        });
      });
      for (let offset = 0; offset < payload.length; offset += 7)
        socket.write(payload.subarray(offset, offset + 7));
      await done;
      expect(Buffer.concat(parts).equals(payload)).toBe(true);
    } finally {
      socket.destroy();
    }
  });

  it("carries more than it may hold at once: it stops reading the sender and resumes as it releases", async () => {
    await using link = await startFarLink({ target: { host: "127.0.0.1", port: echo.port }, delayMs: 30 });
    const socket = await connected(link.port);
    try {
      // 20 MiB written at once is more than the 8 MiB one direction holds before it pauses its sender.
      const payload = Buffer.alloc(20 * 1024 * 1024);
      for (let offset = 0; offset < payload.length; offset += 4) payload.writeUInt32LE(offset, offset);
      const { echoed } = await roundTripMs(socket, payload);
      expect(echoed.equals(payload)).toBe(true);
      expect(link.bytes()).toEqual({ toTarget: payload.length, fromTarget: payload.length });
    } finally {
      socket.destroy();
    }
  });

  it("paces bytes to the bandwidth cap", async () => {
    const bytesPerSecond = 2 * 1024 * 1024;
    await using link = await startFarLink({
      target: { host: "127.0.0.1", port: echo.port },
      delayMs: 0,
      bytesPerSecond,
    });
    const socket = await connected(link.port);
    try {
      const payload = Buffer.alloc(512 * 1024, 7);
      const { ms, echoed } = await roundTripMs(socket, payload);
      expect(echoed.equals(payload)).toBe(true);
      // Half a MiB each way at 2 MiB/s: a quarter second at least (the two directions overlap).
      expect(ms).toBeGreaterThanOrEqual(250 - 1);
    } finally {
      socket.destroy();
    }
  });

  it("refuses a negative delay and a bandwidth cap of zero, naming the field", async () => {
    const target = { host: "127.0.0.1", port: echo.port };
    await expect(startFarLink({ target, delayMs: -1 })).rejects.toThrow(/delayMs/);
    await expect(startFarLink({ target, delayMs: 1, bytesPerSecond: 0 })).rejects.toThrow(/bytesPerSecond/);
  });
});

const skipReason = await requireTestbed();

// Times one echo round trip from inside a namespace, so host-to-host is measured where it happens.
const ECHO_CLIENT = `
import socket, sys, time
s = socket.create_connection((sys.argv[1], int(sys.argv[2])))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
t = time.perf_counter(); s.sendall(b"ping"); got = b""
while len(got) < 4: got += s.recv(4)
print((time.perf_counter() - t) * 1000)
`;
const ECHO_SERVER = `
import socket
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); l.bind(("0.0.0.0", 7007)); l.listen()
while True:
    c, _ = l.accept()
    while (d := c.recv(65536)): c.sendall(d)
    c.close()
`;

describe.skipIf(skipReason !== undefined)("testbedFarHosts", () => {
  let bed: Testbed;
  beforeAll(async () => {
    bed = await createTestbed({ hosts: 2 });
    await bed.exec(1, ["sh", "-c", `/usr/bin/python3 -c '${ECHO_SERVER}' >/dev/null 2>&1 &`]);
  }, 90_000);
  afterAll(async () => {
    await bed?.teardown();
  });

  it("slows only the client's link: through the link ≥ 2×delay, host to host stays direct", async () => {
    const delayMs = 100;
    await using far = await testbedFarHosts(bed, { delayMs });
    const host1 = bed.hosts[1];
    if (host1 === undefined) throw new Error("no host 1");
    expect(far.hosts[1]).toMatchObject({ host: "127.0.0.1", privateIp: host1.host, root: host1.root });
    // The SSH banner comes from sshd through the link: the client sees it no sooner than one delay.
    const started = performance.now();
    const banner = await connected(far.hosts[1]?.port as number);
    const [first] = (await once(banner, "data")) as [Buffer];
    const bannerMs = performance.now() - started;
    banner.destroy();
    expect(first.toString()).toMatch(/^SSH-2\.0-/);
    expect(bannerMs).toBeGreaterThanOrEqual(delayMs - 1);

    // Host 0 reaches host 1's echo directly over the bridge: no delay on the way.
    let hostToHostMs = Number.NaN;
    for (let attempt = 0; attempt < 50 && Number.isNaN(hostToHostMs); attempt += 1) {
      const result = await bed.exec(0, ["/usr/bin/python3", "-c", ECHO_CLIENT, host1.host, "7007"]);
      if (result.exitCode === 0) hostToHostMs = Number(result.stdout.trim());
      else await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(hostToHostMs).toBeLessThan(2 * delayMs);
    expect(hostToHostMs).toBeLessThan(bannerMs);
  }, 60_000);
});
