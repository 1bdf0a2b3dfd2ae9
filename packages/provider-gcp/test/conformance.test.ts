/**
 * The provider conformance suite of @skyward/testing, run against the GCP provider driving the fake
 * Compute Engine over HTTP with Google's own client: once for CPU VMs — with a whole pool whose VMs
 * are test-bed hosts (the fake hands each new VM a test-bed host's address, and the provider's
 * `sshAddress` test seam supplies that host's login) — and once for VMs with an attached T4.
 */
import { accelerators } from "@skyward/core";
import {
  createTestbed,
  requireTestbed,
  runProviderConformance,
  type ScratchSkywardHome,
  type Testbed,
  testbedSshHost,
  useScratchSkywardHome,
} from "@skyward/testing";
import { afterAll, beforeAll, describe } from "vitest";
import { GCP } from "../src/index.js";
import { type FakeGce, fakeGcpSettings, fakeLeftovers, startFakeGce } from "./fake-gce.js";

const testbedSkipReason = await requireTestbed();

describe("GCP against the fake Compute Engine", () => {
  let fake: FakeGce;
  let home: ScratchSkywardHome;
  let bed: Testbed | undefined;

  beforeAll(async () => {
    home = await useScratchSkywardHome("skyward-gcp-conformance-");
    fake = await startFakeGce();
    if (testbedSkipReason === undefined) {
      bed = await createTestbed({ hosts: 2 });
      fake.addresses = bed.hosts.map((host) => host.host);
    }
  }, 180_000);

  afterAll(async () => {
    await bed?.teardown();
    await fake?.close();
    await home?.restore();
  });

  const create = () =>
    GCP({
      ...fakeGcpSettings(fake),
      sshAddress: (instance) => {
        const host = bed?.hosts.find((candidate) => candidate.host === instance.publicIp);
        if (!host) throw new Error(`no test-bed host at ${instance.publicIp} for ${instance.id}`);
        return { ...testbedSshHost(host), privateIp: host.host };
      },
    });

  runProviderConformance({
    name: "gcp, CPU VMs (fake Compute Engine)",
    create,
    leftovers: () => fakeLeftovers(fake),
    supports: { accelerator: "T4" },
    provisionCount: 2,
    // The whole pool: both VMs are test-bed hosts, reached over real SSH and bootstrapped for real.
    pool: testbedSkipReason === undefined ? { ttl: 0, options: { bootstrapTimeout: 240 } } : false,
    timeoutMs: 150_000,
  });

  runProviderConformance({
    name: "gcp, VMs with a T4 (fake Compute Engine)",
    create,
    leftovers: () => fakeLeftovers(fake),
    spec: { accelerator: accelerators.T4(), allocation: "spot" },
    supports: { accelerator: "T4" },
    timeoutMs: 60_000,
  });
});
