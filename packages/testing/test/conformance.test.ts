/**
 * The provider conformance suite run against the built-in providers: `Local` on this machine, and
 * `SSH` on a two-host test bed.
 */
import { execFileSync } from "node:child_process";
import { readdir } from "node:fs/promises";
import * as sky from "@skyward/core";
// TODO(provider-ssh): import { SSH } from "@skyward/provider-ssh" once that package exists; core's
// internal entry point keeps it until then.
import { SSH } from "@skyward/core/internal";
import { afterAll, beforeAll, describe } from "vitest";
import {
  createTestbed,
  requireTestbed,
  runProviderConformance,
  type Testbed,
  testbedSshHosts,
} from "../src/index.js";

runProviderConformance({
  name: "Local",
  create: () => sky.Local(),
  provisionCount: 2,
  // A local worker exits by itself when its TTL runs out; there is no machine to end.
  supports: { selfDestruct: false },
  // Two workers on this machine, started by Local's launchWorker.
  pool: true,
});

/** Ids of the processes whose command line contains `text`. */
function processesMentioning(text: string): string[] {
  try {
    return execFileSync("pgrep", ["-f", text], { encoding: "utf8" }).split("\n").filter(Boolean);
  } catch {
    return []; // pgrep exits 1 when nothing matches
  }
}

const skipReason = await requireTestbed();

describe.skipIf(skipReason !== undefined)("SSH on a 2-host test bed", () => {
  let bed: Testbed;

  beforeAll(async () => {
    bed = await createTestbed({ hosts: 2 });
  }, 120_000);

  afterAll(async () => {
    await bed?.teardown();
  });

  runProviderConformance({
    name: "SSH",
    create: () => SSH({ hosts: testbedSshHosts(bed) }),
    provisionCount: 2,
    // The SSH provider creates nothing on the hosts until a pool starts a worker: their Skyward root
    // directories must stay empty, and no worker process may run.
    leftovers: async () => {
      const left: string[] = [];
      for (const host of bed.hosts) {
        for (const entry of await readdir(host.root).catch(() => [])) left.push(`${host.name}: ${entry}`);
        // Namespaces share the process table: a process of this host runs under its root directory.
        for (const pid of processesMentioning(host.root)) left.push(`${host.name}: process ${pid}`);
      }
      return left;
    },
  });
});
