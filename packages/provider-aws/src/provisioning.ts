/**
 * `provision`: `RunInstances` for a prepared cluster, across the markets its allocation asks and the
 * subnets (zones) it may use (the base's market loop, `runInstancesAcrossMarkets`), each launch retried with its own `ClientToken`
 * so that a call EC2 accepted but never answered launches nothing twice. The instances are handed
 * back as EC2 answered (pending, as a rule): the pool polls `getInstance` until they run, and
 * terminates them when they do not.
 */
import { randomUUID } from "node:crypto";
import { type _InstanceType, type Instance as Ec2Instance, RunInstancesCommand } from "@aws-sdk/client-ec2";
import { ProvisionError } from "@skyward/core";
import type { Cluster } from "@skyward/core/contract";
import { launchableMarketsByZone, type Market } from "@skyward/provider-utils";
import { MAX_LAUNCH_ATTEMPTS, runInstancesAcrossMarkets } from "./allocation.js";
import {
  type AwsClients,
  awsErrorCode,
  isCapacityError,
  mayHaveBeenAccepted,
  PROVIDER_NAME,
  sleep,
  translateAwsError,
} from "./aws-api.js";
import { bootWatchdogSeconds, renderBootWatchdog } from "./boot-watchdog.js";
import {
  AWS_TAGS,
  describeInstances,
  type LaunchLedger,
  NOT_FOUND_RETRY_MS,
  terminateIds,
  toAwsTags,
} from "./instances.js";
import type { AwsOfferData } from "./offers.js";
import type { AwsClusterData } from "./prepare.js";
import type { ResolvedAwsSettings } from "./settings.js";

/**
 * The most `RunInstances` calls in a row that find no capacity for one cluster, over all its
 * `provision` calls (the pool asks again after "no capacity"): then `provision` fails for good and
 * the pool tries its next offer.
 */
export const CLUSTER_FAILED_LAUNCH_LIMIT = 16;

/** How often one launch is asked (the same `ClientToken` each time) before it fails. */
const ATTEMPTS_PER_LAUNCH = 3;

/** What `provision` keeps between calls. */
export interface ProvisionState {
  readonly settings: ResolvedAwsSettings;
  readonly ledger: LaunchLedger;
  /** Failed `RunInstances` calls in a row (no capacity) per cluster. */
  readonly failedLaunches: Map<string, number>;
}

/** The `RunInstances` request of one launch, less its token. */
function runInstancesInput(
  settings: ResolvedAwsSettings,
  cluster: Cluster<AwsClusterData>,
  request: { market: Market; subnetId: string; count: number },
  price: number | null,
  userData: string,
) {
  const { offer, specific } = cluster;
  const tags = toAwsTags({
    ...specific.tags,
    [AWS_TAGS.offer]: offer.id,
    ...(price !== null ? { [AWS_TAGS.hourlyPrice]: String(price) } : {}),
  });
  // With a subnet of the user's, the network interface asks for a public address (a subnet made by
  // hand seldom maps one on launch), unless associatePublicIp is false; the default VPC's subnets map
  // one on launch, so there only an interface saying false goes without.
  const network =
    settings.subnetId !== undefined || !settings.associatePublicIp
      ? {
          NetworkInterfaces: [
            {
              DeviceIndex: 0,
              SubnetId: request.subnetId,
              Groups: [specific.securityGroupId],
              AssociatePublicIpAddress: settings.associatePublicIp,
              DeleteOnTermination: true,
            },
          ],
        }
      : { SubnetId: request.subnetId, SecurityGroupIds: [specific.securityGroupId] };
  return {
    ImageId: specific.imageId,
    InstanceType: offer.instanceType as _InstanceType,
    // All or none in this zone: the pool's nodes share one.
    MinCount: request.count,
    MaxCount: request.count,
    KeyName: specific.keyName,
    ...network,
    ...(specific.placementGroup ? { Placement: { GroupName: specific.placementGroup } } : {}),
    InstanceInitiatedShutdownBehavior: "terminate" as const,
    UserData: userData,
    MetadataOptions: { HttpTokens: "required" as const, HttpEndpoint: "enabled" as const },
    ...(settings.instanceProfile !== undefined
      ? {
          IamInstanceProfile: settings.instanceProfile.startsWith("arn:")
            ? { Arn: settings.instanceProfile }
            : { Name: settings.instanceProfile },
        }
      : {}),
    ...(request.market === "spot"
      ? {
          InstanceMarketOptions: {
            MarketType: "spot" as const,
            SpotOptions: {
              SpotInstanceType: "one-time" as const,
              InstanceInterruptionBehavior: "terminate" as const,
              // AWS advises against a max price (a spot price never exceeds on demand anyway); the
              // user may ask for the pool's cap instead, so that a spot node never bills above it.
              ...(settings.spotMaxPrice === "maxHourlyCost" && cluster.spec.maxHourlyCost !== undefined
                ? { MaxPrice: String(cluster.spec.maxHourlyCost) }
                : {}),
            },
          },
        }
      : {}),
    ...(specific.rootVolumeGb !== undefined && specific.rootDeviceName !== undefined
      ? {
          BlockDeviceMappings: [
            {
              DeviceName: specific.rootDeviceName,
              Ebs: {
                VolumeSize: specific.rootVolumeGb,
                VolumeType: "gp3" as const,
                DeleteOnTermination: true,
              },
            },
          ],
        }
      : {}),
    TagSpecifications: [
      { ResourceType: "instance" as const, Tags: tags },
      { ResourceType: "volume" as const, Tags: tags },
    ],
  };
}

