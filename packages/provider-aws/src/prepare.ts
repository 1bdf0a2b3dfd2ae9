/**
 * `prepare`: what a pool's instances share, made once per cluster before any launch — the machine
 * image (and the root volume's size), the network and security group, the key pair, and the cluster
 * placement group of a multi-node accelerator pool — each tagged with the cluster, and removed again
 * when a later step fails.
 */
import { ConfigurationError, isVolumeStorageClient, type PoolSpec, type Volume } from "@skyward/core";
import type { Cluster, Offer } from "@skyward/core/contract";
import { createClusterId, ownerTag, removePrivateKey, skywardTags } from "@skyward/provider-utils";
import { type AwsClients, PROVIDER_NAME, translateAwsError } from "./aws-api.js";
import { AWS_TAGS } from "./instances.js";
import { createKeyPair, deleteKeyPair, givenKey, type PoolKey } from "./key-pairs.js";
import { resolveMachineImage } from "./machine-images.js";
import { createSecurityGroup, deleteSecurityGroup, findNetwork, openSecurityGroup } from "./networking.js";
import { createPlacementGroup, deletePlacementGroup } from "./placement-groups.js";
import { rememberRegion } from "./regions.js";
import type { ResolvedAwsSettings } from "./settings.js";

/** What the AWS provider keeps per cluster ({@link Cluster.specific}). Holds no secret. */
export interface AwsClusterData {
  /** The region everything is in. */
  readonly region: string;
  /** The VPC the instances run in. */
  readonly vpcId: string;
  /** The subnets instances are launched into, preferred (cheapest spot zone) first. */
  readonly subnetIds: readonly string[];
  /** The security group of the instances (one made for the pool is tagged with the cluster, and removed with it). */
  readonly securityGroupId: string;
  /** The key pair the instances accept. */
  readonly keyName: string;
  /** True when the provider created the key pair (and so removes it, and its file, in teardown). */
  readonly ownsKeyPair: boolean;
  /** The private key's 0600 file on this machine. */
  readonly keyFile: string;
  /** The AMI the instances boot. */
  readonly imageId: string;
  /** Where the AMI came from. */
  readonly imageSource: "setting" | "ssm" | "describe-images";
  /** The AMI's root device, for sizing the root volume; undefined when unknown. */
  readonly rootDeviceName: string | undefined;
  /** The tags on everything of this cluster. */
  readonly tags: Readonly<Record<string, string>>;
  /** The zone of each subnet in {@link AwsClusterData.subnetIds}. */
  readonly subnetZones: Readonly<Record<string, string>>;
  /** The root volume's size, GiB: max(`diskGb` or {@link DEFAULT_ROOT_VOLUME_GB}, the AMI's root snapshot). */
  readonly rootVolumeGb: number | undefined;
  /** The cluster placement group of a multi-node accelerator pool (made for it, removed with it), or null. */
  readonly placementGroup: string | null;
}

/**
 * A volume without keys (no `storage`, or endpoint settings without `accessKeyEnv`/`secretKeyEnv`) is
 * mounted with the instance's role (s3fs `iam_role=auto`, credentials from the instance metadata
 * service), and an instance has a role only when it is launched with an instance profile: without
 * `instanceProfile` such a volume cannot mount, so it is refused before anything starts. (A
 * `@skyward/storage` client's keys are resolved only when each node starts.)
 *
 * @throws {ConfigurationError} naming each such volume's `storage`.
 */
export function refuseRoleVolumesWithoutProfile(
  volumes: readonly Volume[],
  instanceProfile: string | undefined,
): void {
  if (instanceProfile !== undefined) return;
  const issues = volumes.flatMap((volume, index) => {
    const storage = volume.storage;
    if (isVolumeStorageClient(storage)) return [];
    if (storage && (storage.accessKeyEnv !== undefined || storage.secretKeyEnv !== undefined)) return [];
    return [
      {
        path: `volumes[${index}].storage`,
        message: `${volume.bucket} would be mounted with the instance's role, and the AWS provider sets no instanceProfile: set AWS({ instanceProfile }) to a profile whose role may read the bucket, or give storage: { endpoint, accessKeyEnv, secretKeyEnv }`,
      },
    ];
  });
  if (issues.length > 0) throw new ConfigurationError({ issues });
}

/**
 * The root volume of a node when the spec gives no `diskGb` (Ubuntu's image has 8 GiB, which a
 * PyTorch install fills); the AMI's snapshot when that is larger (the Deep Learning images').
 */
export const DEFAULT_ROOT_VOLUME_GB = 64;

/** Pool ids tagged as they are (AWS tag values allow these characters); others are replaced by the cluster id. */
const POOL_TAG_VALUE = /^[A-Za-z0-9 _.:/=+@-]{1,128}$/;

