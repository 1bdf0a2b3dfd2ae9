/**
 * The fault matrix of `@skyward/testing` against the AWS provider and moto, behind the double of what
 * moto lacks (`aws-double.ts`) and a proxy that injects EC2's own refusals (`fault-proxy.ts`): a storm
 * of `RequestLimitExceeded`, a `RunInstances` EC2 accepted but whose answer was lost, an instance
 * reclaimed, the client killed after launch. The cells moto and EC2 cannot play say why.
 */
import {
  DescribeInstancesCommand,
  type Instance as Ec2Instance,
  TerminateInstancesCommand,
} from "@aws-sdk/client-ec2";
import { runFaultMatrix } from "@skyward/testing";
import { afterAll, beforeAll, describe } from "vitest";
import { AWS } from "../src/aws-provider.js";
import { type FaultProxy, startFaultProxy } from "./fault-proxy.js";
import { motoSkipReason } from "./moto-server.js";
import { useMotoSuite } from "./moto-suite.js";

const skipReason = motoSkipReason();

describe.skipIf(skipReason !== undefined)("AWS against moto", () => {
  const suite = useMotoSuite("skyward-aws-faults-");
  let proxy: FaultProxy;
  /** EC2 calls still to refuse for the account's request rate. */
  let throttled = 0;

  beforeAll(async () => {
    proxy = await startFaultProxy(suite.moto.endpoint, () => {
      if (throttled <= 0) return undefined;
      throttled -= 1;
      // https://docs.aws.amazon.com/ec2/latest/devguide/ec2-api-throttling.html
      return { status: 503, code: "RequestLimitExceeded", message: "Request limit exceeded." };
    });
  });
  afterAll(async () => {
    await proxy?.close();
  });

  const instancesAtEc2 = async (): Promise<Ec2Instance[]> => {
    const described = await suite.ec2.send(new DescribeInstancesCommand({}));
    return (described.Reservations ?? []).flatMap((reservation) => reservation.Instances ?? []);
  };
  /** What an instance bills: the price of the market it was launched on, as its tags say. */
  const billing = (instance: Ec2Instance) => ({
    id: instance.InstanceId ?? "",
    hourlyPrice: Number(
      instance.Tags?.find((tag) => tag.Key === "skyward:hourly-price")?.Value ?? Number.NaN,
    ),
  });

  runFaultMatrix({
    name: "aws",
    create: () => AWS({ endpoint: proxy.endpoint }),
    faults: () => ({
      live: async () =>
        (await instancesAtEc2())
          .filter((instance) => ["pending", "running"].includes(instance.State?.Name ?? ""))
          .map(billing),
      created: async () => (await instancesAtEc2()).map(billing),
      rateLimitNext: (count) => {
        throttled = count;
      },
      loseNextCreateAnswer: () => {
        suite.moto.double.failAcceptedLaunches = { count: 1, how: "drop" };
      },
      reclaim: async (id) => {
        // A spot interruption with InstanceInterruptionBehavior terminate: the instance is terminated.
        await suite.ec2.send(new TerminateInstancesCommand({ InstanceIds: [id] }));
      },
    }),
    spec: { vcpus: 2, memoryGb: 4, architecture: "x86_64", allocation: "on-demand" },
    notApplicable: {
      "partial-delete":
        "EC2's TerminateInstances answers for the whole batch (an unknown id fails the call); it has no per-instance refusals to read",
      "delete-refused-while-provisioning":
        "EC2 terminates an instance in any state, pending included (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/terminating-instances.html)",
      "unknown-list-shape":
        "DescribeInstances is parsed by the AWS SDK from EC2's XML; an answer without instances reads as none before the provider sees it (not yet guarded)",
    },
    clientKilled: "skyward-down",
    timeoutMs: 180_000,
  });
});
