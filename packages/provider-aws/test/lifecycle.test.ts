/**
 * The AWS provider against moto in server mode: offers, prepare, provision (spot and on-demand),
 * getInstance, listInstances, terminate and teardown, leaving nothing behind; spot falling back to
 * on-demand; credential errors. moto's API is EC2's, spoken over HTTP by the real SDK.
 */
import { stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import {
  CreateKeyPairCommand,
  CreateSecurityGroupCommand,
  DescribeInstanceAttributeCommand,
  DescribeInstancesCommand,
  DescribeKeyPairsCommand,
  DescribeSecurityGroupsCommand,
  DescribeVolumesCommand,
  DescribeVpcsCommand,
} from "@aws-sdk/client-ec2";
import {
  ConfigurationError,
  NoCapacityError,
  options,
  type PoolSpec,
  ProvisionError,
  spec,
} from "@skyward/core";
import { type Cluster, type Offer, type OfferQuery, resolvePoolSpec } from "@skyward/core/contract";
import { whenRunning } from "@skyward/testing";
import { afterEach, describe, expect, it } from "vitest";
import { AWS, type AwsClusterData } from "../src/index.js";
import { startFaultProxy } from "./fault-proxy.js";
import { motoInventory, motoSkipReason, motoUbuntuAmi, useFakeAwsEnvironment } from "./moto-server.js";
import { useMotoSuite } from "./moto-suite.js";

const skipReason = motoSkipReason();
const call = () => ({ signal: AbortSignal.timeout(120_000) });

function poolSpec(fields: Parameters<typeof spec>[0] = {}): PoolSpec {
  return resolvePoolSpec(
    spec({ nodes: 1, ttl: 60, ...fields }),
    options({ sshTimeout: 120, bootstrapTimeout: 240 }),
  );
}

describe.skipIf(skipReason !== undefined)("the AWS provider against moto", () => {
  const suite = useMotoSuite("skyward-aws-home-");

  afterEach(async () => {
    await suite.moto.reset();
  });

  const provider = () => AWS({ endpoint: suite.moto.endpoint });

  describe("offers", () => {
    // One provider for these: it reads moto's ~1400 instance types once and keeps them.
    let shared: ReturnType<typeof AWS> | undefined;
    const provider = () => {
      shared ??= AWS({ endpoint: suite.moto.endpoint });
      return shared;
    };

    it("lists T4 instance types with spot and on-demand prices and canonical accelerator names", async () => {
      const offers = await provider().offers({
        query: { accelerator: { name: "T4", count: 1, memoryGb: 16 }, allocation: "spot-if-available" },
        ...call(),
      });
      const types = offers.map((offer) => offer.instanceType).sort();
      expect(types).toContain("g4dn.xlarge");
      expect(types.every((type) => type.startsWith("g4dn."))).toBe(true);
      expect(types).not.toContain("g4dn.12xlarge"); // four T4s, not one
      const xlarge = offers.find((offer) => offer.instanceType === "g4dn.xlarge") as Offer;
      expect(xlarge).toMatchObject({
        id: "aws:us-east-1:g4dn.xlarge",
        provider: "aws",
        accelerator: { name: "T4", count: 1, memoryGb: 16 },
        vcpus: 4,
        memoryGb: 16,
        architecture: "x86_64",
        region: "us-east-1",
        onDemandPrice: 0.526,
        billingUnit: "second",
      });
      // moto quotes every spot price as 0.00001, in every zone.
      expect(xlarge.spotPrice).toBe(0.00001);
      expect((xlarge.specific as { availabilityZone: string }).availabilityZone).toMatch(/^us-east-1[a-f]$/);
    });

    it("filters by accelerator memory and count", async () => {
      const forty = await provider().offers({
        query: { accelerator: { name: "A100", count: 8, memoryGb: 40 }, allocation: "on-demand" },
        ...call(),
      });
      // Memory is a minimum: 40 GB is met by the 40 GB and the 80 GB A100s.
      expect(forty.map((offer) => offer.instanceType).sort()).toEqual(["p4d.24xlarge", "p4de.24xlarge"]);
      const eighty = await provider().offers({
        query: { accelerator: { name: "A100", count: 8, memoryGb: 80 }, allocation: "on-demand" },
        ...call(),
      });
      expect(eighty.map((offer) => offer.instanceType)).toEqual(["p4de.24xlarge"]);
      expect(
        await provider().offers({
          query: { accelerator: { name: "A100", count: 1 }, allocation: "on-demand" },
          ...call(),
        }),
      ).toEqual([]);
    });

    it("labels SXM types and honours a form factor asked for: AWS has no PCIe A100 or H100", async () => {
      const ask = (name: string, formFactor?: string) =>
        provider().offers({
          query: {
            accelerator: { name, count: 8, ...(formFactor ? { formFactor } : {}) },
            allocation: "on-demand",
          },
          ...call(),
        });
      const sxm = await ask("A100", "SXM");
      expect(sxm.map((offer) => offer.instanceType).sort()).toEqual(["p4d.24xlarge", "p4de.24xlarge"]);
      expect(sxm.every((offer) => offer.accelerator?.formFactor === "SXM")).toBe(true);
      expect(await ask("A100", "PCIe")).toEqual([]);
      expect((await ask("A100")).map((offer) => offer.instanceType).sort()).toEqual([
        "p4d.24xlarge",
        "p4de.24xlarge",
      ]);
      const h100 = await ask("H100", "SXM");
      expect(h100.map((offer) => offer.instanceType)).toContain("p5.48xlarge");
      expect(await ask("H100", "PCIe")).toEqual([]);
    });

    it("filters by vCPUs, memory, architecture, allocation and price cap", async () => {
      const query: OfferQuery = {
        accelerator: null,
        vcpus: 4,
        memoryGb: 16,
        architecture: "arm64",
        allocation: "on-demand",
        maxHourlyCost: 0.2,
      };
      const offers = await provider().offers({ query, ...call() });
      expect(offers.length).toBeGreaterThan(0);
      for (const offer of offers) {
        expect(offer.architecture).toBe("arm64");
        expect(offer.accelerator).toBeNull();
        expect(offer.vcpus).toBeGreaterThanOrEqual(4);
        expect(offer.memoryGb).toBeGreaterThanOrEqual(16);
        expect(offer.onDemandPrice).not.toBeNull();
        expect(offer.onDemandPrice as number).toBeLessThanOrEqual(0.2);
      }
      expect(offers.map((offer) => offer.instanceType)).toContain("m7g.xlarge");
      expect(offers.map((offer) => offer.instanceType)).not.toContain("m7g.2xlarge"); // $0.3264/h
      // Spot only: every offer has a spot price.
      const spotOnly = await provider().offers({
        query: { ...query, allocation: "spot", maxHourlyCost: 0.01 },
        ...call(),
      });
      expect(spotOnly.length).toBeGreaterThan(offers.length);
      expect(spotOnly.every((offer) => offer.spotPrice !== null && offer.spotPrice <= 0.01)).toBe(true);
    });

    it("uses the onDemandPrices setting before the Price List API's prices", async () => {
      const offers = await AWS({
        endpoint: suite.moto.endpoint,
        onDemandPrices: { "g4dn.xlarge": 0.25 },
      }).offers({
        query: { accelerator: { name: "T4", count: 1 }, allocation: "on-demand", maxHourlyCost: 0.3 },
        ...call(),
      });
      expect(offers.map((offer) => [offer.instanceType, offer.onDemandPrice])).toEqual([
        ["g4dn.xlarge", 0.25],
      ]);
    });
  });

  describe("lifecycle", () => {
    it("prepare → provision spot and on-demand → getInstance → list → terminate (twice) → teardown leaves nothing", async () => {
      const aws = provider();
      const spotSpec = poolSpec({ allocation: "spot", vcpus: 2, memoryGb: 4, architecture: "x86_64" });
      const offers = await aws.offers({
        query: {
          accelerator: null,
          vcpus: 2,
          memoryGb: 4,
          architecture: "x86_64",
          allocation: "spot-if-available",
        },
        ...call(),
      });
      const offer = offers.find((candidate) => candidate.instanceType === "t3.medium") as Offer;
      expect(offer).toBeDefined();

      // prepare: security group, key pair (0600 file), AMI (moto has no SSM parameter: DescribeImages finds one).
      const cluster = (await aws.prepare({ spec: spotSpec, offer, ...call() })) as Cluster<AwsClusterData>;
      expect(cluster).toMatchObject({ provider: "aws", region: "us-east-1", offer, spec: spotSpec });
      expect(cluster.ssh).toMatchObject({ user: "ubuntu", port: 22, sudo: true });
      expect(cluster.ssh?.privateKey).toMatch(/BEGIN OPENSSH PRIVATE KEY/);
      const data = cluster.specific;
      expect(data).toMatchObject({
        ownsKeyPair: true,
        imageSource: "describe-images",
      });
      expect(data.keyFile).toBe(join(suite.home.path, "keys", `${data.keyName}.pem`));
      expect((await stat(data.keyFile)).mode & 0o777).toBe(0o600);
      const tags = {
        "skyward:pool": cluster.id,
        "skyward:cluster": cluster.id,
        "skyward:owner": expect.stringContaining("@"),
        "skyward:region": "us-east-1",
        Name: `skyward-${cluster.id}`,
      };
      expect(data.tags).toEqual(tags);
      expect(data.subnetIds.length).toBeGreaterThan(1);

      const [group] =
        (await suite.ec2.send(new DescribeSecurityGroupsCommand({ GroupIds: [data.securityGroupId] })))
          .SecurityGroups ?? [];
      expect(Object.fromEntries((group?.Tags ?? []).map((tag) => [tag.Key, tag.Value]))).toMatchObject(tags);
      const ssh = group?.IpPermissions?.find((rule) => rule.FromPort === 22);
      expect(ssh?.IpRanges?.map((range) => range.CidrIp)).toEqual(["0.0.0.0/0"]);
      const internal = group?.IpPermissions?.find((rule) => rule.IpProtocol === "-1");
      expect(internal?.UserIdGroupPairs?.map((pair) => pair.GroupId)).toEqual([data.securityGroupId]);
      const keys = (await suite.ec2.send(new DescribeKeyPairsCommand({}))).KeyPairs ?? [];
      expect(keys.map((key) => key.KeyName)).toEqual([data.keyName]);

      // provision two spot instances: handed back as EC2 answered (pending, no SSH yet: the pool waits
      // through getInstance), then running, with SSH coordinates, tagged, terminating on shutdown.
      const launched = await aws.provision({ cluster, count: 2, ...call() });
      expect(launched).toHaveLength(2);
      for (const instance of launched)
        expect(instance).toMatchObject({ status: "pending", ssh: null, spot: true, hourlyPrice: 0.00001 });
      const spot = await Promise.all(launched.map((instance) => whenRunning(aws, cluster, instance.id)));
      for (const instance of spot) {
        expect(instance).toMatchObject({
          status: "running",
          spot: true,
          hourlyPrice: 0.00001,
          offerId: offer.id,
          tags: { ...tags, "skyward:offer": offer.id, "skyward:hourly-price": "0.00001" },
        });
        expect(instance.publicIp).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
        expect(instance.privateIp).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
        expect(instance.ssh).toEqual({
          host: instance.publicIp,
          port: 22,
          user: "ubuntu",
          privateKey: cluster.ssh?.privateKey,
          identityFile: data.keyFile,
          root: "/opt/skyward",
        });
        const behaviour = await suite.ec2.send(
          new DescribeInstanceAttributeCommand({
            InstanceId: instance.id,
            Attribute: "instanceInitiatedShutdownBehavior",
          }),
        );
        expect(behaviour.InstanceInitiatedShutdownBehavior?.Value).toBe("terminate");
        const userData = await suite.ec2.send(
          new DescribeInstanceAttributeCommand({ InstanceId: instance.id, Attribute: "userData" }),
        );
        const script = Buffer.from(userData.UserData?.Value ?? "", "base64").toString("utf8");
        // N = ttl 60 + sshTimeout 120 + bootstrapTimeout 240.
        expect(script).toContain("remaining=$((420 - up))");
        expect(script).toContain("shutdown -h now");
      }
      const described = await suite.ec2.send(
        new DescribeInstancesCommand({ InstanceIds: spot.map((i) => i.id) }),
      );
      const raw = (described.Reservations ?? []).flatMap((reservation) => reservation.Instances ?? []);
      expect(raw.map((instance) => instance.InstanceLifecycle)).toEqual(["spot", "spot"]);
      expect(new Set(raw.map((instance) => instance.KeyName))).toEqual(new Set([data.keyName]));
      expect(new Set(raw.flatMap((instance) => instance.SecurityGroups?.map((g) => g.GroupId)))).toEqual(
        new Set([data.securityGroupId]),
      );
      const volumes = await suite.ec2.send(
        new DescribeVolumesCommand({ Filters: [{ Name: "tag:skyward:cluster", Values: [cluster.id] }] }),
      );
      expect((volumes.Volumes ?? []).length).toBe(2);

      // provision on demand in the same cluster.
      const onDemandCluster = { ...cluster, spec: poolSpec({ allocation: "on-demand" }) };
      const [launchedOnDemand] = await aws.provision({ cluster: onDemandCluster, count: 1, ...call() });
      const onDemand = await whenRunning(aws, cluster, launchedOnDemand?.id ?? "");
      expect(onDemand).toMatchObject({ status: "running", spot: false, hourlyPrice: 0.0416 });

      // getInstance, listInstances.
      const again = await aws.getInstance({ cluster, id: onDemand?.id as string, ...call() });
      expect(again).toMatchObject({ id: onDemand?.id, status: "running", ssh: { host: onDemand?.publicIp } });
      expect(await aws.getInstance({ cluster, id: "i-0123456789abcdef0", ...call() })).toBeNull();
      const listed = await aws.listInstances?.(call());
      expect(listed?.map((instance) => instance.id).sort()).toEqual(
        [...spot.map((instance) => instance.id), onDemand?.id].sort(),
      );
      for (const instance of listed ?? []) {
        expect(instance.createdAt).toBeLessThanOrEqual(Date.now() + 1000);
        expect(instance.hourlyPrice).not.toBeNull();
        expect(instance.ssh).toMatchObject({ identityFile: data.keyFile });
      }

      // selfDestruct: shutting down terminates the instance.
      expect(aws.selfDestruct({ cluster, instance: spot[0] as (typeof spot)[0] })).toBe(
        "sudo shutdown -h now",
      );
      // Interruption notices: a spot instance's node polls the instance metadata service; on demand, none.
      expect(aws.interruptionNotice?.({ cluster, instance: spot[0] as (typeof spot)[0] })).toEqual({
        kind: "aws-imds",
        endpoint: "http://169.254.169.254",
      });
      expect(aws.interruptionNotice?.({ cluster, instance: onDemand as (typeof spot)[0] })).toBeNull();

      // terminate: twice, and with an unknown id mixed in.
      const ids = [...spot.map((instance) => instance.id), "i-0123456789abcdef0"];
      await aws.terminate({ cluster, ids, ...call() });
      await aws.terminate({ cluster, ids, ...call() });
      expect((await aws.getInstance({ cluster, id: spot[0]?.id as string, ...call() }))?.status).toBe(
        "terminated",
      );

      // teardown terminates what is left (the on-demand one), waits, then removes the group and key.
      await aws.teardown({ cluster, ...call() });
      expect(await motoInventory(suite.moto.endpoint)).toEqual({
        liveInstances: [],
        securityGroups: [],
        keyPairs: [],
        skywardVolumes: [],
      });
      await expect(stat(data.keyFile)).rejects.toMatchObject({ code: "ENOENT" });
      expect(await aws.listInstances?.(call())).toEqual([]);
      // Idempotent.
      await aws.teardown({ cluster, ...call() });
    });

    it("spot-if-available falls back to on-demand when spot has no capacity (RunInstances for spot stubbed)", async () => {
      // moto never runs out of spot capacity: a proxy answers spot RunInstances with AWS's error.
      const proxy = await startFaultProxy(suite.moto.endpoint, (action, params) =>
        action === "RunInstances" && params.get("InstanceMarketOptions.MarketType") === "spot"
          ? {
              status: 500,
              code: "InsufficientInstanceCapacity",
              message: "There is no Spot capacity available that matches your request.",
            }
          : undefined,
      );
      try {
        // moto has no Deep Learning Base image: a GPU offer needs amiId (moto's Ubuntu stands in).
        const aws = AWS({ endpoint: proxy.endpoint, amiId: await motoUbuntuAmi(suite.ec2) });
        const [offer] = await aws
          .offers({
            query: {
              accelerator: { name: "T4", count: 1, memoryGb: 16 },
              allocation: "spot-if-available",
              vcpus: 4,
            },
            ...call(),
          })
          .then((offers) => offers.filter((candidate) => candidate.instanceType === "g4dn.xlarge"));
        const fallbackSpec = poolSpec({ allocation: "spot-if-available" });
        const cluster = await aws.prepare({ spec: fallbackSpec, offer: offer as Offer, ...call() });
        const instances = await aws.provision({ cluster, count: 2, ...call() });
        expect(instances.map((instance) => [instance.spot, instance.hourlyPrice])).toEqual([
          [false, 0.526],
          [false, 0.526],
        ]);
        const runs = proxy.calls.filter((entry) => entry.action === "RunInstances");
        // Spot was asked once in every subnet (a 500 for no capacity is not repeated by the SDK), then
        // on demand in the first subnet, both nodes at once (MinCount = MaxCount = 2: one zone).
        const spotRuns = runs.filter((entry) => entry.params.has("InstanceMarketOptions.MarketType"));
        const onDemandRuns = runs.filter((entry) => !entry.params.has("InstanceMarketOptions.MarketType"));
        expect(spotRuns.map((entry) => entry.params.get("SubnetId"))).toEqual(cluster.specific.subnetIds);
        expect(runs.indexOf(onDemandRuns[0] as (typeof runs)[0])).toBe(spotRuns.length);
        expect(
          onDemandRuns.map((entry) => [entry.params.get("SubnetId"), entry.params.get("MinCount")]),
        ).toEqual([[cluster.specific.subnetIds[0], "2"]]);

        // Spot only: no fallback, a NoCapacityError naming every attempt.
        const spotOnly = { ...cluster, spec: poolSpec({ allocation: "spot" }) };
        const failure = await aws
          .provision({ cluster: spotOnly, count: 1, ...call() })
          .catch((error: unknown) => error);
        expect(NoCapacityError.isInstance(failure)).toBe(true);
        expect((failure as NoCapacityError).attempts[0]?.reason).toMatch(
          /^spot in subnet-.*InsufficientInstanceCapacity/,
        );

        await aws.teardown({ cluster, ...call() });
        expect(await motoInventory(suite.moto.endpoint)).toMatchObject({
          liveInstances: [],
          securityGroups: [],
          keyPairs: [],
        });
      } finally {
        await proxy.close();
      }
    });

    it("uses a given security group and key pair, and teardown leaves them", async () => {
      const vpcs = await suite.ec2.send(
        new DescribeVpcsCommand({ Filters: [{ Name: "is-default", Values: ["true"] }] }),
      );
      const group = await suite.ec2.send(
        new CreateSecurityGroupCommand({
          GroupName: "mine",
          Description: "mine",
          VpcId: vpcs.Vpcs?.[0]?.VpcId,
        }),
      );
      const key = await suite.ec2.send(new CreateKeyPairCommand({ KeyName: "mine", KeyType: "ed25519" }));
      const identityFile = join(suite.home.path, "mine.pem");
      await writeFile(identityFile, key.KeyMaterial ?? "", { mode: 0o600 });
      const aws = AWS({
        endpoint: suite.moto.endpoint,
        securityGroupId: group.GroupId,
        keyName: "mine",
        identityFile,
      });
      const [offer] = await aws.offers({
        query: { accelerator: null, vcpus: 2, memoryGb: 4, architecture: "x86_64", allocation: "on-demand" },
        ...call(),
      });
      const cluster = (await aws.prepare({
        spec: poolSpec({ allocation: "on-demand" }),
        offer: offer as Offer,
        ...call(),
      })) as Cluster<AwsClusterData>;
      expect(cluster.ssh).toMatchObject({ privateKey: key.KeyMaterial, identityFile });
      expect(cluster.specific).toMatchObject({
        securityGroupId: group.GroupId,
        keyName: "mine",
        ownsKeyPair: false,
      });
      const [instance] = await aws.provision({ cluster, count: 1, ...call() });
      const [raw] =
        (await suite.ec2.send(new DescribeInstancesCommand({ InstanceIds: [instance?.id as string] })))
          .Reservations?.[0]?.Instances ?? [];
      expect(raw?.KeyName).toBe("mine");
      expect(raw?.SecurityGroups?.map((entry) => entry.GroupId)).toEqual([group.GroupId]);
      await aws.teardown({ cluster, ...call() });
      expect(await motoInventory(suite.moto.endpoint)).toMatchObject({
        liveInstances: [],
        securityGroups: [group.GroupId],
        keyPairs: ["mine"],
      });
      expect((await stat(identityFile)).isFile()).toBe(true);
    });

    it("a failing prepare removes what it created", async () => {
      const proxy = await startFaultProxy(suite.moto.endpoint, (action) =>
        action === "CreateKeyPair"
          ? { status: 400, code: "KeyPairLimitExceeded", message: "Maximum of 5000 keypairs reached." }
          : undefined,
      );
      try {
        const aws = AWS({ endpoint: proxy.endpoint });
        const [offer] = await aws.offers({
          query: { accelerator: null, vcpus: 2, memoryGb: 4, allocation: "on-demand" },
          ...call(),
        });
        const failure = await aws
          .prepare({ spec: poolSpec(), offer: offer as Offer, ...call() })
          .catch((error: unknown) => error);
        expect(ProvisionError.isInstance(failure)).toBe(true);
        expect((failure as Error).message).toContain("KeyPairLimitExceeded");
        expect(proxy.calls.map((entry) => entry.action)).toContain("DeleteSecurityGroup");
        expect(await motoInventory(suite.moto.endpoint)).toMatchObject({ securityGroups: [], keyPairs: [] });
      } finally {
        await proxy.close();
      }
    });
  });

  describe("credentials", () => {
    it("without credentials every call fails with a ConfigurationError saying how to set them", async () => {
      const restore = useFakeAwsEnvironment(false);
      try {
        const error = await provider()
          .offers({ query: { accelerator: null, allocation: "on-demand" }, ...call() })
          .catch((caught: unknown) => caught);
        expect(ConfigurationError.isInstance(error)).toBe(true);
        expect((error as Error).message).toMatch(/^no AWS credentials: set AWS_ACCESS_KEY_ID/);
        // Given ones work without any environment.
        const given = AWS({
          endpoint: suite.moto.endpoint,
          credentials: { accessKeyId: "given", secretAccessKey: "given" },
        });
        const offers = await given.offers({
          query: { accelerator: { name: "T4", count: 1 }, allocation: "on-demand" },
          ...call(),
        });
        expect(offers.length).toBeGreaterThan(0);
      } finally {
        restore();
      }
    });
  });
});
