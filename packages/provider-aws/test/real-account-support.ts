/**
 * What the "real account" suites (`real-account-*.test.ts`) share: the calls' signal, a pool spec
 * with the test bed's timeouts, a CPU query and the offer of one instance type, and the
 * `RunInstances` calls a fault proxy saw; and the moto suite each runs in, reset after every test.
 */

import { options, spec } from "@skyward/core";
import type { OfferQuery } from "@skyward/core/contract";
import { type Offer, resolvePoolSpec } from "@skyward/core/contract";
import { afterEach, expect } from "vitest";
import type { AWS } from "../src/aws-provider.js";
import { startFaultProxy } from "./fault-proxy.js";
import { motoInventory, motoSkipReason } from "./moto-server.js";
import { type MotoSuite, useMotoSuite } from "./moto-suite.js";

/** Why the suites are skipped (no moto), or undefined. */
export const skipReason = motoSkipReason();
export const call = (poolId?: string) => ({
  signal: AbortSignal.timeout(180_000),
  ...(poolId !== undefined ? { poolId } : {}),
});

export function poolSpec(fields: Parameters<typeof spec>[0] = {}) {
  return resolvePoolSpec(
    spec({ nodes: 1, ttl: 60, ...fields }),
    options({ sshTimeout: 120, bootstrapTimeout: 240 }),
  );
}

export const cpuQuery: OfferQuery = {
  accelerator: null,
  vcpus: 2,
  memoryGb: 4,
  architecture: "x86_64",
  allocation: "on-demand",
};

export async function offerOf(
  aws: ReturnType<typeof AWS>,
  query: OfferQuery,
  instanceType: string,
): Promise<Offer> {
  const offers = await aws.offers({ query, ...call() });
  const offer = offers.find((candidate) => candidate.instanceType === instanceType);
  if (!offer)
    throw new Error(`no ${instanceType} offer among ${offers.map((o) => o.instanceType).join(", ")}`);
  return offer;
}

/** A t3.medium on-demand cluster prepared by `aws` (its offer from the CPU query). */
export async function onDemandT3Cluster(aws: ReturnType<typeof AWS>) {
  const offer = await offerOf(aws, cpuQuery, "t3.medium");
  return aws.prepare({ spec: poolSpec({ allocation: "on-demand" }), offer, ...call() });
}

/** A fault proxy in front of `endpoint` that refuses every spot `RunInstances` for lack of capacity. */
export const refuseSpotLaunches = (endpoint: string) =>
  startFaultProxy(endpoint, (action, params) =>
    action === "RunInstances" && params.get("InstanceMarketOptions.MarketType") === "spot"
      ? { status: 500, code: "InsufficientInstanceCapacity", message: "There is no Spot capacity available." }
      : undefined,
  );

export const runs = (calls: { action: string; params: URLSearchParams }[]) =>
  calls.filter((entry) => entry.action === "RunInstances");

/** The moto suite of a "real account" file (call it first in its `describe`): moto reset after each test. */
export function useRealAccountSuite(): MotoSuite {
  const suite = useMotoSuite("skyward-aws-real-");
  afterEach(async () => {
    await suite.moto.reset();
  });
  return suite;
}

/** Asserts that moto holds nothing of Skyward's: no live instance, security group or key pair. */
export async function expectNothingLeft(endpoint: string): Promise<void> {
  expect(await motoInventory(endpoint)).toMatchObject({
    liveInstances: [],
    securityGroups: [],
    keyPairs: [],
  });
}
