/**
 * Compute Engine VMs as the provider finds and ends them: Skyward's labels and the `skyward-tags`
 * metadata item on each, their status in Skyward's words, listing by label across zones, getting,
 * deleting (an unknown name is no error).
 */
import { randomBytes } from "node:crypto";
import type { protos } from "@google-cloud/compute";
import type { InstanceStatus } from "@skyward/core/contract";
import { SKYWARD_TAGS } from "@skyward/provider-utils";
import { type GcpClients, gcpCall } from "./gcp-api.js";
import { gcpError, isNotFound, translateGcpError } from "./gcp-errors.js";

export type RawInstance = protos.google.cloud.compute.v1.IInstance;

/** Call options of the `…Async` listings: they page on demand (the client warns unless this is said). A new object each call: the client adds to it. */
export const noAutoPages = () => ({ autoPaginate: false });

/** The label keys Skyward puts on VMs (`skyward:cluster` → `skyward-cluster`: label keys allow no `:`). */
export const GCP_LABELS = Object.freeze({
  cluster: "skyward-cluster",
  pool: "skyward-pool",
  owner: "skyward-owner",
} as const);

/** The metadata item holding a VM's Skyward tags exactly (labels allow only a few characters). */
export const TAGS_METADATA_KEY = "skyward-tags";

/** A label value: lower-case letters, digits, `_` and `-`, at most 63 characters. */
export function labelValue(value: string): string {
  return value
    .toLowerCase()
    .replace(/[^a-z0-9_-]/g, "-")
    .slice(0, 63);
}

export function statusOf(raw: RawInstance): InstanceStatus {
  switch (raw.status) {
    case "RUNNING":
      return "running";
    case "PROVISIONING":
    case "STAGING":
    case "PENDING":
      return "pending";
    default:
      // STOPPING, SUSPENDING, SUSPENDED, REPAIRING, and TERMINATED (Compute Engine's word for a
      // stopped VM, which still exists and keeps its disk).
      return "stopping";
  }
}

function metadataValue(raw: RawInstance, key: string): string | undefined {
  return raw.metadata?.items?.find((item) => item.key === key)?.value ?? undefined;
}

/** A VM's Skyward tags: the metadata item, else what its labels say. */
export function tagsOf(raw: RawInstance): Record<string, string> {
  const text = metadataValue(raw, TAGS_METADATA_KEY);
  if (text) {
    try {
      const parsed = JSON.parse(text) as unknown;
      if (parsed && typeof parsed === "object" && !Array.isArray(parsed)) {
        const tags: Record<string, string> = {};
        for (const [key, value] of Object.entries(parsed)) if (typeof value === "string") tags[key] = value;
        return tags;
      }
    } catch {
      // fall back to the labels
    }
  }
  const labels = raw.labels ?? {};
  const tags: Record<string, string> = {};
  const cluster = labels[GCP_LABELS.cluster];
  const pool = labels[GCP_LABELS.pool];
  if (cluster) tags[SKYWARD_TAGS.cluster] = cluster;
  if (pool) tags[SKYWARD_TAGS.pool] = pool;
  const zone = raw.zone?.split("/").pop();
  if (zone) tags[SKYWARD_TAGS.region] = zone;
  return tags;
}

export function networkPath(network: string): string {
  return network.includes("/") ? network : `global/networks/${network}`;
}

export function subnetworkPath(subnetwork: string, zone: string): string {
  return subnetwork.includes("/") ? subnetwork : `regions/${regionOfZone(zone)}/subnetworks/${subnetwork}`;
}

export function regionOfZone(zone: string): string {
  return zone.replace(/-[a-z]$/, "");
}

/** A fresh VM name: the cluster id and six hex digits (names: `[a-z]([-a-z0-9]*[a-z0-9])?`, ≤ 63). */
export function vmName(clusterId: string): string {
  return `${clusterId}-${randomBytes(3).toString("hex")}`;
}

/** An `instances.aggregatedList` page as Google's client decodes it (fields it does not know dropped). */
type AggregatedPage = protos.google.cloud.compute.v1.IInstanceAggregatedList;

/**
 * Skyward's VMs matching a label filter, in every zone, every page read. Google's client decodes an
 * answer against Compute Engine's schema and drops what it does not know, so an answer of another
 * shape would read as "no VMs" — and a teardown or `skyward down` would then leave VMs billing. Each
 * page must say it is an `InstanceAggregatedList` (`kind`, which every Compute Engine answer carries:
 * https://cloud.google.com/compute/docs/reference/rest/v1/instances/aggregatedList) with its VMs keyed
 * by zone; any other answer fails loudly (kind `unknown-answer`). The pages are read through the
 * client's own call (`innerApiCalls`), as its `aggregatedListAsync` does, to see each page whole.
 */
export async function listVms(
  clients: GcpClients,
  filter: string,
  signal: AbortSignal,
): Promise<RawInstance[]> {
  const found: RawInstance[] = [];
  const notUnderstood = (why: string) =>
    gcpError("unknown-answer", `Compute Engine's list of instances was not understood: ${why}`);
  await gcpCall("listing instances", signal, () => clients.instances.initialize());
  const aggregatedList = clients.instances.innerApiCalls.aggregatedList as (
    request: protos.google.cloud.compute.v1.IAggregatedListInstancesRequest,
    options: { autoPaginate: boolean },
  ) => Promise<[unknown, unknown, AggregatedPage | undefined]>;
  const tokens = new Set<string>();
  let pageToken: string | undefined;
  do {
    const [, , page] = await gcpCall("listing instances", signal, () =>
      aggregatedList(
        { project: clients.project, filter, ...(pageToken ? { pageToken } : {}) },
        noAutoPages(),
      ),
    );
    if (page?.kind !== "compute#instanceAggregatedList")
      throw notUnderstood(
        `expected kind "compute#instanceAggregatedList", got ${JSON.stringify(page?.kind ?? null)}`,
      );
    for (const [scope, scoped] of Object.entries(page.items ?? {})) {
      if (!scope.startsWith("zones/")) throw notUnderstood(`unexpected scope ${JSON.stringify(scope)}`);
      found.push(...(scoped.instances ?? []));
    }
    pageToken = page.nextPageToken || undefined;
    if (pageToken !== undefined && tokens.has(pageToken))
      throw notUnderstood(`page "${pageToken}" came twice`);
    if (pageToken !== undefined) tokens.add(pageToken);
  } while (pageToken !== undefined);
  return found;
}

export async function getVm(clients: GcpClients, zone: string, name: string, signal: AbortSignal) {
  try {
    const [raw] = await gcpCall(`getting instance ${name}`, signal, () =>
      clients.instances.get({ project: clients.project, zone, instance: name }),
    );
    return raw;
  } catch (error) {
    if (isNotFound(error)) return null;
    throw translateGcpError(error, `getting instance ${name}`, signal);
  }
}

export async function deleteVms(
  clients: GcpClients,
  zone: string,
  names: readonly string[],
  signal: AbortSignal,
) {
  const valid = [...new Set(names)].filter((name) => /^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$/.test(name));
  await Promise.all(
    valid.map(async (name) => {
      try {
        await gcpCall(`deleting instance ${name}`, signal, () =>
          clients.instances.delete({ project: clients.project, zone, instance: name }),
        );
      } catch (error) {
        if (!isNotFound(error)) throw translateGcpError(error, `deleting instance ${name}`, signal);
      }
    }),
  );
}

/** The label filter of a cluster's VMs. */
export function clusterFilter(clusterId: string): string {
  return `labels.${GCP_LABELS.cluster} = "${labelValue(clusterId)}"`;
}
