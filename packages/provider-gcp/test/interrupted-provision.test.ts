/**
 * A provision stopped while Compute Engine is still making its VM (Ctrl-C during a pool's start): the
 * insert's request has reached Compute Engine, which answers it once the VM exists
 * (https://cloud.google.com/compute/docs/reference/rest/v1/instances/insert); Google's client takes no
 * signal, so the request runs on after the provision gave up. Nothing may be left billing.
 */
import { options, spec } from "@skyward/core";
import { type Cluster, type Offer, resolvePoolSpec } from "@skyward/core/contract";
import { type ScratchSkywardHome, useScratchSkywardHome } from "@skyward/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GCP, type GcpClusterData } from "../src/index.js";
import { type FakeGce, fakeGcpSettings, fakeLeftovers, startFakeGce } from "./fake-gce.js";

const call = () => ({ signal: AbortSignal.timeout(60_000) });

describe("a GCP provision stopped while its VM is being made", () => {
  let fake: FakeGce;
  let home: ScratchSkywardHome;

  beforeAll(async () => {
    home = await useScratchSkywardHome("skyward-gcp-interrupted-");
    fake = await startFakeGce();
  });
  afterAll(async () => {
    await fake?.close();
    await home?.restore();
  });

  it("leaves no VM once the insert it stopped waiting for has made one", async () => {
    const gcp = GCP(fakeGcpSettings(fake));
    const [offer] = await gcp.offers({
      query: { accelerator: null, allocation: "on-demand", vcpus: 2, memoryGb: 4 },
      ...call(),
    });
    const cluster = (await gcp.prepare({
      spec: resolvePoolSpec(spec({ nodes: 1, allocation: "on-demand" }), options({})),
      offer: offer as Offer,
      ...call(),
    })) as Cluster<GcpClusterData>;
    fake.faults.insertDelayMs = 3000;
    const stop = new AbortController();
    const provisioning = gcp.provision({ cluster, count: 1, signal: stop.signal });
    await expect
      .poll(() =>
        fake.requests.some((request) => request.method === "POST" && request.path.endsWith("/instances")),
      )
      .toBe(true);
    stop.abort(new Error("interrupted"));
    await expect(provisioning).rejects.toThrow("interrupted");
    // The pool tears the cluster down after a failed start.
    await gcp.teardown({ cluster, ...call() });
    // Once Compute Engine has made the VM the insert asked for, nothing of the pool may be left.
    await expect.poll(() => fake.faults.created.length, { timeout: 10_000 }).toBe(1);
    expect(fakeLeftovers(fake)).toEqual([]);
  });
});
