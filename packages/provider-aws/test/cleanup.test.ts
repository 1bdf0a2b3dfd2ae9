/**
 * `cleanup` against moto: the security groups, key pairs and key files of pools whose client is gone
 * are removed without a cluster object, found by their tags; a pool that still has a live instance
 * keeps them (and says why); what the user supplied is never touched. Instances shutting down and
 * groups still in use — which moto never shows — come from a proxy that rewrites or fails its answers.
 */
import { existsSync } from "node:fs";
import { CreateSecurityGroupCommand, DescribeVpcsCommand } from "@aws-sdk/client-ec2";
import { options, type PoolSpec, spec } from "@skyward/core";
import { type Cluster, type Offer, resolvePoolSpec } from "@skyward/core/contract";
import { describe, expect, it } from "vitest";
import { AWS, type AwsClusterData } from "../src/index.js";
import { startFaultProxy } from "./fault-proxy.js";
import { motoInventory, motoSkipReason } from "./moto-server.js";
import { useMotoSuite } from "./moto-suite.js";

const skipReason = motoSkipReason();

/** A one-node on-demand CPU pool's spec, and its t3.medium offer from `aws`. */
async function cpuPool(aws: ReturnType<typeof AWS>): Promise<{ poolSpec: PoolSpec; offer: Offer }> {
  const poolSpec = resolvePoolSpec(
    spec({ nodes: 1, vcpus: 2, memoryGb: 4, architecture: "x86_64", allocation: "on-demand" }),
    options({}),
  );
  const offers = await aws.offers({
    query: { accelerator: null, vcpus: 2, memoryGb: 4, architecture: "x86_64", allocation: "on-demand" },
    signal: AbortSignal.timeout(120_000),
  });
  const offer = offers.find((candidate) => candidate.instanceType === "t3.medium");
  if (!offer) throw new Error("moto offers no t3.medium");
  return { poolSpec, offer };
}

