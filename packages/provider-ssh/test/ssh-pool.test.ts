/**
 * Multi-node pools over SSH, end to end on the test bed: real sshd hosts in network namespaces,
 * the real SSH transport, bootstrap, tunnels and the Python worker.
 */
import { execFileSync, spawn } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { basename } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";
import { stopWorkerCommand } from "@skyward/ssh";
import {
  createTestbed,
  eventually,
  requireTestbed,
  type ScratchSkywardHome,
  type Testbed,
  testbedSshHosts,
  useScratchSkywardHome,
} from "@skyward/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SSH } from "../src/index.js";
import { alive } from "./processes.js";

const skipReason = await requireTestbed();
const argvTool = fileURLToPath(new URL("./fixtures/tools", import.meta.url));
const tasks = fileURLToPath(new URL("./fixtures/ssh_tasks.py", import.meta.url));
const data = fileURLToPath(new URL("./fixtures/ssh_tasks_data", import.meta.url));

const info = sky.python<
  [],
  {
    node: number;
    total_nodes: number;
    is_head: boolean;
    head_addr: string;
    peers: string[];
    pid: number;
    cwd: string;
  }
>("ssh_tasks:info");
const myShard = sky.python<[number], number[]>("ssh_tasks:my_shard");
const readData = sky.python<[string], string>("ssh_tasks:read_data");
const probeValue = sky.python<[], number>("ssh_tasks:probe_value");
const sleep = sky.python<[number], number>("ssh_tasks:sleep");
const pid = sky.python<[], number>("ssh_tasks:pid");

/** Builds a tiny wheel by hand (a zip with its dist-info), for the local package index. */
function buildWheel(directory: string): string {
  const script = `
import base64, hashlib, sys, zipfile
path = sys.argv[1] + "/skyward_wheel_probe-0.1-py3-none-any.whl"
files = {
    "skyward_wheel_probe/__init__.py": "VALUE = 42\\n",
    "skyward_wheel_probe-0.1.dist-info/METADATA": "Metadata-Version: 2.1\\nName: skyward-wheel-probe\\nVersion: 0.1\\n",
    "skyward_wheel_probe-0.1.dist-info/WHEEL": "Wheel-Version: 1.0\\nGenerator: hand\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n",
}
record = []
with zipfile.ZipFile(path, "w") as archive:
    for name, text in files.items():
        data = text.encode()
        archive.writestr(name, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append("skyward_wheel_probe-0.1.dist-info/RECORD,,")
    archive.writestr("skyward_wheel_probe-0.1.dist-info/RECORD", "\\n".join(record) + "\\n")
print(path)
`;
  return execFileSync("python3", ["-c", script, directory], { encoding: "utf8" }).trim();
}

