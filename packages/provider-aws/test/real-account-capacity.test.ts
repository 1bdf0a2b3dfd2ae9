/**
 * What real AWS accounts do that plain moto does not, reproduced in front of moto (`aws-double.ts`,
 * which every moto suite gets, and per-test fault proxies), and the provider's answer to each:
 * quota errors versus capacity errors, and a bound on `RunInstances` calls, for one provision and for
 * a whole pool.
 */
import * as sky from "@skyward/core";
import { NoCapacityError, ProvisionError } from "@skyward/core";
import { describe, expect, it } from "vitest";
import { MAX_LAUNCH_ATTEMPTS } from "../src/allocation.js";
import { AWS, CLUSTER_FAILED_LAUNCH_LIMIT } from "../src/aws-provider.js";
import { startFaultProxy } from "./fault-proxy.js";
import { motoInventory } from "./moto-server.js";
import {
  call,
  cpuQuery,
  offerOf,
  onDemandT3Cluster,
  poolSpec,
  runs,
  skipReason,
  useRealAccountSuite,
} from "./real-account-support.js";

describe.skipIf(skipReason !== undefined)("AWS real account: quotas and capacity", () => {
  const suite = useRealAccountSuite();

  describe("quotas and capacity", () => {
    it("reports a vCPU quota as a quota to raise, after one RunInstances call", async () => {
      const proxy = await startFaultProxy(suite.moto.endpoint, (action) =>
        action === "RunInstances"
          ? {
              status: 400,
              code: "VcpuLimitExceeded",
              message:
                "You have requested more vCPU capacity than your current vCPU limit of 0 allows for the instance bucket that the specified instance type belongs to.",
            }
          : undefined,
      );
      try {
        const aws = AWS({ endpoint: proxy.endpoint });
        const cluster = await onDemandT3Cluster(aws);
        const failure = await aws
          .provision({ cluster, count: 2, ...call() })
          .catch((error: unknown) => error);
        expect(ProvisionError.isInstance(failure) && !NoCapacityError.isInstance(failure)).toBe(true);
        expect((failure as Error).message).toContain(
          'request a quota increase for "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances" (L-1216C47A) in us-east-1',
        );
        expect(runs(proxy.calls)).toHaveLength(1);
        await aws.teardown({ cluster, ...call() });
      } finally {
        await proxy.close();
      }
    });

    it("bounds RunInstances calls for a 2-node pool without capacity, saying what was tried", async () => {
      const proxy = await startFaultProxy(suite.moto.endpoint, (action, params) =>
        action === "RunInstances"
          ? params.has("InstanceMarketOptions.MarketType")
            ? {
                status: 500,
                code: "InsufficientInstanceCapacity",
                message: "There is no Spot capacity available.",
              }
            : {
                status: 400,
                code: "UnfulfillableCapacity",
                message: "Unable to fulfill capacity due to your request configuration.",
              }
          : undefined,
      );
      try {
        const aws = AWS({ endpoint: proxy.endpoint });
        const offer = await offerOf(aws, { ...cpuQuery, allocation: "spot-if-available" }, "t3.medium");
        const cluster = await aws.prepare({
          spec: poolSpec({ allocation: "spot-if-available" }),
          offer,
          ...call(),
        });
        const failure = await aws
          .provision({ cluster, count: 2, ...call() })
          .catch((error: unknown) => error);
        expect(NoCapacityError.isInstance(failure)).toBe(true);
        expect(runs(proxy.calls).length).toBeLessThanOrEqual(MAX_LAUNCH_ATTEMPTS);
        const reasons = (failure as NoCapacityError).attempts.map((attempt) => attempt.reason);
        expect(
          reasons.some((reason) => /^spot in subnet-\w+: InsufficientInstanceCapacity/.test(reason)),
        ).toBe(true);
        expect(reasons.some((reason) => /^on-demand in subnet-\w+: UnfulfillableCapacity/.test(reason))).toBe(
          true,
        );
        expect((await motoInventory(suite.moto.endpoint)).liveInstances).toEqual([]);
        await aws.teardown({ cluster, ...call() });
      } finally {
        await proxy.close();
      }
    });
  });

  describe("a whole pool without capacity", () => {
    it("a 2-node pool makes a bounded number of RunInstances calls over its offers and retries, then says what was tried", async () => {
      const proxy = await startFaultProxy(suite.moto.endpoint, (action) =>
        action === "RunInstances"
          ? {
              status: 500,
              code: "InsufficientInstanceCapacity",
              message: "We currently do not have sufficient capacity.",
            }
          : undefined,
      );
      try {
        const failure = await sky
          .compute({
            provider: AWS({ endpoint: proxy.endpoint }),
            nodes: 2,
            vcpus: 2,
            memoryGb: 4,
            architecture: "x86_64",
            allocation: "spot-if-available",
            options: { console: false, provisionRetryDelay: 0 },
          })
          .then(
            async (pool) => {
              await pool[Symbol.asyncDispose]();
              return undefined;
            },
            (error: unknown) => error,
          );
        expect(NoCapacityError.isInstance(failure)).toBe(true);
        const calls = runs(proxy.calls).length;
        // The pool tries its 3 best offers; each cluster stops after CLUSTER_FAILED_LAUNCH_LIMIT
        // failed launches in a row (it was 218 calls before).
        expect(calls).toBeLessThanOrEqual(3 * CLUSTER_FAILED_LAUNCH_LIMIT);
        expect((failure as Error).message).toMatch(/RunInstances calls in a row for this pool/);
        expect(await motoInventory(suite.moto.endpoint)).toMatchObject({
          liveInstances: [],
          securityGroups: [],
          keyPairs: [],
        });
      } finally {
        await proxy.close();
      }
    });
  });
});
