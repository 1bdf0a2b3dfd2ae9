/**
 * The far client (issue 28): 2 test-bed SSH hosts reached through far links (a delaying proxy in
 * front of each sshd, `--delay` ms each way, 20 by default) while the hosts reach each other
 * directly. Prints each figure beside its floor measured in the same run: strong counter increment
 * and lock acquire + release in a task on node 0 (the head) and on node 1, and a 2-node barrier
 * round (floor: one host-to-host round trip; a lock cycle is two writes), `map` of
 * no-op tasks (floor: the same hosts without the delay), a 32 MiB `RemoteRef` made on node 0
 * and used on node 1 (floor: no bytes through the client; it moves node to node), a broadcast of a
 * 32 MiB argument to both nodes (floor: the argument once through the client), and guide 10's
 * nested fan-out (floor: its efficiency on the same hosts without the delay). Figures are printed,
 * never asserted.
 *
 *     pnpm -s turbo run build --filter @skyward/provider-ssh...
 *     node packages/provider-ssh/bench/far-client.ts [--delay 20] [--tasks 2000] [--ops 1000]
 *
 * `SKYWARD_COLLECTIONS_SPIN_US` set in the client's environment goes to the workers (their image's
 * env), as Local workers inherit it.
 */
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import * as sky from "@skyward/core";
import {
  createTestbed,
  requireTestbed,
  type TestbedFarHosts,
  testbedFarHosts,
  testbedSshHosts,
  useScratchSkywardHome,
} from "@skyward/testing";
import { SSH } from "../dist/index.js";
import { collectionsSpinEnv } from "./worker-env.ts";

const { values: flags } = parseArgs({
  options: {
    delay: { type: "string", default: "20" },
    tasks: { type: "string", default: "2000" },
    ops: { type: "string", default: "1000" },
  },
});
const delayMs = Number(flags.delay);
const tasks = Number(flags.tasks);
const ops = Number(flags.ops);
const REF_MIB = 32;

const tasksFile = fileURLToPath(new URL("./far_tasks.py", import.meta.url));
const noopFile = fileURLToPath(new URL("../../core/bench/bench_tasks.py", import.meta.url));
const increments = sky.python<[number], number>("far_tasks:increments");
const lockCycles = sky.python<[number], number>("far_tasks:lock_cycles");
const barrierRounds = sky.python<[number], number>("far_tasks:barrier_rounds");
const startEcho = sky.python<[number], number>("far_tasks:start_echo");
const peerRoundTrip = sky.python<[string, number, number], number>("far_tasks:peer_round_trip");
const blob = sky.python<[number], Uint8Array>("far_tasks:blob");
const sizeOf = sky.python<[sky.RemoteRef<Uint8Array>], number>("far_tasks:size_of");
const lengthOf = sky.python<[Uint8Array], number>("far_tasks:size_of");
const nestedFanOut = sky.python<
  [items: number, seconds: number],
  { slots: number; wall: number; ideal: number }
>("far_tasks:nested_fan_out");
const NESTED_ITEMS = 32;
const NESTED_SECONDS = 0.2;
const noop = sky.python<[], null>("bench_tasks:noop");

function median(values: readonly number[]): number {
  const ordered = [...values].sort((a, b) => a - b);
  return ordered[Math.floor(ordered.length / 2)] ?? Number.NaN;
}

/** `value / floor` with one decimal: 3.3×, not a rounded 3× that reads as a bound met. */
function times(value: number, floor: number): string {
  return `${(value / floor).toFixed(1)}×`;
}

/** The median of 3 runs of a task timing `ops` operations (ms per operation), after a warm-up of 3. */
async function medianOf3(
  pool: sky.Pool,
  task: sky.PythonFunction<[number], number>,
  node: number,
): Promise<number> {
  await pool.run(task(3), { target: node });
  const runs: number[] = [];
  for (let run = 0; run < 3; run += 1) runs.push(await pool.run(task(ops), { target: node }));
  return median(runs);
}

