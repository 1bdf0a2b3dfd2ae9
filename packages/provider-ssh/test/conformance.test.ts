/**
 * The provider conformance suite against `SSH` on a two-host test bed, a real pool included, and the
 * fault matrix, whose cells are all about a cloud API `SSH` does not have: each is declared not
 * applicable, with the reason.
 */
import { execFileSync } from "node:child_process";
import { readdir } from "node:fs/promises";
import { KEPT_NODE_ENTRIES } from "@skyward/ssh";
import {
  apiCellsNotApplicable,
  createTestbed,
  requireTestbed,
  runFaultMatrix,
  runProviderConformance,
  type Testbed,
  testbedSshHosts,
} from "@skyward/testing";
import { afterAll, beforeAll, describe } from "vitest";
import { SSH } from "../src/index.js";

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

  /**
   * What is on the hosts: entries of their Skyward roots, but the environment a self-destruct keeps
   * on purpose for a later pool (venv, wheel caches, uv, the content hash), and processes running
   * under them.
   */
  const onHosts = async (): Promise<string[]> => {
    const left: string[] = [];
    for (const host of bed.hosts) {
      for (const entry of await readdir(host.root).catch(() => []))
        if (!KEPT_NODE_ENTRIES.includes(entry)) left.push(`${host.name}: ${entry}`);
      // Namespaces share the process table: a process of this host runs under its root directory.
      for (const pid of processesMentioning(host.root)) left.push(`${host.name}: process ${pid}`);
    }
    return left;
  };

  runProviderConformance({
    name: "SSH",
    create: () => SSH({ hosts: testbedSshHosts(bed) }),
    provisionCount: 2,
    // A real pool on both hosts; with no TTL its released workers stop and clean their roots.
    pool: { ttl: 0 },
    // The SSH provider creates nothing on the hosts until a pool starts a worker: their Skyward root
    // directories must hold nothing but the kept environment, and no worker process may run. A
    // released worker cleans its root itself once the pool is gone, so this waits a little for that.
    leftovers: async () => {
      const deadline = Date.now() + 15_000;
      for (;;) {
        const left = await onHosts();
        if (left.length === 0 || Date.now() > deadline) return left;
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    },
  });

  /** SSH creates nothing through an API: its instances are hosts the user already has. */
  const noApi = "SSH calls no cloud API: its instances are the user's own hosts, listed in its settings";
  runFaultMatrix({
    name: "ssh",
    create: () => SSH({ hosts: testbedSshHosts(bed) }),
    // Nothing SSH makes bills: the hosts are the user's before and after the pool.
    faults: () => ({ live: () => [], created: () => [] }),
    notApplicable: {
      ...apiCellsNotApplicable(noApi),
      "instance-reclaimed":
        "a user's host is not taken back by a cloud; a host that drops is the pool's node-lost case (ssh-faults.test.ts)",
      "client-killed-after-create":
        "a host bills nothing; a worker whose client died stops itself when its TTL ends",
    },
  });
});
