/**
 * Where a pool's instances run and who may reach them: the default VPC's subnets (or the one set),
 * ordered by the offer's spot prices, and the security group made for each pool — SSH from where
 * `sshIngress` says, everything within the group — removed with it.
 */
import {
  AuthorizeSecurityGroupIngressCommand,
  CreateSecurityGroupCommand,
  DeleteSecurityGroupCommand,
  DescribeSubnetsCommand,
  DescribeVpcsCommand,
  type Subnet,
} from "@aws-sdk/client-ec2";
import { ProvisionError } from "@skyward/core";
import type { Offer } from "@skyward/core/contract";
import {
  type AwsClients,
  awsCall,
  awsErrorCode,
  PROVIDER_NAME,
  sleep,
  translateAwsError,
} from "./aws-api.js";
import { toAwsTags } from "./instances.js";
import type { AwsOfferData } from "./offers.js";
import { clientAddress } from "./regions.js";
import type { ResolvedAwsSettings } from "./settings.js";

/** The VPC and subnets a pool's instances go to. */
export interface PoolNetwork {
  readonly vpcId: string;
  /** Preferred (the offer's cheapest spot zone) first. */
  readonly subnetIds: string[];
  readonly subnetZones: Record<string, string>;
}

/** Orders subnets: the offer's cheapest spot zone first, then by spot price, then the rest. */
function orderSubnets(subnets: readonly Subnet[], offer: Offer): string[] {
  const data = offer.specific as Partial<AwsOfferData>;
  const prices = data.spotPriceByZone ?? {};
  const rank = (subnet: Subnet) => {
    const zone = subnet.AvailabilityZone ?? "";
    if (zone === data.availabilityZone) return -1;
    return prices[zone] ?? Number.POSITIVE_INFINITY;
  };
  return [...subnets]
    .filter((subnet) => subnet.SubnetId)
    .sort((a, b) => rank(a) - rank(b) || (a.AvailabilityZone ?? "").localeCompare(b.AvailabilityZone ?? ""))
    .map((subnet) => subnet.SubnetId as string);
}

/** The default VPC's subnets (or the configured subnet), preferred zone first. */
export async function findNetwork(
  clients: AwsClients,
  settings: Pick<ResolvedAwsSettings, "subnetId">,
  offer: Offer,
  signal: AbortSignal,
): Promise<PoolNetwork> {
  if (settings.subnetId !== undefined) {
    const subnetId = settings.subnetId;
    const result = await awsCall("DescribeSubnets", signal, () =>
      clients.ec2.send(new DescribeSubnetsCommand({ SubnetIds: [subnetId] }), { abortSignal: signal }),
    );
    const vpcId = result.Subnets?.[0]?.VpcId;
    const zone = result.Subnets?.[0]?.AvailabilityZone ?? "";
    if (!vpcId)
      throw new ProvisionError({
        provider: PROVIDER_NAME,
        message: `subnet ${subnetId} not found in ${clients.region}`,
      });
    return { vpcId, subnetIds: [subnetId], subnetZones: { [subnetId]: zone } };
  }
  const vpcs = await awsCall("DescribeVpcs", signal, () =>
    clients.ec2.send(new DescribeVpcsCommand({ Filters: [{ Name: "is-default", Values: ["true"] }] }), {
      abortSignal: signal,
    }),
  );
  const vpcId = vpcs.Vpcs?.[0]?.VpcId;
  if (!vpcId) {
    throw new ProvisionError({
      provider: PROVIDER_NAME,
      message: `no default VPC in ${clients.region}: create one (aws ec2 create-default-vpc) or set subnetId`,
    });
  }
  const subnets = await awsCall("DescribeSubnets", signal, () =>
    clients.ec2.send(new DescribeSubnetsCommand({ Filters: [{ Name: "vpc-id", Values: [vpcId] }] }), {
      abortSignal: signal,
    }),
  );
  const all = subnets.Subnets ?? [];
  const defaults = all.filter((subnet) => subnet.DefaultForAz);
  const subnetIds = orderSubnets(defaults.length > 0 ? defaults : all, offer);
  if (subnetIds.length === 0)
    throw new ProvisionError({
      provider: PROVIDER_NAME,
      message: `the default VPC ${vpcId} has no subnets; set subnetId`,
    });
  const subnetZones = Object.fromEntries(
    all
      .filter((subnet) => subnet.SubnetId)
      .map((subnet) => [subnet.SubnetId as string, subnet.AvailabilityZone ?? ""]),
  );
  return { vpcId, subnetIds, subnetZones };
}

