/**
 * What the `tags` and `spotMaxPrice` settings put in the requests EC2 gets (moto, behind a recording
 * proxy): the user's tags on what each pool creates, beside Skyward's own, which they never replace
 * (https://docs.aws.amazon.com/AWSEC2/APIReference/API_TagSpecification.html); a spot `MaxPrice` at
 * the pool's cap only when asked (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_SpotMarketOptions.html).
 */
import {
  DescribeInstancesCommand,
  DescribeKeyPairsCommand,
  DescribeSecurityGroupsCommand,
} from "@aws-sdk/client-ec2";
import { options, spec } from "@skyward/core";
import { type Cluster, type OfferQuery, resolvePoolSpec } from "@skyward/core/contract";
import { afterEach, describe, expect, it } from "vitest";
import { AWS, type AwsClusterData } from "../src/index.js";
import { startFaultProxy } from "./fault-proxy.js";
import { motoSkipReason } from "./moto-server.js";
import { useMotoSuite } from "./moto-suite.js";

const skipReason = motoSkipReason();
const call = () => ({ signal: AbortSignal.timeout(180_000) });
const query = (allocation: OfferQuery["allocation"]): OfferQuery => ({
  accelerator: null,
  vcpus: 2,
  memoryGb: 4,
  architecture: "x86_64",
  allocation,
});

describe.skipIf(skipReason !== undefined)("AWS launch settings (moto)", () => {
  const suite = useMotoSuite("skyward-aws-launch-settings-");

  afterEach(async () => {
    await suite.moto.reset();
  });

  it("puts the user's tags on instances, volumes, the security group and the key pair, beside Skyward's", async () => {
    const proxy = await startFaultProxy(suite.moto.endpoint, () => undefined);
    try {
      const aws = AWS({ endpoint: proxy.endpoint, tags: { "cost-center": "ml-42", team: "vision" } });
      const offer = (await aws.offers({ query: query("on-demand"), ...call() })).find(
        (candidate) => candidate.instanceType === "t3.medium",
      );
      if (!offer) throw new Error("no t3.medium offer");
      const cluster = (await aws.prepare({
        spec: resolvePoolSpec(spec({ nodes: 1, allocation: "on-demand" }), options({})),
        offer,
        ...call(),
      })) as Cluster<AwsClusterData>;
      const [instance] = await aws.provision({ cluster, count: 1, ...call() });
      expect(instance?.tags).toMatchObject({
        "cost-center": "ml-42",
        team: "vision",
        "skyward:cluster": cluster.id,
        Name: `skyward-${cluster.id}`,
      });
      const run = proxy.calls.find((entry) => entry.action === "RunInstances");
      const volumeSpec = [...(run?.params ?? [])].find(([, value]) => value === "volume")?.[0] ?? "";
      const volumeIndex = /^TagSpecification\.(\d+)\.ResourceType$/.exec(volumeSpec)?.[1];
      const volumeTags = [...(run?.params ?? [])]
        .filter(([key]) => new RegExp(`^TagSpecification\\.${volumeIndex}\\.Tag\\.\\d+\\.Key$`).test(key))
        .map(([, value]) => value);
      expect(volumeTags).toEqual(expect.arrayContaining(["cost-center", "team", "skyward:cluster"]));
      const groups = await suite.ec2.send(
        new DescribeSecurityGroupsCommand({ GroupIds: [cluster.specific.securityGroupId] }),
      );
      expect(groups.SecurityGroups?.[0]?.Tags).toEqual(
        expect.arrayContaining([{ Key: "cost-center", Value: "ml-42" }]),
      );
      const keys = await suite.ec2.send(
        new DescribeKeyPairsCommand({ KeyNames: [cluster.specific.keyName] }),
      );
      expect(keys.KeyPairs?.[0]?.Tags).toEqual(expect.arrayContaining([{ Key: "team", Value: "vision" }]));
      const described = await suite.ec2.send(
        new DescribeInstancesCommand({ InstanceIds: [instance?.id ?? ""] }),
      );
      expect(described.Reservations?.[0]?.Instances?.[0]?.Tags).toEqual(
        expect.arrayContaining([{ Key: "cost-center", Value: "ml-42" }]),
      );
      await aws.teardown({ cluster, ...call() });
    } finally {
      await proxy.close();
    }
  });

  it("sets a spot MaxPrice to maxHourlyCost only with spotMaxPrice: 'maxHourlyCost'", async () => {
    const proxy = await startFaultProxy(suite.moto.endpoint, () => undefined);
    try {
      const maxPrices: (string | null)[] = [];
      for (const settings of [{}, { spotMaxPrice: "maxHourlyCost" as const }]) {
        const aws = AWS({ endpoint: proxy.endpoint, ...settings });
        const offer = (
          await aws.offers({ query: { ...query("spot"), maxHourlyCost: 0.05 }, ...call() })
        ).find((candidate) => candidate.instanceType === "t3.medium");
        if (!offer) throw new Error("no t3.medium spot offer");
        const cluster = await aws.prepare({
          spec: resolvePoolSpec(spec({ nodes: 1, allocation: "spot", maxHourlyCost: 0.05 }), options({})),
          offer,
          ...call(),
        });
        await aws.provision({ cluster, count: 1, ...call() });
        const run = proxy.calls.filter((entry) => entry.action === "RunInstances").at(-1);
        expect(run?.params.get("InstanceMarketOptions.MarketType")).toBe("spot");
        maxPrices.push(run?.params.get("InstanceMarketOptions.SpotOptions.MaxPrice") ?? null);
        await aws.teardown({ cluster, ...call() });
      }
      expect(maxPrices).toEqual([null, "0.05"]);
    } finally {
      await proxy.close();
    }
  });
});
