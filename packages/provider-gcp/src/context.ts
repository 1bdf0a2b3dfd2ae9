/**
 * What the GCP provider's parts share: its settings, its Compute Engine clients (made on first use),
 * its keys directory and its view of VMs.
 */
import type { Cluster, ClusterFromTags, RecordedCluster } from "@skyward/core/contract";
import type { GcpClients } from "./gcp-api.js";
import type { InstanceView } from "./instance-view.js";
import type { GcpClusterData } from "./offer-data.js";
import { isZone, type ResolvedGcpSettings } from "./settings.js";

export interface GcpProviderContext {
  readonly settings: ResolvedGcpSettings;
  readonly clientsOf: () => GcpClients;
  readonly keysDirectory: () => string;
  readonly view: InstanceView;
}

/** The cluster's zone; a cluster rebuilt from an instance's tags (`skyward down`) has only its region tag. */
export function clusterZone(
  settings: ResolvedGcpSettings,
  cluster: Cluster<GcpClusterData> | RecordedCluster<GcpClusterData> | ClusterFromTags,
): string {
  return cluster.specific?.zone ?? (isZone(cluster.region ?? "") ? cluster.region : settings.zone);
}