function mebibytes(bytes: number): string {
  return bytes < 2 ** 20 ? `${(bytes / 1024).toFixed(1)} KiB` : `${(bytes / 2 ** 20).toFixed(1)} MiB`;
}

/** Guide 10's nested fan-out (see far_tasks.py): efficiency, ideal over measured, after a warm-up. */
async function nestedEfficiency(pool: sky.Pool): Promise<number> {
  await pool.run(nestedFanOut(4, 0.01), { target: 0 });
  const { wall, ideal } = await pool.run(nestedFanOut(NESTED_ITEMS, NESTED_SECONDS), { target: 0 });
  return ideal / wall;
}

function progress(line: string): void {
  process.stderr.write(`far-client: ${line}\n`);
}

async function openPool(hosts: Parameters<typeof SSH>[0]["hosts"]): Promise<sky.Pool> {
  return sky.compute({
    provider: SSH({ hosts }),
    nodes: 2,
    ttl: 0,
    image: { includes: [tasksFile, noopFile], env: collectionsSpinEnv() },
    options: { console: false, bootstrapTimeout: 300 },
  });
}

/** Tasks per second of `pool.map` over `tasks` no-op tasks: median of 3 runs after a warm-up. */
async function mapThroughput(pool: sky.Pool): Promise<number> {
  const items = (count: number): [][] => Array.from({ length: count }, () => [] as []);
  await pool.map(noop, items(Math.min(500, tasks)));
  const runs: number[] = [];
  for (let run = 0; run < 3; run += 1) {
    const started = performance.now();
    await pool.map(noop, items(tasks));
    runs.push((tasks / (performance.now() - started)) * 1000);
  }
  return median(runs);
}

