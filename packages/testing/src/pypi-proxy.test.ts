import { connect as tcpConnect } from "node:net";
import { connect as tlsConnect } from "node:tls";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPypiProxy, PYPI_ENDPOINTS, type PypiProxy } from "./pypi-proxy.js";
import { createTestbed, requireTestbed, type Testbed } from "./testbed.js";

const skipReason = await requireTestbed();

/** Sends `request` to the proxy and resolves with the socket and the response head it got back. */
function ask(
  proxy: PypiProxy,
  request: string,
): Promise<{ head: string; socket: import("node:net").Socket }> {
  return new Promise((resolve, reject) => {
    const socket = tcpConnect({ host: proxy.address, port: proxy.port }, () => socket.write(request));
    let received = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      const end = received.indexOf("\r\n\r\n");
      if (end === -1) return;
      socket.off("data", onData);
      socket.pause();
      resolve({ head: received.subarray(0, end).toString("latin1"), socket });
    };
    socket.on("data", onData);
    socket.once("error", reject);
    socket.once("end", () =>
      reject(new Error(`closed after ${JSON.stringify(received.toString("latin1"))}`)),
    );
  });
}

/** The status line's code of a CONNECT to `target` through the proxy; the socket is closed. */
async function connectStatus(proxy: PypiProxy, target: string): Promise<number> {
  const { head, socket } = await ask(proxy, `CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`);
  socket.destroy();
  return Number(head.split(" ")[1]);
}

describe("createPypiProxy", () => {
  let proxy: PypiProxy;

  beforeAll(async () => {
    proxy = await createPypiProxy({ address: "127.0.0.1" });
  });

  afterAll(async () => {
    await proxy?.close();
  });

  it("refuses every target but PyPI's two HTTPS endpoints with 403", async () => {
    expect(await connectStatus(proxy, "example.com:443")).toBe(403);
    expect(await connectStatus(proxy, "pypi.org:80")).toBe(403);
    expect(await connectStatus(proxy, "pypi.org:22")).toBe(403);
    expect(await connectStatus(proxy, "127.0.0.1:22")).toBe(403);
    expect(await connectStatus(proxy, "pypi.org.evil.example:443")).toBe(403);
    expect(await connectStatus(proxy, "pypi.org")).toBe(403);
    const { head, socket } = await ask(
      proxy,
      "GET http://pypi.org/simple/ HTTP/1.1\r\nHost: pypi.org\r\n\r\n",
    );
    socket.destroy();
    expect(head).toMatch(/^HTTP\/1\.1 403 /);
    expect(proxy.requests).toEqual([
      { method: "CONNECT", target: "example.com:443", allowed: false },
      { method: "CONNECT", target: "pypi.org:80", allowed: false },
      { method: "CONNECT", target: "pypi.org:22", allowed: false },
      { method: "CONNECT", target: "127.0.0.1:22", allowed: false },
      { method: "CONNECT", target: "pypi.org.evil.example:443", allowed: false },
      { method: "CONNECT", target: "pypi.org", allowed: false },
      { method: "GET", target: "http://pypi.org/simple/", allowed: false },
    ]);
  });

  it("tunnels TLS to pypi.org end to end (the certificate is PyPI's, verified here)", async () => {
    const { head, socket } = await ask(proxy, "CONNECT PyPI.org:443 HTTP/1.1\r\nHost: pypi.org:443\r\n\r\n");
    expect(head).toMatch(/^HTTP\/1\.1 200 /);
    const status = await new Promise<string>((resolve, reject) => {
      const secure = tlsConnect({ socket, servername: "pypi.org" }, () => {
        secure.write("GET /simple/pip/ HTTP/1.1\r\nHost: pypi.org\r\nConnection: close\r\n\r\n");
      });
      let text = "";
      secure.on("data", (chunk: Buffer) => {
        text += chunk.toString("latin1");
        if (text.includes("\r\n")) {
          resolve(text.slice(0, text.indexOf("\r\n")));
          secure.destroy();
        }
      });
      secure.once("error", reject);
    });
    expect(status).toMatch(/^HTTP\/1\.1 200/);
    expect(proxy.requests.at(-1)).toEqual({ method: "CONNECT", target: "PyPI.org:443", allowed: true });
  });

  it("answers 502 when an allowed target cannot be reached", async () => {
    await using closed = await createPypiProxy({ address: "127.0.0.1", allow: ["127.0.0.1:1"] });
    expect(await connectStatus(closed, "127.0.0.1:1")).toBe(502);
  });

  it("hands out the proxy variables, and needs an address to listen on", async () => {
    expect(proxy.url).toBe(`http://127.0.0.1:${proxy.port}`);
    expect(proxy.env).toEqual({
      HTTPS_PROXY: proxy.url,
      https_proxy: proxy.url,
      NO_PROXY: "localhost,127.0.0.1,::1",
      no_proxy: "localhost,127.0.0.1,::1",
    });
    expect(PYPI_ENDPOINTS).toEqual(["pypi.org:443", "files.pythonhosted.org:443"]);
    await expect(createPypiProxy({})).rejects.toThrow(/testbed .* or an address/);
  });

  it("cuts open tunnels when it closes", async () => {
    const own = await createPypiProxy({ address: "127.0.0.1" });
    const { head, socket } = await ask(own, "CONNECT pypi.org:443 HTTP/1.1\r\nHost: pypi.org:443\r\n\r\n");
    expect(head).toMatch(/^HTTP\/1\.1 200 /);
    const closed = new Promise<void>((resolve) => socket.once("close", () => resolve()));
    socket.resume();
    await own.close();
    await closed;
    await own.close();
    await expect(connectStatus(own, "pypi.org:443")).rejects.toThrow(/ECONNREFUSED/);
  });
});

