/**
 * What a VM of a pool is made of when it is created: machine type and GPUs, the boot disk (its type
 * per series), scheduling (spot or standard, host maintenance, Compute Engine's run-duration guard),
 * the metadata (the login key, OS Login off for the instance, the boot watchdog, Skyward's tags), the
 * labels, the network and the service account.
 */
import type { Cluster } from "@skyward/core/contract";
import { type Market, SKYWARD_TAGS } from "@skyward/provider-utils";
import { bootDiskType } from "./machine-series.js";
import type { GcpClusterData, GcpOfferData } from "./offer-data.js";
import type { ResolvedGcpSettings } from "./settings.js";
import {
  GCP_LABELS,
  labelValue,
  networkPath,
  type RawInstance,
  subnetworkPath,
  TAGS_METADATA_KEY,
} from "./vms.js";

const SCOPES = ["https://www.googleapis.com/auth/cloud-platform"];

/**
 * The Instance resource `instances.insert` gets for one VM of `cluster` in `market`
 * (https://cloud.google.com/compute/docs/reference/rest/v1/instances/insert).
 */
export function instanceResource(
  settings: ResolvedGcpSettings,
  cluster: Cluster<GcpClusterData>,
  market: Market,
  name: string,
  startupScript: string,
): RawInstance {
  const { offer, specific } = cluster;
  const data = offer.specific as unknown as GcpOfferData;
  const zone = specific.zone;
  const spot = market === "spot";
  const price = spot ? offer.spotPrice : offer.onDemandPrice;
  const tags: Record<string, string> = {
    ...specific.tags,
    [SKYWARD_TAGS.offer]: offer.id,
    ...(price !== null ? { [SKYWARD_TAGS.hourlyPrice]: String(price) } : {}),
    ...(spot ? { [SKYWARD_TAGS.spot]: "1" } : {}),
  };
  const labels = {
    [GCP_LABELS.cluster]: labelValue(cluster.id),
    ...(cluster.poolId ? { [GCP_LABELS.pool]: labelValue(cluster.poolId) } : {}),
    ...(tags[SKYWARD_TAGS.owner]
      ? { [GCP_LABELS.owner]: labelValue(tags[SKYWARD_TAGS.owner] as string) }
      : {}),
  };
  return {
    name,
    machineType: `zones/${zone}/machineTypes/${data.machineType}`,
    labels,
    tags: { items: [specific.networkTag] },
    metadata: {
      items: [
        {
          // USERNAME:KEY_TYPE KEY USERNAME (https://cloud.google.com/compute/docs/connect/add-ssh-keys#metadata).
          key: "ssh-keys",
          value: `${settings.sshUser}:${specific.publicKey.trim().split(/\s+/).slice(0, 2).join(" ")} ${settings.sshUser}`,
        },
        { key: "startup-script", value: startupScript },
        { key: TAGS_METADATA_KEY, value: JSON.stringify(tags) },
        // A project with OS Login on ignores `ssh-keys`: the VM would boot, bill and be unreachable.
        // The instance's own value wins over the project's
        // (https://cloud.google.com/compute/docs/oslogin/set-up-oslogin#disable_os_login).
        { key: "enable-oslogin", value: "FALSE" },
        ...(data.gpu ? [{ key: "install-nvidia-driver", value: "True" }] : []),
      ],
    },
    disks: [
      {
        boot: true,
        autoDelete: true,
        initializeParams: {
          sourceImage: specific.image,
          diskSizeGb: String(specific.diskGb),
          diskType: `zones/${zone}/diskTypes/${bootDiskType(data.machineType, settings.diskType) as string}`,
          labels,
        },
      },
    ],
    networkInterfaces: [
      {
        network: networkPath(settings.network),
        ...(settings.subnetwork !== undefined
          ? { subnetwork: subnetworkPath(settings.subnetwork, zone) }
          : {}),
        accessConfigs: [{ name: "External NAT", type: "ONE_TO_ONE_NAT" }],
      },
    ],
    ...(data.acceleratorType
      ? {
          guestAccelerators: [
            {
              acceleratorType: `zones/${zone}/acceleratorTypes/${data.acceleratorType}`,
              acceleratorCount: data.acceleratorCount,
            },
          ],
        }
      : {}),
    scheduling: {
      ...(spot
        ? {
            provisioningModel: "SPOT",
            instanceTerminationAction: "DELETE",
            onHostMaintenance: "TERMINATE",
            automaticRestart: false,
          }
        : {
            provisioningModel: "STANDARD",
            // VMs with GPUs cannot live-migrate (https://cloud.google.com/compute/docs/gpus/gpu-host-maintenance).
            onHostMaintenance: data.gpu ? "TERMINATE" : "MIGRATE",
            automaticRestart: true,
          }),
      // Compute Engine deletes the VM at its deadline itself, whoever else is gone
      // (https://cloud.google.com/compute/docs/instances/limit-vm-runtime).
      ...(settings.maxRunDuration !== undefined
        ? {
            maxRunDuration: { seconds: String(settings.maxRunDuration) },
            instanceTerminationAction: "DELETE",
          }
        : {}),
    },
    serviceAccounts: [{ email: settings.serviceAccount, scopes: SCOPES }],
  };
}
