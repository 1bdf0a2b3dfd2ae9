/**
 * `prepare`: what a pool's VMs need before the first is created — the offer checked, the GPU quotas
 * read, the SSH key pair, and the pool's two firewall rules (SSH in, and everything between its nodes).
 */
import type { Cluster, Offer, PoolSpec } from "@skyward/core/contract";
import { ProvisionError } from "@skyward/core/contract";
import { createClusterId, marketsFor, ownerTag, requireOwnOffer, skywardTags } from "@skyward/provider-utils";
import { ensureSshKeyPair } from "@skyward/ssh";
import type { GcpProviderContext } from "./context.js";
import { createFirewall, deleteFirewall, type RawFirewall } from "./firewalls.js";
import { PROVIDER_NAME } from "./gcp-api.js";
import { bootDiskType } from "./machine-series.js";
import type { GcpClusterData, GcpOfferData } from "./offer-data.js";
import { checkProjectAccess } from "./preflight.js";
import { marketsWithGpuQuota } from "./quotas.js";
import { networkPath, regionOfZone } from "./vms.js";

/** The boot image of CPU VMs when none is set. */
export const DEFAULT_CPU_IMAGE = "projects/ubuntu-os-cloud/global/images/family/ubuntu-2204-lts";
/** The boot image of Arm CPU VMs (T2A, C4A) when none is set. */
export const DEFAULT_ARM_IMAGE = "projects/ubuntu-os-cloud/global/images/family/ubuntu-2204-lts-arm64";
/** The boot image of GPU VMs when none is set: a Deep Learning VM image (NVIDIA driver, CUDA 12.8). */
export const DEFAULT_GPU_IMAGE =
  "projects/deeplearning-platform-release/global/images/family/common-cu128-ubuntu-2204-nvidia-570";

export async function prepareCluster(
  { settings, clientsOf, keysDirectory }: GcpProviderContext,
  { spec, offer, poolId, signal }: { spec: PoolSpec; offer: Offer; poolId?: string; signal: AbortSignal },
): Promise<Cluster<GcpClusterData>> {
  requireOwnOffer(offer, PROVIDER_NAME, "GCP");
  const data = offer.specific as Partial<GcpOfferData>;
  if (typeof data.zone !== "string" || typeof data.machineType !== "string")
    throw new ProvisionError({
      provider: PROVIDER_NAME,
      message: `offer ${offer.id} carries no zone and machine type`,
    });
  const diskType = bootDiskType(data.machineType, settings.diskType);
  if (typeof diskType !== "string")
    throw new ProvisionError({ provider: PROVIDER_NAME, message: diskType.refused, isRetryable: false });
  const clients = clientsOf();
  // A project whose VMs could not be reached or not be created fails here, naming what to fix.
  await checkProjectAccess(clients, settings, signal);
  // A GPU pool no market's quota admits fails here, before anything is made, naming the quotas.
  if (typeof data.gpuType === "string" && (data.gpuCount ?? 0) > 0)
    await marketsWithGpuQuota(
      clients,
      {
        region: regionOfZone(data.zone),
        acceleratorType: data.gpuType,
        gpusPerNode: data.gpuCount ?? 0,
        markets: marketsFor(spec.allocation, offer),
      },
      signal,
    );
  const keys = await ensureSshKeyPair(keysDirectory(), "gcp_ed25519");
  const clusterId = createClusterId("sky");
  const zone = data.zone;
  const tags = skywardTags({ cluster: clusterId, pool: poolId ?? "", region: zone, owner: ownerTag() });
  const networkTag = clusterId;
  const description = JSON.stringify(tags);
  const rules: RawFirewall[] = [
    {
      name: `${clusterId}-ssh`,
      description,
      network: networkPath(settings.network),
      direction: "INGRESS",
      sourceRanges: ["0.0.0.0/0"],
      targetTags: [networkTag],
      allowed: [{ IPProtocol: "tcp", ports: ["22"] }],
    },
    {
      // Nodes talk to each other freely (head services, NCCL/gloo) on their internal addresses.
      name: `${clusterId}-internal`,
      description,
      network: networkPath(settings.network),
      direction: "INGRESS",
      sourceTags: [networkTag],
      targetTags: [networkTag],
      allowed: [{ IPProtocol: "all" }],
    },
  ];
  const created: string[] = [];
  try {
    for (const rule of rules) {
      await createFirewall(clients, rule, signal);
      created.push(rule.name as string);
    }
  } catch (error) {
    // Leave nothing behind: what this attempt created goes (with a fresh deadline, the signal may be spent).
    const cleanup = AbortSignal.timeout(60_000);
    for (const name of created) await deleteFirewall(clients, name, cleanup).catch(() => false);
    throw error;
  }
  return Object.freeze({
    id: clusterId,
    provider: PROVIDER_NAME,
    poolId: poolId ?? "",
    region: zone,
    spec,
    offer,
    ssh: Object.freeze({
      user: settings.sshUser,
      identityFile: keys.identityFile,
      sudo: settings.sshUser !== "root",
    }),
    specific: Object.freeze({
      project: clients.project,
      zone,
      networkTag,
      firewallRules: Object.freeze(rules.map((rule) => rule.name as string)),
      publicKey: keys.publicKey,
      identityFile: keys.identityFile,
      image:
        settings.image ??
        (data.gpu
          ? DEFAULT_GPU_IMAGE
          : offer.architecture === "arm64"
            ? DEFAULT_ARM_IMAGE
            : DEFAULT_CPU_IMAGE),
      diskGb: Math.max(settings.diskGb, Math.ceil(spec.diskGb ?? 0)),
      tags: Object.freeze(tags),
    }),
  });
}
