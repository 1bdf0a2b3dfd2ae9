/**
 * What the fake Compute Engine checks of an insert before it makes anything, each as the real one
 * refuses it (HTTP 400/409 with its reason): the VM's name, a name already taken, the machine type
 * and accelerator types of the zone, GPUs only with `onHostMaintenance: TERMINATE`
 * (https://cloud.google.com/compute/docs/gpus/gpu-host-maintenance), Hyperdisk-only series refusing
 * Persistent Disk (https://cloud.google.com/compute/docs/disks/hyperdisks#machine-type-support), a run
 * duration without its termination action
 * (https://cloud.google.com/compute/docs/instances/limit-vm-runtime), spot with automatic restart.
 * Also the label filters of `instances.list` and `aggregatedList`, and what a VM bills.
 */
import type { FakeRestAnswer } from "@skyward/testing";
import { googleError } from "./fake-gce-answers.js";
import { acceleratorTypes, machineTypes, PROJECT } from "./fixtures.js";

/** The refusal of an insert of `body` in `zone` (`taken`: a VM of its name is there), or undefined. */
export function insertRefusal(
  zone: string,
  body: Record<string, unknown>,
  taken: (name: string) => boolean,
): FakeRestAnswer | undefined {
  const name = String(body.name ?? "");
  if (!/^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$/.test(name))
    return googleError(400, `Invalid value for field 'resource.name': '${name}'.`, "invalid");
  if (taken(name))
    return googleError(
      409,
      `The resource 'projects/${PROJECT}/zones/${zone}/instances/${name}' already exists`,
      "alreadyExists",
    );
  const machineType = String(body.machineType ?? "")
    .split("/")
    .pop();
  const type = machineTypes(zone).find((entry) => entry.name === machineType);
  if (!type)
    return googleError(
      400,
      `Invalid value for field 'resource.machineType': '${String(body.machineType)}'. Machine type with name '${machineType}' does not exist in zone '${zone}'.`,
      "invalid",
    );
  const scheduling = (body.scheduling ?? {}) as Record<string, unknown>;
  const guest = (body.guestAccelerators ?? []) as { acceleratorType?: string; acceleratorCount?: number }[];
  for (const accelerator of guest) {
    const acceleratorName = String(accelerator.acceleratorType ?? "")
      .split("/")
      .pop();
    const known = acceleratorTypes(zone).find((entry) => entry.name === acceleratorName);
    if (!known || (accelerator.acceleratorCount ?? 0) > known.maximumCardsPerInstance)
      return googleError(
        400,
        `Invalid value for field 'resource.guestAccelerators[0].acceleratorType': '${String(accelerator.acceleratorType)}'.`,
        "invalid",
      );
  }
  const hasGpu = guest.length > 0 || (type.accelerators?.length ?? 0) > 0;
  if (hasGpu && scheduling.onHostMaintenance !== "TERMINATE")
    // https://cloud.google.com/compute/docs/gpus/gpu-host-maintenance
    return googleError(400, "Instances with guest accelerators do not support live migration.", "badRequest");
  // Series that boot from Hyperdisk only refuse Persistent Disk
  // (https://cloud.google.com/compute/docs/disks/hyperdisks#machine-type-support).
  const bootDisk = ((body.disks ?? []) as { initializeParams?: { diskType?: string } }[])[0];
  const diskType = String(bootDisk?.initializeParams?.diskType ?? "pd-standard")
    .split("/")
    .pop() as string;
  if (/^(c4|c4a|c4d|n4|h3|m4|x4|a4|g4)-/.test(machineType ?? "") && diskType.startsWith("pd-"))
    return googleError(
      400,
      `Invalid value for field 'resource.disks[0].initializeParams.diskType': '${diskType}'. ${diskType} disk type cannot be used by ${machineType} machine type.`,
      "invalid",
    );
  // A run-duration limit needs its termination action (https://cloud.google.com/compute/docs/instances/limit-vm-runtime).
  if (scheduling.maxRunDuration !== undefined && scheduling.instanceTerminationAction === undefined)
    return googleError(
      400,
      "Invalid value for field 'resource.scheduling.instanceTerminationAction': ''. instanceTerminationAction must be specified when maxRunDuration or terminationTime is set.",
      "invalid",
    );
  const spot = scheduling.provisioningModel === "SPOT";
  if (spot && scheduling.automaticRestart === true)
    return googleError(400, "Spot VMs cannot have automaticRestart set to true.", "badRequest");
  return undefined;
}

/** What a VM bills an hour: the price Skyward's tags on it say (its market's price in the offer). */
export function billedPrice(instance: Record<string, unknown> & { labels?: Record<string, string> }): number {
  const items = (instance.metadata as { items?: { key: string; value: string }[] } | undefined)?.items ?? [];
  const tags = JSON.parse(items.find((item) => item.key === "skyward-tags")?.value ?? "{}") as Record<
    string,
    string
  >;
  return Number(tags["skyward:hourly-price"] ?? Number.NaN);
}

/** The label filters `instances.list`/`aggregatedList` take: `labels.K:*` and `labels.K = "V"`. */
export function matchesFilter(
  instance: Record<string, unknown> & { labels?: Record<string, string> },
  filter: string | null,
): boolean {
  if (!filter) return true;
  const labels = instance.labels ?? {};
  return filter
    .split(/\s+AND\s+/i)
    .map((term) => term.trim().replace(/^\((.*)\)$/, "$1"))
    .every((term) => {
      const has = /^labels\.([a-z0-9_-]+):\*$/.exec(term);
      if (has?.[1]) return has[1] in labels;
      const equals = /^labels\.([a-z0-9_-]+)\s*=\s*"?([^"]*)"?$/.exec(term);
      if (equals?.[1]) return labels[equals[1]] === equals[2];
      throw new Error(`the fake does not understand the filter ${JSON.stringify(term)}`);
    });
}
