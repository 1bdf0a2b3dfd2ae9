/**
 * `RunInstances` that EC2 accepted but whose answer never reached the client (a timeout, a dropped
 * connection, a 5xx after the fact): the case AWS's "Ensuring idempotency in Amazon EC2 API requests"
 * page (https://docs.aws.amazon.com/ec2/latest/devguide/ec2-api-idempotency.html) is written for. The
 * double in front of moto (`aws-double.ts`) keeps `ClientToken`s as EC2 does; every retry of one launch
 * must reuse its token, so that one provision launches each node once at most — however often its
 * calls fail after acceptance — and the instances found by their token are the pool's, or terminated.
 */
import { DescribeInstancesCommand, type Instance as Ec2Instance } from "@aws-sdk/client-ec2";
import { options, spec } from "@skyward/core";
import { type OfferQuery, resolvePoolSpec } from "@skyward/core/contract";
import { afterEach, describe, expect, it } from "vitest";
import { AWS } from "../src/aws-provider.js";
import { startFaultProxy } from "./fault-proxy.js";
import { motoSkipReason } from "./moto-server.js";
import { useMotoSuite } from "./moto-suite.js";

const skipReason = motoSkipReason();
const call = () => ({ signal: AbortSignal.timeout(180_000) });
const cpuQuery: OfferQuery = {
  accelerator: null,
  vcpus: 2,
  memoryGb: 4,
  architecture: "x86_64",
  allocation: "on-demand",
};
const poolSpec = () =>
  resolvePoolSpec(spec({ nodes: 1, ttl: 60, allocation: "on-demand" }), options({ sshTimeout: 120 }));

describe.skipIf(skipReason !== undefined)(
  "RunInstances retried after EC2 accepted it (moto behind the double)",
  () => {
    const suite = useMotoSuite("skyward-aws-idempotency-");

    afterEach(async () => {
      await suite.moto.reset();
    });

    const instancesAtEc2 = async (): Promise<Ec2Instance[]> => {
      const described = await suite.ec2.send(new DescribeInstancesCommand({}));
      return (described.Reservations ?? []).flatMap((reservation) => reservation.Instances ?? []);
    };

    for (const how of ["drop", "internal-error"] as const) {
      it(`every attempt failing after acceptance (${how}): one token, one instance, kept as the node`, async () => {
        const proxy = await startFaultProxy(suite.moto.endpoint, () => undefined);
        try {
          const aws = AWS({ endpoint: proxy.endpoint });
          const offer = (await aws.offers({ query: cpuQuery, ...call() })).find(
            (candidate) => candidate.instanceType === "t3.medium",
          );
          if (!offer) throw new Error("no t3.medium offer");
          const cluster = await aws.prepare({ spec: poolSpec(), offer, ...call() });
          suite.moto.double.failAcceptedLaunches = { count: Number.POSITIVE_INFINITY, how };
          const instances = await aws.provision({ cluster, count: 1, ...call() });
          const runs = proxy.calls.filter((entry) => entry.action === "RunInstances");
          const tokens = new Set(runs.map((entry) => entry.params.get("ClientToken")));
          const atEc2 = await instancesAtEc2();
          console.log(
            `[aws idempotency] one provision, every RunInstances failing after EC2 accepted it (${how}): ` +
              `${runs.length} RunInstances calls, ${tokens.size} client token, ${atEc2.length} instance launched`,
          );
          expect(runs.length).toBeGreaterThan(1);
          expect(tokens.size).toBe(1);
          expect(atEc2).toHaveLength(1);
          expect(instances.map((instance) => instance.id)).toEqual(atEc2.map((raw) => raw.InstanceId));
          suite.moto.double.failAcceptedLaunches = undefined;
          await aws.teardown({ cluster, ...call() });
          expect((await instancesAtEc2()).filter((raw) => raw.State?.Name !== "terminated")).toEqual([]);
        } finally {
          await proxy.close();
        }
      });
    }

    it("a retry after one lost answer gets the first call's instances and launches nothing more", async () => {
      const aws = AWS({ endpoint: suite.moto.endpoint });
      const offer = (await aws.offers({ query: cpuQuery, ...call() })).find(
        (candidate) => candidate.instanceType === "t3.medium",
      );
      if (!offer) throw new Error("no t3.medium offer");
      const cluster = await aws.prepare({ spec: poolSpec(), offer, ...call() });
      suite.moto.double.failAcceptedLaunches = { count: 1, how: "drop" };
      const instances = await aws.provision({ cluster, count: 2, ...call() });
      expect(instances).toHaveLength(2);
      expect(await instancesAtEc2()).toHaveLength(2);
      expect(suite.moto.double.launchesByToken.size).toBe(1);
      await aws.teardown({ cluster, ...call() });
    });
  },
);