/** Makes what a pool's instances share; see the module's comment. */
export async function prepareCluster(
  settings: ResolvedAwsSettings,
  clients: AwsClients,
  options: { spec: PoolSpec; offer: Offer; poolId: string | undefined; signal: AbortSignal },
): Promise<Cluster<AwsClusterData>> {
  const { spec, offer, signal } = options;
  refuseRoleVolumesWithoutProfile(spec.volumes, settings.instanceProfile);
  // Each prepare (a pool may try several offers) makes its own cluster; the pool's id, when the pool
  // passes it, is tagged too, so `skyward instances` shows the id the pool's events and logs carry.
  const id = createClusterId("sky");
  const poolId = options.poolId !== undefined && POOL_TAG_VALUE.test(options.poolId) ? options.poolId : id;
  // The user's tags first: Skyward's own (which they may not name) always win.
  const tags = Object.freeze({
    ...settings.tags,
    ...skywardTags({ cluster: id, pool: poolId, owner: ownerTag(), region: clients.region }),
    [AWS_TAGS.name]: `skyward-${id}`,
  });
  let createdGroup: string | undefined;
  let createdKey: { keyName: string; keyFile: string } | undefined;
  let createdPlacement: string | undefined;
  try {
    // The image first: an unsupported type fails before anything is made.
    const image = await resolveMachineImage(clients, offer, settings.amiId, signal);
    // `diskGb` is a minimum: a root volume smaller than the image's snapshot is refused by EC2
    // (InvalidBlockDeviceMapping), so the snapshot's size wins — a Deep Learning image's ~100 GiB
    // on a GPU node rather than no node at all.
    const rootVolumeGb =
      image.rootDeviceName === undefined
        ? undefined
        : Math.max(
            spec.diskGb !== undefined ? Math.ceil(spec.diskGb) : DEFAULT_ROOT_VOLUME_GB,
            image.rootSnapshotGb ?? 0,
          );
    await rememberRegion(settings.endpoint, clients.region).catch(() => undefined);
    const network = await findNetwork(clients, settings, offer, signal);
    let securityGroupId = settings.securityGroupId;
    if (securityGroupId === undefined) {
      createdGroup = await createSecurityGroup(clients, id, network.vpcId, tags, signal);
      securityGroupId = createdGroup;
      await openSecurityGroup(clients, createdGroup, settings.sshIngress, signal);
    }
    const key: PoolKey =
      settings.keyName !== undefined && settings.identityFile !== undefined
        ? await givenKey(settings.keyName, settings.identityFile)
        : await createKeyPair(
            clients,
            `skyward-${id}`,
            tags,
            (made) => {
              createdKey = made;
            },
            signal,
          );
    // A multi-node accelerator pool gets a cluster placement group: one zone, close together (NCCL).
    if (spec.nodes.max > 1 && offer.accelerator !== null) {
      const groupName = `skyward-${id}`;
      await createPlacementGroup(clients, groupName, tags, signal);
      createdPlacement = groupName;
    }
    return Object.freeze({
      id,
      provider: PROVIDER_NAME,
      poolId,
      region: clients.region,
      spec,
      offer,
      ssh: Object.freeze({
        user: settings.sshUser,
        port: 22,
        privateKey: key.privateKey,
        identityFile: key.keyFile,
        sudo: settings.sshUser !== "root",
      }),
      specific: Object.freeze({
        region: clients.region,
        vpcId: network.vpcId,
        subnetIds: Object.freeze(network.subnetIds),
        securityGroupId,
        keyName: key.keyName,
        ownsKeyPair: createdKey !== undefined,
        keyFile: key.keyFile,
        imageId: image.imageId,
        imageSource: image.source,
        rootDeviceName: image.rootDeviceName,
        tags,
        subnetZones: Object.freeze(network.subnetZones),
        rootVolumeGb,
        placementGroup: createdPlacement ?? null,
      }),
    });
  } catch (error) {
    // Leave nothing behind: what this attempt created goes (with a fresh deadline, the signal may be spent).
    const cleanup = AbortSignal.timeout(60_000);
    if (createdKey) {
      await deleteKeyPair(clients, createdKey.keyName, cleanup).catch(() => undefined);
      await removePrivateKey(createdKey.keyFile).catch(() => undefined);
    }
    if (createdGroup) await deleteSecurityGroup(clients, createdGroup, 0, cleanup).catch(() => undefined);
    if (createdPlacement)
      await deletePlacementGroup(clients, createdPlacement, cleanup).catch(() => undefined);
    throw translateAwsError(error, "preparing the pool", signal);
  }
}