const skip = await requireTestbed();
if (skip !== undefined) {
  process.stderr.write(`no test bed here: ${skip}\n`);
  process.exit(1);
}
const home = await useScratchSkywardHome("skyward-bench-far-");
const bed = await createTestbed({ hosts: 2 });
let far: TestbedFarHosts | undefined;
try {
  const peer = bed.hosts[1]?.host as string;
  progress(`a 2-node pool through far links (${delayMs} ms each way)`);
  far = await testbedFarHosts(bed, { delayMs });
  const rows: string[] = [];
  const row = (what: string, measured: string, floor: string, ratio: string): void => {
    rows.push(`${what.padEnd(46)} ${measured.padStart(16)} ${floor.padStart(22)} ${ratio.padStart(8)}`);
  };
  let farMap: number;
  let farNested: number;
  let measuredRoundTrips: string[] = [];
  {
    await using pool = await openPool(far.hosts);
    const echoPort = await pool.run(startEcho(7007), { target: 1 });
    const floorMs = await pool.run(peerRoundTrip(peer, echoPort, 200), { target: 0 });
    const floor = `${floorMs.toFixed(3)} ms`;
    // Node 0 holds the collections (the head); node 1's tasks reach it over the cluster network.
    for (const node of [0, 1]) {
      const where = node === 0 ? "" : ", node 1";
      const incrementMs = await medianOf3(pool, increments, node);
      row(
        `strong counter.increment() in a task${where}`,
        `${incrementMs.toFixed(3)} ms`,
        floor,
        times(incrementMs, floorMs),
      );
      const lockMs = await medianOf3(pool, lockCycles, node);
      row(
        `lock acquire + release${where}`,
        `${lockMs.toFixed(3)} ms`,
        floor,
        `${times(lockMs, floorMs)} (${times(lockMs / 2, floorMs)} a write)`,
      );
    }
    const barrierRuns: number[] = [];
    for (let run = 0; run < 3; run += 1) {
      const [barrier0, barrier1] = await Promise.all(
        [0, 1].map((node) => pool.run(barrierRounds(ops), { target: node })),
      );
      barrierRuns.push(Math.max(barrier0 as number, barrier1 as number));
    }
    const barrierMs = median(barrierRuns);
    row("barrier of 2 nodes, per round", `${barrierMs.toFixed(3)} ms`, floor, times(barrierMs, floorMs));
    farMap = await mapThroughput(pool);
    measuredRoundTrips = pool.nodes().map((node) => (node.roundTripMs ?? Number.NaN).toFixed(1));

    const ref = await pool.run(blob(REF_MIB).withKeep(), { target: 0 });
    const before = far.bytes();
    const started = performance.now();
    const size = await pool.run(sizeOf(ref), { target: 1 });
    const seconds = (performance.now() - started) / 1000;
    const after = far.bytes();
    if (size !== REF_MIB * 1024 * 1024)
      throw new Error(`node 1 received ${size} bytes, expected ${REF_MIB} MiB`);
    const crossed = after.toTarget - before.toTarget + (after.fromTarget - before.fromTarget);
    const peerBytes = pool.traffic().find((entry) => entry.node === 1)?.fetched ?? 0;
    row(
      `${REF_MIB} MiB RemoteRef, node 0 → node 1`,
      `${mebibytes(crossed)}, ${seconds.toFixed(2)} s`,
      "0 bytes via client",
      "",
    );
    progress(`the reference moved node to node: node 1 fetched ${mebibytes(peerBytes)} from node 0`);
    await ref.release();

    const argument = new Uint8Array(REF_MIB * 2 ** 20);
    const linksBefore = far.bytes();
    const broadcastStarted = performance.now();
    const lengths = await pool.broadcast(lengthOf(argument));
    const broadcastSeconds = (performance.now() - broadcastStarted) / 1000;
    if (lengths.some((length) => length !== argument.byteLength))
      throw new Error(`a node received ${lengths.join(", ")} bytes, expected ${REF_MIB} MiB`);
    const towardNodes = far.bytes().toTarget - linksBefore.toTarget;
    row(
      `broadcast of a ${REF_MIB} MiB argument, 2 nodes`,
      `${mebibytes(towardNodes)}, ${broadcastSeconds.toFixed(2)} s`,
      `${REF_MIB} MiB via client (1×)`,
      `${(towardNodes / argument.byteLength).toFixed(2)}×`,
    );
    farNested = await nestedEfficiency(pool);
  }
  progress("the same 2 hosts reached directly (no delay), for the map floor");
  let nearMap: number;
  let nearNested: number;
  {
    await using pool = await openPool(testbedSshHosts(bed));
    nearMap = await mapThroughput(pool);
    nearNested = await nestedEfficiency(pool);
  }
  row(
    `map of ${tasks} no-op tasks over 2 nodes`,
    `${Math.round(farMap)} tasks/s`,
    `${Math.round(nearMap)} tasks/s undelayed`,
    `${((farMap / nearMap) * 100).toFixed(0)} %`,
  );
  row(
    `nested fan-out, ${NESTED_ITEMS} × ${NESTED_SECONDS} s (guide 10)`,
    `${(farNested * 100).toFixed(1)} % efficient`,
    `${(nearNested * 100).toFixed(1)} % undelayed`,
    `${((nearNested - farNested) * 100).toFixed(1)} pt`,
  );
  process.stdout.write(
    [
      `the far client: 2 test-bed SSH hosts, the client's link ${delayMs} ms each way (round trip ${2 * delayMs} ms), host to host direct`,
      `the round trip the pool measured to each node: ${measuredRoundTrips.join(" ms, ")} ms`,
      `${"what".padEnd(46)} ${"measured".padStart(16)} ${"floor (same run)".padStart(22)} ${"ratio".padStart(8)}`,
      ...rows,
      "",
    ].join("\n"),
  );
} finally {
  await far?.close();
  await bed.teardown();
  await home.restore();
}
