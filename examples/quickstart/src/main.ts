// The demo: a 4-node pool on this machine (the Local provider: each node is a Python worker process)
// estimates π with a sharded Monte Carlo, maps a function over a list and streams a generator.
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";
import { SSH } from "@skyward/provider-ssh";

// Lazy, typed references to the functions in tasks.py. Calling one runs nothing: it returns a
// pending call that a pool dispatches.
const countHits = sky.python<
  [samples: number, seed: number],
  { node: number; samples: number; hits: number }
>("tasks:count_hits");
const collatzSteps = sky.python<[n: number], number>("tasks:collatz_steps");
const fibonacci = sky.python.stream<[count: number], number>("tasks:fibonacci");

// Ship tasks.py to the workers, wherever this script is run from.
const tasks = fileURLToPath(new URL("./tasks.py", import.meta.url));

// `--testbed`: the same pool on 4 SSH hosts of a local test bed (network namespaces, each with a
// real sshd; needs root, iproute2 and openssh-server) instead of 4 processes on this machine.
// (`--testbed-if-possible`, for the test suite: skip when the machine cannot host one, outside CI.)
const testing = process.argv.some((arg) => arg.startsWith("--testbed"))
  ? await import("@skyward/testing")
  : undefined;
if (testing && process.argv.includes("--testbed-if-possible")) {
  const skip = await testing.requireTestbed();
  if (skip) {
    console.log(`skipped the test-bed run: ${skip}`);
    process.exit(0);
  }
}
await using testbed = testing ? await testing.createTestbed({ hosts: 4 }) : undefined;
const provider = testbed && testing ? SSH({ hosts: testing.testbedSshHosts(testbed) }) : sky.Local();

await using pool = await sky.compute({ provider, nodes: 4, ttl: 0, image: { includes: [tasks] } });

console.log("1. π by Monte Carlo: every node throws darts at its shard of the samples (broadcast)");
const samples = 2_000_000;
const perNode = await pool.broadcast(countHits(samples, 42));
for (const { node, samples: thrown, hits } of perNode) {
  console.log(`   node ${node}: ${hits.toLocaleString("en")} hits of ${thrown.toLocaleString("en")}`);
}
const hits = perNode.reduce((sum, part) => sum + part.hits, 0);
const thrown = perNode.reduce((sum, part) => sum + part.samples, 0);
const pi = (4 * hits) / thrown;
console.log(`   π ≈ ${pi.toFixed(5)} (error ${Math.abs(pi - Math.PI).toFixed(5)})`);
assert.equal(thrown, samples, "the shards cover every sample exactly once");
assert.ok(Math.abs(pi - Math.PI) < 0.01, `π estimate ${pi} is off`);

console.log("\n2. map: Collatz steps of 1..12, one task per item, spread over the nodes, results in order");
const numbers = Array.from({ length: 12 }, (_, index) => index + 1);
// Each item is one call's argument list, typed from collatzSteps' parameters.
const steps = await pool.map(
  collatzSteps,
  numbers.map((n) => [n]),
);
console.log(`   ${numbers.map((n, index) => `${n}→${steps[index]}`).join("  ")}`);
assert.deepEqual(steps, [0, 1, 7, 2, 5, 8, 16, 3, 19, 6, 14, 9]);

console.log("\n3. stream: a Python generator's items arrive one by one");
const received: number[] = [];
for await (const value of pool.run(fibonacci(15))) received.push(value);
console.log(`   ${received.join(", ")}`);
assert.deepEqual(received.slice(-3), [144, 233, 377]);