/** A PEP 503 "simple" index serving one wheel, on the bridge address (reachable from every host). */
async function serveIndex(
  address: string,
  wheelPath: string,
): Promise<{ url: string; server: Server; requests: string[] }> {
  const { readFile } = await import("node:fs/promises");
  const wheel = await readFile(wheelPath);
  const name = basename(wheelPath);
  const requests: string[] = [];
  const server = createServer((request, response) => {
    requests.push(request.url ?? "");
    if (request.url === "/simple/skyward-wheel-probe/") {
      response.setHeader("content-type", "text/html");
      response.end(`<html><body><a href="/files/${name}">${name}</a></body></html>`);
    } else if (request.url === `/files/${name}`) {
      response.setHeader("content-type", "application/octet-stream");
      response.end(wheel);
    } else {
      response.statusCode = 404;
      response.end();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, address, resolve));
  const port = (server.address() as { port: number }).port;
  return { url: `http://${address}:${port}/simple`, server, requests };
}

describe.skipIf(skipReason !== undefined)("pools over SSH on a 3-host test bed", () => {
  let bed: Testbed;
  let home: ScratchSkywardHome | undefined;
  let index: { url: string; server: Server; requests: string[] };

  const provider = () => SSH({ hosts: testbedSshHosts(bed) });

  beforeAll(async () => {
    bed = await createTestbed({ hosts: 3 });
    home = await useScratchSkywardHome("skyward-ssh-e2e-");
    index = await serveIndex(bed.bridgeAddress, buildWheel(home.path));
  }, 120_000);

  afterAll(async () => {
    index?.server.close();
    await bed?.teardown();
    await home?.restore();
  });

  it("runs on 3 distinct nodes with their private addresses and one head; shards, includes and a scoped index work", async () => {
    const phases: string[] = [];
    let pids: number[] = [];
    {
      await using pool = await sky.compute({
        provider: provider(),
        nodes: 3,
        ttl: 30,
        image: {
          includes: [tasks, data],
          pip: ["skyward-wheel-probe"],
          pipIndexes: [{ url: index.url, packages: ["skyward-wheel-probe"] }],
        },
        options: { console: false, bootstrapTimeout: 240 },
      });
      const infos = await pool.broadcast(info());
      expect(infos.map((entry) => entry.node)).toEqual([0, 1, 2]);
      expect(infos.filter((entry) => entry.is_head).map((entry) => entry.node)).toEqual([0]);
      expect(infos[0]?.peers).toEqual(bed.hosts.map((host) => host.host));
      expect(new Set(infos.map((entry) => entry.head_addr))).toEqual(new Set([bed.hosts[0]?.host]));
      expect(infos.map((entry) => entry.cwd)).toEqual(bed.hosts.map((host) => `${host.root}/work`));
      pids = infos.map((entry) => entry.pid);

      const parts = await pool.broadcast(myShard(100));
      expect(parts.flat().sort((a, b) => a - b)).toEqual(Array.from({ length: 100 }, (_, i) => i));
      expect(parts.every((part) => part.length > 0)).toBe(true);

      expect(await pool.broadcast(readData("greeting.txt"))).toEqual(
        Array(3).fill("hello from the client machine\n"),
      );
      expect(await pool.broadcast(probeValue())).toEqual([42, 42, 42]);
      expect(index.requests).toContain("/simple/skyward-wheel-probe/");
    }

    // A second pool on the same hosts, within the first one's TTL, starts warm.
    await using again = await sky.compute({
      provider: provider(),
      nodes: 3,
      ttl: 0,
      image: {
        includes: [tasks, data],
        pip: ["skyward-wheel-probe"],
        pipIndexes: [{ url: index.url, packages: ["skyward-wheel-probe"] }],
      },
      options: { console: false },
    });
    again.on("bootstrap.phase", (event) => phases.push(event.phase));
    const second = await again.broadcast(info());
    expect(second.map((entry) => entry.pid)).toEqual(pids);
    expect(await again.broadcast(probeValue())).toEqual([42, 42, 42]);
  }, 300_000);

  // Without their fingerprints: these pools trust the host keys on first use (known_hosts in the
  // scratch SKYWARD_HOME), the path a user who gives none takes.
  const hostInputs = (indices: number[]) => testbedSshHosts(bed, { indices, pinHostKey: false });

  it("released workers wait out their TTL, then stop and clean their root directory, keeping the environment", async () => {
    const pool = await sky.compute({
      provider: SSH({ hosts: hostInputs([1]) }),
      nodes: 1,
      ttl: 2,
      image: { includes: [tasks] },
      options: { console: false },
    });
    const [workerPid] = await pool.broadcast(pid());
    await pool.close();
    expect(alive(workerPid as number)).toBe(true);
    expect(await eventually(() => !alive(workerPid as number), 20_000)).toBe(true);
    const root = bed.hosts[1]?.root as string;
    // What the pool left is gone (env.sh holds the image's env, worker.token the pool's token)…
    for (const gone of ["env.sh", "worker.token", "worker.pid", "work", "bootstrap.sh", "bootstrap.log"])
      expect(existsSync(`${root}/${gone}`)).toBe(false);
    // …and the environment stays for a later pool with the same image to start warm, with the runtime
    // (a later pool with the same one does not unpack it again).
    expect(existsSync(`${root}/venv/bin/python`)).toBe(true);
    expect(existsSync(`${root}/runtime/skyward_worker.py`)).toBe(true);
    expect(existsSync(`${root}/.content-hash`)).toBe(true);
  }, 120_000);

  it("a later pool with the same code reattaches to a released worker; one whose tunnel does not open is replaced", async () => {
    const open = async () => {
      const phases: string[] = [];
      const pool = await sky.compute(
        {
          provider: SSH({ hosts: hostInputs([2]) }),
          nodes: 1,
          ttl: 60,
          image: { includes: [tasks] },
          options: { console: false },
        },
        {
          onEvent: (event) => {
            if (event.type === "bootstrap.phase" && event.status === "finished") phases.push(event.phase);
          },
        },
      );
      return { pool, phases };
    };
    const root = bed.hosts[2]?.root as string;
    const first = await open();
    const [firstPid] = await first.pool.broadcast(pid());
    await first.pool.close();
    expect(alive(firstPid as number)).toBe(true);

    // The node finds the released worker in the launch's one session (the files sent are drained).
    const second = await open();
    try {
      expect(await second.pool.broadcast(pid())).toEqual([firstPid]);
      expect(second.phases).toContain("reattach");
      expect(second.phases).not.toContain("warm-check");
    } finally {
      await second.pool.close();
    }

    // Its record names a port nothing listens on: the tunnel fails, the launch starts a new worker
    // (stopping the old one) in a second session.
    const record = JSON.parse(readFileSync(`${root}/worker.json`, "utf8")) as { port: number };
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const unused = (closed.address() as { port: number }).port;
    await new Promise((resolve) => closed.close(resolve));
    writeFileSync(`${root}/worker.json`, JSON.stringify({ ...record, port: unused }));
    const third = await open();
    try {
      const [thirdPid] = await third.pool.broadcast(pid());
      expect(thirdPid).not.toBe(firstPid);
      expect(third.phases).not.toContain("reattach");
      expect(third.phases).toEqual(expect.arrayContaining(["upload", "warm-check", "worker"]));
      expect(await eventually(() => !alive(firstPid as number), 10_000)).toBe(true);
    } finally {
      await third.pool.close();
    }
    // Stopped here rather than after its TTL.
    execFileSync("sh", ["-c", stopWorkerCommand(root)]);
  }, 120_000);

  it("after a SIGKILL of the client, every worker stops once its TTL has passed", async () => {
    const child = spawn(
      process.execPath,
      [fileURLToPath(new URL("./fixtures/ssh-client.ts", import.meta.url))],
      {
        stdio: ["ignore", "pipe", "inherit"],
        env: {
          ...process.env,
          SKYWARD_TEST_HOSTS: JSON.stringify(hostInputs([1, 2])),
          SKYWARD_TEST_TTL: "2",
        },
      },
    );
    const exited = new Promise((resolve) => child.once("exit", resolve));
    const pids = await new Promise<number[]>((resolve, reject) => {
      createInterface({ input: child.stdout }).once("line", (line) =>
        resolve((JSON.parse(line) as { pids: number[] }).pids),
      );
      child.once("exit", () => reject(new Error("the client exited before its pool was ready")));
    });
    expect(pids).toHaveLength(2);
    child.kill("SIGKILL");
    await exited;
    expect(pids.every(alive)).toBe(true);
    expect(await eventually(() => pids.every((workerPid) => !alive(workerPid)), 30_000)).toBe(true);
  }, 180_000);

  it("a connection killed mid-task gives a clear error, never a hang, and the pool recovers", async () => {
    await using pool = await sky.compute({
      provider: SSH({ hosts: hostInputs([2]) }),
      nodes: 1,
      ttl: 0,
      image: { includes: [tasks] },
      options: { console: false },
    });
    const running = pool.run(sleep(20));
    await new Promise((resolve) => setTimeout(resolve, 500));
    // Kill the sshd session carrying this client's connection, inside host 2's namespace.
    const sessions = await bed.exec(2, "ss -tnpH state established '( sport = :22 )'");
    const sessionPids = [...sessions.stdout.matchAll(/pid=(\d+)/g)].map((match) => Number(match[1]));
    expect(sessionPids.length).toBeGreaterThan(0);
    for (const sessionPid of sessionPids) process.kill(sessionPid, "SIGKILL");
    const outcome = await Promise.race([
      running.then(
        () => "result",
        (error: unknown) =>
          sky.WorkerDiedError.isInstance(error) || sky.ConnectionError.isInstance(error)
            ? "clear error"
            : String(error),
      ),
      new Promise((resolve) => setTimeout(() => resolve("hang"), 60_000)),
    ]);
    expect(["clear error", "result"]).toContain(outcome);
    expect(await eventually(() => pool.currentNodes() === 1, 60_000)).toBe(true);
    expect(typeof (await pool.run(pid()))).toBe("number");
  }, 180_000);

  it("runs commands and shipped scripts as tasks on every host: output, exit codes, exact arguments", async () => {
    await using pool = await sky.compute({
      provider: SSH({ hosts: hostInputs([0, 1]) }),
      nodes: 2,
      ttl: 0,
      image: { includes: [argvTool] },
      options: { console: false },
    });
    const hosts = await pool.broadcast(sky.shell("hostname -I | cut -d' ' -f1"));
    expect(hosts.map((result) => result.stdout.trim()).sort()).toEqual(
      [bed.hosts[0]?.host, bed.hosts[1]?.host].sort(),
    );
    // Shipped in a directory of includes, the script keeps its execute bit and gets its argv exactly.
    const argv = await pool.run(sky.script("tools/argv_tool.sh", ["a b", "$HOME", "'q'", ""]));
    expect(argv.stdout).toBe("[a b]\n[$HOME]\n['q']\n[]\n");
    const failed = await pool.run(sky.shell("echo going; exit 3")).catch((error: unknown) => error);
    expect(sky.CommandFailedError.isInstance(failed)).toBe(true);
    expect(failed).toMatchObject({ exitCode: 3 });
    expect((failed as sky.CommandFailedError).outputTail).toContain("going");
  }, 180_000);
});
