/**
 * What real AWS accounts do that plain moto does not, reproduced in front of moto (`aws-double.ts`,
 * which every moto suite gets, and per-test fault proxies), and the provider's answer to each:
 * a public address in a user's subnet, SSH ingress, one zone per pool and placement groups;
 * unsupported GPU families and the image lookup; regions for `listInstances`/`cleanup`.
 */
import { readFile, rm } from "node:fs/promises";
import { createServer } from "node:http";
import { join } from "node:path";
import {
  CreateSubnetCommand,
  DescribeInstancesCommand,
  DescribeSecurityGroupsCommand,
  DescribeVpcsCommand,
  EC2Client,
  type Instance as Ec2Instance,
} from "@aws-sdk/client-ec2";
import {
  type Cluster,
  clusterFromInstance,
  IncompleteListingError,
  type Offer,
} from "@skyward/core/contract";
import { whenRunning } from "@skyward/testing";
import { describe, expect, it } from "vitest";
import { AWS, type AwsClusterData } from "../src/aws-provider.js";
import { startFaultProxy } from "./fault-proxy.js";
import { motoInventory, motoUbuntuAmi } from "./moto-server.js";
import {
  call,
  cpuQuery,
  offerOf,
  poolSpec,
  runs,
  skipReason,
  useRealAccountSuite,
} from "./real-account-support.js";

/** Every instance moto knows in `region`, any state. */
async function motoInstances(ec2: EC2Client): Promise<Ec2Instance[]> {
  const described = await ec2.send(new DescribeInstancesCommand({}));
  return (described.Reservations ?? []).flatMap((reservation) => reservation.Instances ?? []);
}

/** AWS's answer to an action a policy denies (or a region the account may not use). */
const UNAUTHORIZED = {
  status: 403,
  code: "UnauthorizedOperation",
  message: "You are not authorized to perform this operation.",
};