describe.skipIf(skipReason !== undefined)("createPypiProxy on the test bed", () => {
  let bed: Testbed;
  let proxy: PypiProxy;

  beforeAll(async () => {
    bed = await createTestbed({ hosts: 1 });
    proxy = await createPypiProxy({ testbed: bed });
  });

  afterAll(async () => {
    await proxy?.close();
    await bed?.teardown();
  });

  it("listens on the bridge and exempts the bed's hosts and subnet", () => {
    expect(proxy.address).toBe(bed.bridgeAddress);
    expect(proxy.env.no_proxy).toBe(`localhost,127.0.0.1,::1,${bed.hosts[0]?.host},${bed.subnet}`);
  });

  it("lets a host's pip download from PyPI, which it cannot reach without the proxy", async () => {
    const pip = (env: Readonly<Record<string, string>>) =>
      bed.exec(
        0,
        [
          "env",
          "-u",
          "PIP_FIND_LINKS",
          ...Object.entries(env).map(([name, value]) => `${name}=${value}`),
          "PIP_DEFAULT_TIMEOUT=10",
          "/usr/bin/python3",
          "-m",
          "pip",
          "download",
          "--no-cache-dir",
          "--no-deps",
          "--retries",
          "0",
          "--dest",
          `${bed.directory}/downloads`,
          "six==1.16.0",
        ],
        { timeoutMs: 120_000 },
      );
    const without = await pip({});
    expect(without.exitCode).not.toBe(0);
    const through = await pip(proxy.env);
    expect(through.stderr + through.stdout).toMatch(/Saved .*six-1\.16\.0/);
    expect(through.exitCode).toBe(0);
    const targets = new Set(proxy.requests.map((request) => `${request.target} ${request.allowed}`));
    expect(targets).toEqual(new Set(["pypi.org:443 true", "files.pythonhosted.org:443 true"]));
  });

  it("refuses a host anything else with 403", async () => {
    const result = await bed.exec(
      0,
      [
        "/usr/bin/python3",
        "-c",
        [
          "import sys, urllib.request",
          `opener = urllib.request.build_opener(urllib.request.ProxyHandler({"https": "${proxy.url}"}))`,
          "try:",
          "    opener.open('https://example.com/', timeout=10)",
          "except OSError as error:",
          "    print(error)",
          "    sys.exit(3)",
        ].join("\n"),
      ],
      { timeoutMs: 60_000 },
    );
    expect(result.exitCode).toBe(3);
    expect(result.stdout).toMatch(/Tunnel connection failed: 403/);
    expect(proxy.requests.at(-1)).toEqual({ method: "CONNECT", target: "example.com:443", allowed: false });
  });
});