/** Creates the pool's security group, tagged with the cluster, in `vpcId`; resolves with its id. */
export async function createSecurityGroup(
  clients: AwsClients,
  clusterId: string,
  vpcId: string,
  tags: Readonly<Record<string, string>>,
  signal: AbortSignal,
): Promise<string> {
  const created = await awsCall("CreateSecurityGroup", signal, () =>
    clients.ec2.send(
      new CreateSecurityGroupCommand({
        GroupName: `skyward-${clusterId}`,
        Description: `Skyward pool ${clusterId}: SSH (port 22), all traffic within the group`,
        VpcId: vpcId,
        TagSpecifications: [{ ResourceType: "security-group", Tags: toAwsTags(tags) }],
      }),
      { abortSignal: signal },
    ),
  );
  const groupId = created.GroupId;
  if (!groupId)
    throw new ProvisionError({
      provider: PROVIDER_NAME,
      message: "CreateSecurityGroup returned no group id",
    });
  return groupId;
}

/**
 * Opens SSH (to `sshIngress`) and all traffic within the group. A group just made may be unknown for
 * a moment (`InvalidGroup.NotFound`, eventual consistency:
 * https://docs.aws.amazon.com/ec2/latest/devguide/eventual-consistency.html): asked again, bounded.
 */
export async function openSecurityGroup(
  clients: AwsClients,
  groupId: string,
  sshIngress: ResolvedAwsSettings["sshIngress"],
  signal: AbortSignal,
): Promise<void> {
  const cidrs =
    sshIngress === "anywhere"
      ? ["0.0.0.0/0"]
      : sshIngress === "client"
        ? [`${await clientAddress(signal)}/32`]
        : [...sshIngress];
  const deadline = Date.now() + 60_000;
  let interval = 500;
  for (;;) {
    try {
      await clients.ec2.send(
        new AuthorizeSecurityGroupIngressCommand({
          GroupId: groupId,
          IpPermissions: [
            {
              IpProtocol: "tcp",
              FromPort: 22,
              ToPort: 22,
              IpRanges: cidrs.map((CidrIp) => ({ CidrIp, Description: "SSH (Skyward)" })),
            },
            // Nodes talk to each other freely (head services, NCCL/gloo) on their private addresses.
            { IpProtocol: "-1", UserIdGroupPairs: [{ GroupId: groupId, Description: "within the pool" }] },
          ],
        }),
        { abortSignal: signal },
      );
      return;
    } catch (error) {
      signal.throwIfAborted();
      const code = awsErrorCode(error);
      if ((code !== "InvalidGroup.NotFound" && code !== "InvalidGroupId.NotFound") || Date.now() >= deadline)
        throw translateAwsError(error, "AuthorizeSecurityGroupIngress", signal);
      await sleep(interval, signal);
      interval = Math.min(interval * 2, 5000);
    }
  }
}

/**
 * Deletes a security group, retrying while it is still in use (the network interfaces of terminated
 * instances let go of it a little later) until `deadline`; resolves with why it is left (still in
 * use, or another API error), or undefined once it is gone (or was already).
 */
export async function deleteSecurityGroup(
  clients: AwsClients,
  groupId: string,
  deadline: number,
  signal: AbortSignal,
): Promise<string | undefined> {
  for (;;) {
    try {
      await clients.ec2.send(new DeleteSecurityGroupCommand({ GroupId: groupId }), { abortSignal: signal });
      return undefined;
    } catch (error) {
      signal.throwIfAborted();
      const code = awsErrorCode(error);
      if (code === "InvalidGroup.NotFound" || code === "InvalidGroupId.NotFound") return undefined;
      if (code !== "DependencyViolation")
        return (translateAwsError(error, `DeleteSecurityGroup ${groupId}`, signal) as Error).message;
      if (Date.now() >= deadline)
        return "still in use (DependencyViolation): the network interfaces of ended instances are let go a little later, or something outside Skyward uses the group; run skyward down again shortly";
      await sleep(Math.min(5000, Math.max(0, deadline - Date.now())), signal);
    }
  }
}