describe.skipIf(skipReason !== undefined)("AWS real account: network, images, regions", () => {
  const suite = useRealAccountSuite();

  describe("network", () => {
    it("asks a public address in the user's subnet unless associatePublicIp is false, which the default VPC honours too", async () => {
      const vpcId = (
        await suite.ec2.send(new DescribeVpcsCommand({ Filters: [{ Name: "is-default", Values: ["true"] }] }))
      ).Vpcs?.[0]?.VpcId;
      const subnet = await suite.ec2.send(
        new CreateSubnetCommand({
          VpcId: vpcId,
          CidrBlock: "172.31.200.0/24",
          AvailabilityZone: "us-east-1a",
        }),
      );
      const subnetId = subnet.Subnet?.SubnetId as string;
      expect(subnet.Subnet?.MapPublicIpOnLaunch).toBe(false);
      const proxy = await startFaultProxy(suite.moto.endpoint, () => undefined);
      try {
        const seen: (string | null)[] = [];
        // The default VPC's subnets map a public address on launch (MapPublicIpOnLaunch): there only a
        // network interface that says otherwise goes without one.
        const cases = [
          { subnetId, associatePublicIp: true },
          { subnetId, associatePublicIp: false },
          { associatePublicIp: false },
        ];
        for (const settings of cases) {
          const aws = AWS({ endpoint: proxy.endpoint, ...settings });
          const offer = await offerOf(aws, cpuQuery, "t3.medium");
          const cluster = (await aws.prepare({
            spec: poolSpec({ allocation: "on-demand" }),
            offer,
            ...call(),
          })) as Cluster<AwsClusterData>;
          const [launched] = await aws.provision({ cluster, count: 1, ...call() });
          const instance = await whenRunning(aws, cluster, launched?.id ?? "");
          const params = runs(proxy.calls).at(-1)?.params;
          expect(cluster.specific.subnetIds).toContain(params?.get("NetworkInterface.1.SubnetId"));
          if (settings.subnetId) expect(params?.get("NetworkInterface.1.SubnetId")).toBe(subnetId);
          expect(params?.get("NetworkInterface.1.SecurityGroupId.1")).toBe(cluster.specific.securityGroupId);
          expect(params?.get("NetworkInterface.1.AssociatePublicIpAddress")).toBe(
            String(settings.associatePublicIp),
          );
          seen.push(instance?.publicIp ?? null);
          if (!settings.associatePublicIp) expect(instance?.ssh?.host).toBe(instance?.privateIp);
          await aws.teardown({ cluster, ...call() });
        }
        expect(seen[0]).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
        expect(seen.slice(1)).toEqual([null, null]);
      } finally {
        await proxy.close();
      }
    });

    it("opens SSH to this client's address or given CIDRs when asked; 0.0.0.0/0 by default", async () => {
      const checkip = createServer((_request, response) => response.end("203.0.113.7\n"));
      await new Promise<void>((resolve) => checkip.listen(0, "127.0.0.1", resolve));
      const saved = process.env.SKYWARD_AWS_CHECKIP_URL;
      process.env.SKYWARD_AWS_CHECKIP_URL = `http://127.0.0.1:${(checkip.address() as { port: number }).port}/`;
      try {
        const rules: string[][] = [];
        for (const sshIngress of ["client", ["198.51.100.0/24"]] as const) {
          const aws = AWS({ endpoint: suite.moto.endpoint, sshIngress });
          const offer = await offerOf(aws, cpuQuery, "t3.medium");
          const cluster = (await aws.prepare({
            spec: poolSpec(),
            offer,
            ...call(),
          })) as Cluster<AwsClusterData>;
          const [group] =
            (
              await suite.ec2.send(
                new DescribeSecurityGroupsCommand({ GroupIds: [cluster.specific.securityGroupId] }),
              )
            ).SecurityGroups ?? [];
          rules.push(
            group?.IpPermissions?.find((rule) => rule.FromPort === 22)?.IpRanges?.map(
              (range) => range.CidrIp ?? "",
            ) ?? [],
          );
          await aws.teardown({ cluster, ...call() });
        }
        expect(rules).toEqual([["203.0.113.7/32"], ["198.51.100.0/24"]]);
        expect(() => AWS({ sshIngress: ["10.0.0.0/33"] })).toThrow(
          /AWS\.sshIngress(\.0)?: expected "anywhere", "client" or a list of IPv4 CIDRs/,
        );
      } finally {
        if (saved === undefined) delete process.env.SKYWARD_AWS_CHECKIP_URL;
        else process.env.SKYWARD_AWS_CHECKIP_URL = saved;
        checkip.close();
      }
    });

    it("keeps a pool's nodes in one zone, and gives a multi-node GPU pool a cluster placement group", async () => {
      const proxy = await startFaultProxy(suite.moto.endpoint, () => undefined);
      try {
        const aws = AWS({ endpoint: proxy.endpoint, amiId: await motoUbuntuAmi(suite.ec2) });
        const offer = await offerOf(
          aws,
          { accelerator: { name: "T4", count: 1 }, allocation: "on-demand" },
          "g4dn.xlarge",
        );
        const cluster = (await aws.prepare({
          spec: poolSpec({ allocation: "on-demand", nodes: 2 }),
          offer,
          ...call(),
        })) as Cluster<AwsClusterData>;
        const groupName = `skyward-${cluster.id}`;
        expect(cluster.specific.placementGroup).toBe(groupName);
        expect(suite.moto.double.placementGroups.get(groupName)).toMatchObject({
          strategy: "cluster",
          tags: { "skyward:cluster": cluster.id },
        });
        await aws.provision({ cluster, count: 1, ...call() });
        await aws.provision({ cluster, count: 1, ...call() }); // a second call: same zone
        const launches = runs(proxy.calls);
        expect(launches.map((entry) => entry.params.get("Placement.GroupName"))).toEqual([
          groupName,
          groupName,
        ]);
        expect(new Set(launches.map((entry) => entry.params.get("SubnetId"))).size).toBe(1);
        await aws.teardown({ cluster, ...call() });
        expect(suite.moto.double.placementGroups.size).toBe(0);

        // A CPU pool gets none; one left by a dead pool's prepare goes with cleanup.
        const cpu = await aws.prepare({
          spec: poolSpec({ nodes: 2 }),
          offer: await offerOf(aws, cpuQuery, "t3.medium"),
          ...call(),
        });
        expect((cpu as Cluster<AwsClusterData>).specific.placementGroup).toBeNull();
        const dead = await aws.prepare({ spec: poolSpec({ nodes: 2 }), offer, ...call("dead0003") });
        const cleaned = await aws.cleanup?.({ pools: "all", ...call() });
        expect(cleaned?.removed).toContainEqual({
          poolId: "dead0003",
          kind: "placement group",
          id: `skyward-${dead.id}`,
        });
        expect(suite.moto.double.placementGroups.size).toBe(0);
      } finally {
        await proxy.close();
      }
    });
  });

  describe("images", () => {
    it("refuses GPU families the NVIDIA base image cannot drive, and never falls back to another image", async () => {
      const proxy = await startFaultProxy(suite.moto.endpoint, () => undefined);
      try {
        const aws = AWS({ endpoint: proxy.endpoint });
        const v100 = await offerOf(
          aws,
          { accelerator: { name: "V100", count: 8 }, allocation: "on-demand" },
          "p3dn.24xlarge",
        );
        await expect(aws.prepare({ spec: poolSpec(), offer: v100, ...call() })).rejects.toThrow(
          /p3dn\.24xlarge: P3 \(V100\) instances are not supported by the Deep Learning Base OSS NVIDIA driver image; choose another instance type, or set amiId/,
        );
        const fractional = (
          await aws.offers({
            query: { accelerator: { name: "L4", count: 0.125 }, allocation: "spot" },
            ...call(),
          })
        ).find((offer) => offer.instanceType === "g6f.large") as Offer;
        await expect(aws.prepare({ spec: poolSpec(), offer: fractional, ...call() })).rejects.toThrow(
          /GRID driver/,
        );
        // moto has an old framework DLAMI ("Deep Learning AMI Ubuntu Linux - 2.4_Oct2017") but no Base
        // image: the search names the Base image only, and says to set amiId.
        const t4 = await offerOf(
          aws,
          { accelerator: { name: "T4", count: 1 }, allocation: "on-demand" },
          "g4dn.xlarge",
        );
        await expect(aws.prepare({ spec: poolSpec(), offer: t4, ...call() })).rejects.toThrow(
          /no public "Deep Learning Base OSS Nvidia Driver GPU AMI \(Ubuntu 22\.04\)\*" image matched; set amiId/,
        );
        const searches = proxy.calls.filter(
          (entry) => entry.action === "DescribeImages" && entry.params.get("Filter.1.Name") === "name",
        );
        expect(searches.map((entry) => entry.params.get("Filter.1.Value.1"))).toEqual([
          "Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04)*",
        ]);
        expect(await motoInventory(suite.moto.endpoint)).toMatchObject({
          securityGroups: [],
          keyPairs: [],
        });
      } finally {
        await proxy.close();
      }
    });
  });

  describe("regions", () => {
    it("skyward instances/down look in every region this machine launched pools in, or in the regions given", async () => {
      suite.moto.double.prices.set("us-west-2", { "t3.medium": 0.0418 });
      const aws = AWS({ endpoint: suite.moto.endpoint });
      const offer = await offerOf(aws, { ...cpuQuery, region: "us-west-2" }, "t3.medium");
      const cluster = await aws.prepare({ spec: poolSpec(), offer, ...call("west0001") });
      const [instance] = await aws.provision({ cluster, count: 1, ...call() });
      const regionsFile = join(suite.home.path, "aws", "regions.json");
      expect(JSON.parse(await readFile(regionsFile, "utf8"))[suite.moto.endpoint]).toContain("us-west-2");

      // A provider configured for us-east-1 finds it, by the record of regions…
      const fresh = AWS({ endpoint: suite.moto.endpoint });
      expect((await fresh.listInstances?.(call()))?.map((found) => found.id)).toEqual([instance?.id]);
      // …and, without the record, when told where to look.
      await rm(regionsFile);
      expect(await AWS({ endpoint: suite.moto.endpoint }).listInstances?.(call())).toEqual([]);
      for (const regions of [["us-west-2"], "all"] as const) {
        const found = await AWS({ endpoint: suite.moto.endpoint, regions }).listInstances?.(call());
        expect(found?.map((entry) => entry.id)).toEqual([instance?.id]);
      }
      const told = AWS({ endpoint: suite.moto.endpoint, regions: ["us-west-2"] });
      const [listed] = (await told.listInstances?.(call())) ?? [];
      await told.terminate({
        cluster: clusterFromInstance("aws", listed as NonNullable<typeof listed>),
        ids: [listed?.id as string],
        ...call(),
      });
      const west = new EC2Client({
        region: "us-west-2",
        endpoint: suite.moto.endpoint,
        credentials: { accessKeyId: "testing", secretAccessKey: "testing" },
      });
      try {
        expect((await motoInstances(west)).map((raw) => raw.State?.Name)).toEqual(["terminated"]);
      } finally {
        west.destroy();
      }
      const cleaned = await told.cleanup?.({ pools: "all", ...call() });
      expect(cleaned?.removed.map((entry) => [entry.poolId, entry.kind])).toEqual([
        ["west0001", "key file"],
        ["west0001", "key pair"],
        ["west0001", "security group"],
      ]);
      expect(await motoInventory(suite.moto.endpoint, "us-west-2")).toMatchObject({
        securityGroups: [],
        keyPairs: [],
      });
    });

    it("a region that refuses to be listed hides nothing of the others: the instances found come with the error naming it", async () => {
      const aws = AWS({ endpoint: suite.moto.endpoint });
      const offer = await offerOf(aws, cpuQuery, "t3.medium");
      const cluster = await aws.prepare({ spec: poolSpec(), offer, ...call("east0001") });
      const [instance] = await aws.provision({ cluster, count: 1, ...call() });
      // us-west-2 answers as a region the account may not use (AWS's UnauthorizedOperation).
      const proxy = await startFaultProxy(suite.moto.endpoint, (action, _params, region) =>
        action === "DescribeInstances" && region === "us-west-2" ? UNAUTHORIZED : undefined,
      );
      try {
        const listing = AWS({ endpoint: proxy.endpoint, regions: ["us-west-2"] }).listInstances?.(call());
        const error = await listing?.then(
          () => undefined,
          (reason: unknown) => reason,
        );
        expect(IncompleteListingError.isInstance(error)).toBe(true);
        const incomplete = error as IncompleteListingError;
        expect(incomplete.found.map((found) => found.id)).toEqual([instance?.id]);
        expect(incomplete.message).toMatch(
          /could not list the instances of a region \(us-west-2: .*not authorized/,
        );
      } finally {
        await proxy.close();
        await aws.teardown({ cluster, ...call() });
      }
    });

    it('regions "all" with DescribeRegions refused still lists and cleans where it knows to look, and says the rest was not searched', async () => {
      const aws = AWS({ endpoint: suite.moto.endpoint });
      const offer = await offerOf(aws, cpuQuery, "t3.medium");
      const cluster = await aws.prepare({ spec: poolSpec(), offer, ...call("east0002") });
      const [instance] = await aws.provision({ cluster, count: 1, ...call() });
      // A policy without ec2:DescribeRegions (AWS's UnauthorizedOperation, as for any denied action).
      const proxy = await startFaultProxy(suite.moto.endpoint, (action) =>
        action === "DescribeRegions" ? UNAUTHORIZED : undefined,
      );
      try {
        const all = AWS({ endpoint: proxy.endpoint, regions: "all" });
        const error = await all.listInstances?.(call()).then(
          () => undefined,
          (reason: unknown) => reason,
        );
        // Before: the refusal failed the whole listing, so `skyward down` terminated nothing.
        expect(IncompleteListingError.isInstance(error)).toBe(true);
        const incomplete = error as IncompleteListingError;
        expect(incomplete.found.map((found) => found.id)).toContain(instance?.id);
        expect(incomplete.message).toMatch(
          /regions "all": could not list the account's regions \(.*not authorized.*\), so only us-east-1(, [a-z0-9-]+)* (was|were) searched/,
        );

        // The instance ends; the pool's shared resources are cleaned up in the regions searched.
        await aws.terminate({ cluster, ids: [instance?.id as string], ...call() });
        const cleaned = await all.cleanup?.({ pools: ["east0002"], waitSeconds: 30, ...call() }).then(
          () => undefined,
          (reason: unknown) => reason as Error,
        );
        expect(cleaned?.message).toMatch(/could not list the account's regions/);
        expect(cleaned?.message).toMatch(/There it removed .*security group/);
        const { securityGroups } = await motoInventory(suite.moto.endpoint, "us-east-1");
        expect(securityGroups).not.toContain((cluster.specific as AwsClusterData).securityGroupId);
      } finally {
        await proxy.close();
        await aws.teardown({ cluster, ...call() });
      }
    });
  });
});
