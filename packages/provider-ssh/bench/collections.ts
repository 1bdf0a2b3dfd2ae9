/**
 * Distributed-collection figures across SSH hosts of the test bed (real sshd in network
 * namespaces; needs root, as the test bed does): operations per second inside tasks for counter
 * increments and dict reads, strong and eventual, on one host and on every host at once — the same
 * tasks as `pnpm bench --only collections` on the Local provider. Figures are printed, never asserted.
 *
 *     pnpm -s turbo run build --filter @skyward/provider-ssh...
 *     node packages/provider-ssh/bench/collections.ts [--hosts 3] [--ops 5000]
 *
 * `SKYWARD_COLLECTIONS_SPIN_US` set in the client's environment goes to the workers (their image's
 * env), as Local workers inherit it.
 */
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import * as sky from "@skyward/core";
import { createTestbed, requireTestbed, testbedSshHosts, useScratchSkywardHome } from "@skyward/testing";
import { SSH } from "../dist/index.js";
import { collectionsSpinEnv } from "./worker-env.ts";

const { values: flags } = parseArgs({
  options: { hosts: { type: "string", default: "3" }, ops: { type: "string", default: "5000" } },
});
const hosts = Number(flags.hosts);
const ops = Number(flags.ops);
const tasks = fileURLToPath(new URL("../../core/bench/bench_tasks.py", import.meta.url));
const collectionOps = sky.python<[string, string, number], number>("bench_tasks:collection_ops");

const skip = await requireTestbed();
if (skip !== undefined) {
  process.stderr.write(`no test bed here: ${skip}\n`);
  process.exit(1);
}
const home = await useScratchSkywardHome("skyward-bench-collections-");
const bed = await createTestbed({ hosts });
try {
  await using pool = await sky.compute({
    provider: SSH({ hosts: testbedSshHosts(bed) }),
    nodes: hosts,
    ttl: 0,
    image: { includes: [tasks], env: collectionsSpinEnv() },
    options: { console: false, bootstrapTimeout: 240 },
  });
  const rows: string[] = [];
  for (const operation of ["counter-increment", "dict-read"]) {
    for (const consistency of ["strong", "eventual"]) {
      for (const nodes of [1, hosts]) {
        await pool.run(collectionOps(operation, consistency, 200)); // warm-up
        const each = await Promise.all(
          Array.from({ length: nodes }, (_, node) =>
            pool.run(collectionOps(operation, consistency, ops), { target: node }),
          ),
        );
        const sum = each.reduce((total, value) => total + value, 0);
        rows.push(
          `${operation.padEnd(18)} ${consistency.padEnd(9)} ${String(nodes).padStart(5)}  ${Math.round(sum)}`,
        );
      }
    }
  }
  process.stdout.write(
    [
      `distributed collections across ${hosts} test-bed SSH hosts (ops/s inside tasks, ${ops} per task, summed):`,
      "operation          consistency nodes  ops/s",
      ...rows,
      "",
    ].join("\n"),
  );
} finally {
  await bed.teardown();
  await home.restore();
}