/**
 * Launches `count` instances of `cluster` and resolves with them as EC2 answered (pending, as a rule:
 * the pool waits for "running" through `getInstance`); fails with `NoCapacityError` when none was
 * launched. Whatever a failed provision launched is terminated.
 */
export async function provisionInstances(
  state: ProvisionState,
  clients: AwsClients,
  cluster: Cluster<AwsClusterData>,
  count: number,
  signal: AbortSignal,
): Promise<Ec2Instance[]> {
  const { settings, ledger, failedLaunches } = state;
  const { spec, offer, specific } = cluster;
  const userData = Buffer.from(
    renderBootWatchdog({ root: settings.root, seconds: bootWatchdogSeconds(spec) }),
  ).toString("base64");
  const created: Ec2Instance[] = [];
  const zoneOf = (subnetId: string) => specific.subnetZones?.[subnetId] ?? "";
  /** The spot price in a subnet's zone, when the offer has one for it. */
  const spotPriceIn = (subnetId: string): number | undefined =>
    (offer.specific as Partial<AwsOfferData>).spotPriceByZone?.[zoneOf(subnetId)];
  const priceOf = (market: Market, subnetId: string): number | null =>
    market === "on-demand" ? offer.onDemandPrice : (spotPriceIn(subnetId) ?? offer.spotPrice);
  const adopt = (launched: readonly Ec2Instance[]) => {
    const instances = launched.filter((raw) => !!raw.InstanceId);
    ledger.record(
      instances.map((raw) => raw.InstanceId as string),
      cluster.id,
    );
    created.push(...instances);
    failedLaunches.delete(cluster.id);
    return instances;
  };
  /** Every `ClientToken` this provision sent: what EC2 accepted without saying so is found by them. */
  const clientTokens: string[] = [];
  /** The instances EC2 launched for `tokens` (the `client-token` filter of DescribeInstances). */
  const launchedWith = (tokens: readonly string[], callSignal: AbortSignal) =>
    tokens.length === 0
      ? Promise.resolve([])
      : describeInstances(clients, [{ Name: "client-token", Values: [...tokens] }], callSignal);
  /**
   * One launch, asked again ({@link ATTEMPTS_PER_LAUNCH} times at most, with backoff) on throttling,
   * AWS's transient errors, a call that got no answer, and a security group or placement group not
   * visible yet (eventual consistency); a lack of capacity or a quota is the caller's to handle, never
   * repeated here. Every attempt carries the same `ClientToken`: a call EC2 accepted before it timed
   * out or failed with a 5xx is answered, when asked again, with the instances it launched, and
   * launches nothing more (https://docs.aws.amazon.com/ec2/latest/devguide/ec2-api-idempotency.html).
   * When the last attempt also fails that way, the instances the token launched (if any) are looked
   * up and kept as this launch's.
   */
  const launch = async (request: { market: Market; subnetId: string; count: number }) => {
    const clientToken = randomUUID();
    clientTokens.push(clientToken);
    const input = {
      ...runInstancesInput(settings, cluster, request, priceOf(request.market, request.subnetId), userData),
      ClientToken: clientToken,
    };
    for (let attempt = 1; ; attempt += 1) {
      // Until answered, the launch may have started instances no one was told of (teardown looks).
      ledger.sent(clientToken, cluster.id);
      try {
        const result = await clients.ec2Launch.send(new RunInstancesCommand(input), { abortSignal: signal });
        ledger.answered(clientToken);
        // The tags were put on at launch (TagSpecifications); an answer that leaves them out gets them
        // here, so the instance handed back carries its cluster, offer and price as later reads do.
        const tags = input.TagSpecifications[0]?.Tags ?? [];
        return adopt(
          (result.Instances ?? []).map((raw) => (raw.Tags?.length ? raw : { ...raw, Tags: tags })),
        );
      } catch (error) {
        const unanswered = mayHaveBeenAccepted(error);
        if (!signal.aborted && !unanswered) ledger.answered(clientToken);
        signal.throwIfAborted();
        if (isCapacityError(error)) failedLaunches.set(cluster.id, (failedLaunches.get(cluster.id) ?? 0) + 1);
        const code = awsErrorCode(error);
        const notVisibleYet =
          code === "InvalidGroup.NotFound" ||
          code === "InvalidGroupId.NotFound" ||
          code === "InvalidPlacementGroup.Unknown";
        if (attempt < ATTEMPTS_PER_LAUNCH && (notVisibleYet || unanswered)) {
          await sleep(1000 * 2 ** (attempt - 1), signal);
          continue;
        }
        if (unanswered) {
          const found = await launchedWith([clientToken], signal);
          if (found.length > 0) {
            ledger.answered(clientToken);
            return adopt(found);
          }
        }
        throw error;
      }
    }
  };
  const cleanUp = async () => {
    const cleanupSignal = AbortSignal.timeout(NOT_FOUND_RETRY_MS + 30_000);
    // A launch that failed after EC2 accepted it left instances nobody was told of: found by token.
    const unknown = await launchedWith(clientTokens, cleanupSignal).catch(() => []);
    await terminateIds(
      clients,
      [...created, ...unknown].map((raw) => raw.InstanceId ?? ""),
      ledger,
      cleanupSignal,
    ).catch(() => undefined);
  };
  // The pool asks `provision` again after "no capacity" (up to its maxProvisionAttempts): the
  // cluster's failed launches in a row are bounded too, then the pool moves on to its next offer.
  const failedSoFar = failedLaunches.get(cluster.id) ?? 0;
  if (failedSoFar >= CLUSTER_FAILED_LAUNCH_LIMIT)
    throw new ProvisionError({
      provider: PROVIDER_NAME,
      message: `no capacity for ${offer.instanceType} in ${clients.region} after ${failedSoFar} RunInstances calls in a row for this pool (at most ${CLUSTER_FAILED_LAUNCH_LIMIT}); try another instance type or region, or later`,
      isRetryable: false,
    });
  try {
    // The nodes share a zone: a later call (nodes replaced, or missing after a short answer) goes
    // where the cluster's instances already run.
    const running = await describeInstances(
      clients,
      [
        { Name: `tag:${AWS_TAGS.cluster}`, Values: [cluster.id] },
        { Name: "instance-state-name", Values: ["pending", "running"] },
      ],
      signal,
    );
    const inUse = running.map((raw) => raw.SubnetId).find((id) => id && specific.subnetIds.includes(id));
    // The base's price rule, zone by zone: spot prices differ by Availability Zone, so each subnet's
    // market is judged at its zone's price (and never launched at an unknown one).
    const launches = launchableMarketsByZone(
      cluster,
      inUse !== undefined ? [inUse] : specific.subnetIds,
      (subnetId) => {
        const spotPrice = spotPriceIn(subnetId);
        return spotPrice !== undefined ? { spotPrice } : {};
      },
    );
    await runInstancesAcrossMarkets({
      count,
      launches,
      signal,
      instanceType: offer.instanceType,
      region: clients.region,
      maxAttempts: Math.min(MAX_LAUNCH_ATTEMPTS, CLUSTER_FAILED_LAUNCH_LIMIT - failedSoFar),
      launch,
    });
  } catch (error) {
    await cleanUp();
    throw translateAwsError(error, `RunInstances (${offer.instanceType})`, signal);
  }
  return created;
}