describe.skipIf(skipReason !== undefined)("AWS cleanup against moto", () => {
  const suite = useMotoSuite("skyward-aws-cleanup-");

  it("removes what dead pools' prepare made, leaves a pool with a live instance, and never touches the user's group", async () => {
    const call = (poolId?: string) => ({
      signal: AbortSignal.timeout(120_000),
      ...(poolId !== undefined ? { poolId } : {}),
    });
    const aws = AWS({ endpoint: suite.moto.endpoint });
    const poolSpec: PoolSpec = resolvePoolSpec(
      spec({ nodes: 1, vcpus: 2, memoryGb: 4, architecture: "x86_64", allocation: "on-demand" }),
      options({}),
    );
    const offers = await aws.offers({
      query: { accelerator: null, vcpus: 2, memoryGb: 4, architecture: "x86_64", allocation: "on-demand" },
      ...call(),
    });
    const offer = offers.find((candidate) => candidate.instanceType === "t3.medium") as Offer;
    expect(offer).toBeDefined();

    // The user's own security group: not Skyward's, so no cleanup may remove it.
    const vpcId = (await suite.ec2.send(new DescribeVpcsCommand({}))).Vpcs?.[0]?.VpcId;
    const own = await suite.ec2.send(
      new CreateSecurityGroupCommand({ GroupName: "users-own", Description: "not Skyward's", VpcId: vpcId }),
    );

    // Pool "alive01" keeps a running instance; pool "dead0002" and a cluster prepared without a pool id
    // (its cluster id names its pool) have none: their clients died after prepare.
    const alive = (await aws.prepare({
      spec: poolSpec,
      offer,
      ...call("alive01"),
    })) as Cluster<AwsClusterData>;
    const dead = (await aws.prepare({
      spec: poolSpec,
      offer,
      ...call("dead0002"),
    })) as Cluster<AwsClusterData>;
    const unnamed = (await aws.prepare({ spec: poolSpec, offer, ...call() })) as Cluster<AwsClusterData>;
    expect(alive.poolId).toBe("alive01");
    expect(alive.specific.tags["skyward:pool"]).toBe("alive01");
    expect(unnamed.poolId).toBe(unnamed.id);
    const [instance] = await aws.provision({ cluster: alive, count: 1, ...call() });
    expect(instance?.tags["skyward:pool"]).toBe("alive01");
    const listed = await aws.listInstances?.(call());
    expect(listed?.map((entry) => entry.tags["skyward:pool"])).toEqual(["alive01"]);

    const cleanup = aws.cleanup;
    if (!cleanup) throw new Error("the AWS provider has no cleanup");
    const some = await cleanup({ ...call(), pools: ["alive01", "dead0002"] });
    expect(some.removed).toEqual([
      { poolId: "dead0002", kind: "key file", id: dead.specific.keyFile },
      { poolId: "dead0002", kind: "key pair", id: dead.specific.keyName },
      { poolId: "dead0002", kind: "security group", id: dead.specific.securityGroupId },
    ]);
    const reason = `pool alive01 still has an instance: ${instance?.id} (running); terminate it first (skyward down --pool alive01)`;
    expect(some.left).toEqual([
      { poolId: "alive01", kind: "key pair", id: alive.specific.keyName, reason },
      { poolId: "alive01", kind: "security group", id: alive.specific.securityGroupId, reason },
    ]);
    expect(existsSync(dead.specific.keyFile)).toBe(false);
    expect(existsSync(alive.specific.keyFile)).toBe(true);
    let inventory = await motoInventory(suite.moto.endpoint);
    expect(inventory.securityGroups.sort()).toEqual(
      [own.GroupId, alive.specific.securityGroupId, unnamed.specific.securityGroupId].sort(),
    );
    expect(inventory.keyPairs.sort()).toEqual([alive.specific.keyName, unnamed.specific.keyName].sort());

    // Once its instance is terminated, "all" removes the rest (the unnamed cluster found by its id too).
    await aws.terminate({ cluster: alive, ids: [instance?.id ?? ""], ...call() });
    const all = await cleanup({ ...call(), pools: "all", waitSeconds: 60 });
    expect(all.left).toEqual([]);
    expect(all.removed.map((entry) => `${entry.poolId} ${entry.kind}`).sort()).toEqual(
      [
        "alive01 key file",
        "alive01 key pair",
        "alive01 security group",
        `${unnamed.id} key file`,
        `${unnamed.id} key pair`,
        `${unnamed.id} security group`,
      ].sort(),
    );
    inventory = await motoInventory(suite.moto.endpoint);
    expect(inventory).toEqual({
      liveInstances: [],
      securityGroups: [own.GroupId],
      keyPairs: [],
      skywardVolumes: [],
    });
    expect(existsSync(alive.specific.keyFile) || existsSync(unnamed.specific.keyFile)).toBe(false);

    // Idempotent: nothing left to remove, nothing reported.
    expect(await cleanup({ ...call(), pools: "all" })).toEqual({ removed: [], left: [] });
    expect(await cleanup({ ...call(), pools: ["dead0002"] })).toEqual({ removed: [], left: [] });
  });

  it("waits a bounded time for instances shutting down, and names what is still in use", async () => {
    const call = (poolId?: string) => ({
      signal: AbortSignal.timeout(120_000),
      ...(poolId !== undefined ? { poolId } : {}),
    });
    let shuttingDown = false;
    let groupInUse = false;
    const proxy = await startFaultProxy(
      suite.moto.endpoint,
      (action) =>
        action === "DeleteSecurityGroup" && groupInUse
          ? { status: 400, code: "DependencyViolation", message: "resource sg has a dependent object" }
          : undefined,
      (action, _params, body) =>
        action === "DescribeInstances" && shuttingDown
          ? body.replaceAll("<name>running</name>", "<name>shutting-down</name>")
          : body,
    );
    try {
      const aws = AWS({ endpoint: suite.moto.endpoint });
      const proxied = AWS({ endpoint: proxy.endpoint });
      const cleanup = proxied.cleanup;
      if (!cleanup) throw new Error("the AWS provider has no cleanup");
      const { poolSpec, offer } = await cpuPool(aws);
      const slow = (await aws.prepare({
        spec: poolSpec,
        offer,
        ...call("slow01"),
      })) as Cluster<AwsClusterData>;
      const [instance] = await aws.provision({ cluster: slow, count: 1, ...call() });
      const id = instance?.id ?? "";

      // Still shutting down when the wait runs out: everything stays, and the reason says what to do.
      shuttingDown = true;
      const started = Date.now();
      const early = await cleanup({ ...call(), pools: ["slow01"], waitSeconds: 2 });
      expect(Date.now() - started).toBeGreaterThanOrEqual(2000);
      const reason = `instance ${id} still shutting down after 2 s; run skyward down --pool slow01 again once it has ended`;
      expect(early).toEqual({
        removed: [],
        left: [
          { poolId: "slow01", kind: "key pair", id: slow.specific.keyName, reason },
          { poolId: "slow01", kind: "security group", id: slow.specific.securityGroupId, reason },
        ],
      });

      // Ending within the wait: cleanup waits for it, then removes everything.
      const waiting = cleanup({ ...call(), pools: ["slow01"], waitSeconds: 60 });
      await new Promise((resolve) => setTimeout(resolve, 1500));
      await aws.terminate({ cluster: slow, ids: [id], ...call() });
      const later = await waiting;
      expect(later.left).toEqual([]);
      expect(later.removed.map((entry) => entry.kind)).toEqual(["key file", "key pair", "security group"]);
      shuttingDown = false;

      // A group still in use (the network interfaces of ended instances linger): the key pair goes, the
      // group is named with the reason, and a later run removes it.
      const busy = (await aws.prepare({
        spec: poolSpec,
        offer,
        ...call("busy01"),
      })) as Cluster<AwsClusterData>;
      groupInUse = true;
      const blocked = await cleanup({ ...call(), pools: ["busy01"] });
      expect(blocked.removed.map((entry) => entry.kind)).toEqual(["key file", "key pair"]);
      expect(blocked.left).toEqual([
        {
          poolId: "busy01",
          kind: "security group",
          id: busy.specific.securityGroupId,
          reason: expect.stringMatching(
            /^still in use \(DependencyViolation\): .*run skyward down again shortly$/,
          ),
        },
      ]);
      groupInUse = false;
      expect(await cleanup({ ...call(), pools: ["busy01"] })).toEqual({
        removed: [{ poolId: "busy01", kind: "security group", id: busy.specific.securityGroupId }],
        left: [],
      });
      expect(await motoInventory(suite.moto.endpoint)).toMatchObject({ liveInstances: [], keyPairs: [] });
    } finally {
      await proxy.close();
    }
  });

  it("a policy without ec2:DescribePlacementGroups: every other step still runs, and what was left is named with why", async () => {
    // moto 5.2.5 has no DescribePlacementGroups, and an IAM policy lacking the action answers like this
    // (UnauthorizedOperation, HTTP 403: https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html).
    const proxy = await startFaultProxy(suite.moto.endpoint, (action) =>
      action === "DescribePlacementGroups"
        ? {
            status: 403,
            code: "UnauthorizedOperation",
            message:
              "You are not authorized to perform this operation. User: arn:aws:iam::123456789012:user/skyward is not authorized to perform: ec2:DescribePlacementGroups because no identity-based policy allows the ec2:DescribePlacementGroups action",
          }
        : undefined,
    );
    try {
      const call = (poolId?: string) => ({
        signal: AbortSignal.timeout(120_000),
        ...(poolId !== undefined ? { poolId } : {}),
      });
      const aws = AWS({ endpoint: proxy.endpoint });
      const { poolSpec, offer } = await cpuPool(aws);

      // skyward down (cleanup): the group, key pair and key file go; the placement groups are named as left.
      const orphan = (await aws.prepare({
        spec: poolSpec,
        offer,
        ...call("nopg01"),
      })) as Cluster<AwsClusterData>;
      const cleanup = aws.cleanup;
      if (!cleanup) throw new Error("the AWS provider has no cleanup");
      const result = await cleanup({ ...call(), pools: ["nopg01"] });
      expect(result.removed).toEqual([
        { poolId: "nopg01", kind: "key file", id: orphan.specific.keyFile },
        { poolId: "nopg01", kind: "key pair", id: orphan.specific.keyName },
        { poolId: "nopg01", kind: "security group", id: orphan.specific.securityGroupId },
      ]);
      expect(result.left).toEqual([
        {
          poolId: "nopg01",
          kind: "placement groups",
          id: "us-east-1",
          reason: expect.stringMatching(
            /^not listed, so not removed: AWS DescribePlacementGroups failed: UnauthorizedOperation: .*ec2:DescribePlacementGroups.*grant the action and run skyward down again$/,
          ),
        },
      ]);

      // A pool's own teardown: its instance ends, its group and key pair go, then it says what is left.
      const cluster = (await aws.prepare({
        spec: poolSpec,
        offer,
        ...call("nopg02"),
      })) as Cluster<AwsClusterData>;
      await aws.provision({ cluster, count: 1, ...call() });
      const failure = await aws.teardown({ cluster, ...call() }).catch((error: unknown) => error);
      expect((failure as Error).message).toMatch(
        /^teardown of cluster sky-\w+ in us-east-1 left .*: placement groups not listed: AWS DescribePlacementGroups failed: UnauthorizedOperation/,
      );
      expect(existsSync(cluster.specific.keyFile)).toBe(false);
      const inventory = await motoInventory(suite.moto.endpoint);
      expect(inventory.liveInstances).toEqual([]);
      expect(inventory.securityGroups).not.toContain(cluster.specific.securityGroupId);
      expect(inventory.keyPairs).not.toContain(cluster.specific.keyName);
    } finally {
      await proxy.close();
    }
  });
});
