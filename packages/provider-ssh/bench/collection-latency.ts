/**
 * Strong collection operations on 2 test-bed SSH hosts, timed inside tasks over longer loops than
 * far-client.ts's (whose rows are 50 operations, too few to tell one runtime from another on a
 * busy machine): a strong `counter.increment()` and a lock acquire + release in a task on node 0
 * (the head, which holds the collections) and on node 1, `--rounds` times each, beside the floor
 * measured in the same run (one host-to-host round trip: a blocking 1-byte echo from node 0 to
 * node 1), how many of node 1's answers its copy of the collections gave, the task thread's own CPU
 * per increment, and each worker's Python and its speed (a fixed loop's CPU: the figures are
 * mostly Python's CPU, so they compare only between interpreters of the same speed). The collections never cross the client's link, so the hosts are reached directly.
 * Figures are printed, never asserted.
 *
 *     pnpm -s turbo run build --filter @skyward/provider-ssh...
 *     node packages/provider-ssh/bench/collection-latency.ts [--ops 1000] [--rounds 3] [--python /usr/bin/python3.11]
 */
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import * as sky from "@skyward/core";
import { createTestbed, requireTestbed, testbedSshHosts, useScratchSkywardHome } from "@skyward/testing";
import { SSH } from "../dist/index.js";

const { values: flags } = parseArgs({
  options: {
    ops: { type: "string", default: "1000" },
    rounds: { type: "string", default: "3" },
    // the hosts' interpreter (image.python's forms); default: the image's own choice
    python: { type: "string" },
  },
});
const ops = Number(flags.ops);
const rounds = Number(flags.rounds);
const tasksFile = fileURLToPath(new URL("./far_tasks.py", import.meta.url));
// far_tasks.interpreter's reference loop: core's, which collection_loopback.py prints too
const referenceLoopFile = fileURLToPath(new URL("../../core/bench/reference_loop.py", import.meta.url));
const increments = sky.python<[number], number>("far_tasks:increments");
const lockCycles = sky.python<[number], number>("far_tasks:lock_cycles");
const startEcho = sky.python<[number], number>("far_tasks:start_echo");
const peerRoundTrip = sky.python<[string, number, number], number>("far_tasks:peer_round_trip");
const answeredByCopy = sky.python<[], number>("far_tasks:answered_by_copy");
const incrementCpu = sky.python<[number], number>("far_tasks:increment_cpu");
const interpreter = sky.python<[], string>("far_tasks:interpreter");

const skip = await requireTestbed();
if (skip !== undefined) {
  process.stderr.write(`no test bed here: ${skip}\n`);
  process.exit(1);
}
const home = await useScratchSkywardHome("skyward-bench-collection-latency-");
const bed = await createTestbed({ hosts: 2 });
try {
  await using pool = await sky.compute({
    provider: SSH({ hosts: testbedSshHosts(bed) }),
    nodes: 2,
    ttl: 0,
    image: {
      includes: [tasksFile, referenceLoopFile],
      ...(flags.python === undefined ? {} : { python: flags.python }),
    },
    options: { console: false, bootstrapTimeout: 300 },
  });
  const echoPort = await pool.run(startEcho(7007), { target: 1 });
  const floor = await pool.run(peerRoundTrip(bed.hosts[1]?.host as string, echoPort, 500), { target: 0 });
  const lines = [
    `floor (host-to-host round trip): ${floor.toFixed(3)} ms; ms per operation, ${rounds} rounds`,
  ];
  const figures = (values: number[]): string =>
    values.map((value) => `${value.toFixed(3)} (${Math.round(value / floor)}×)`).join(" / ");
  for (const node of [0, 1]) {
    await pool.run(increments(50), { target: node });
    const increment: number[] = [];
    const lock: number[] = [];
    for (let round = 0; round < rounds; round += 1) {
      increment.push(await pool.run(increments(ops), { target: node }));
      lock.push(await pool.run(lockCycles(Math.ceil(ops / 2)), { target: node }));
    }
    lines.push(`node ${node}: strong increment ${figures(increment)}`);
    lines.push(`node ${node}: lock acquire + release (two writes) ${figures(lock)}`);
    const cpu = await pool.run(incrementCpu(ops), { target: node });
    lines.push(`node ${node}: the task thread's own CPU per strong increment ${cpu.toFixed(3)} ms`);
    lines.push(`node ${node}: ${await pool.run(interpreter(), { target: node })}`);
  }
  // Node 1 holds the copy: its writes are answered there (-1: a runtime without that path).
  lines.push(`node 1: answers given by its copy: ${await pool.run(answeredByCopy(), { target: 1 })}`);
  process.stdout.write(`${lines.join("\n")}\n`);
} finally {
  await bed.teardown();
  await home.restore();
}
