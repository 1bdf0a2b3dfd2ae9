/**
 * How a Compute Engine VM looks to Skyward: its status, addresses and SSH coordinates (or those of a
 * test's stand-in host, through the `sshAddress` seam, asked once per VM).
 */
import type { Instance } from "@skyward/core/contract";
import {
  hourlyPriceFromTags,
  instanceSsh,
  rememberedStandIns,
  SKYWARD_TAGS,
  sshReachableStatus,
} from "@skyward/provider-utils";
import type { GcpInstanceAddresses, GcpSshAddressMapping, ResolvedGcpSettings } from "./settings.js";
import { type RawInstance, statusOf, tagsOf } from "./vms.js";

/** The provider's view of its VMs. */
export interface InstanceView {
  /** The stand-in of a VM (the test seam), or undefined without one. */
  mappingOf(addresses: GcpInstanceAddresses): GcpSshAddressMapping | undefined;
  /** A VM as a Skyward instance; SSH coordinates once it runs. */
  toInstance(raw: RawInstance, identityFile: string | undefined, fallbackOfferId: string): Instance;
}

export function createInstanceView(settings: ResolvedGcpSettings): InstanceView {
  const mappingOf = rememberedStandIns(settings.sshAddress);

  const toInstance = (
    raw: RawInstance,
    identityFile: string | undefined,
    fallbackOfferId: string,
  ): Instance => {
    const id = raw.name ?? "";
    const tags = tagsOf(raw);
    const nic = raw.networkInterfaces?.[0];
    const publicIp = nic?.accessConfigs?.[0]?.natIP ?? null;
    const status = statusOf(raw);
    const mapping =
      status === "running" ? mappingOf({ id, publicIp, privateIp: nic?.networkIP ?? null }) : undefined;
    const privateIp = mapping?.privateIp ?? nic?.networkIP ?? null;
    const host = mapping?.host ?? publicIp;
    const ssh =
      status === "running" && host
        ? Object.freeze({
            ...instanceSsh({ host, port: 22, user: settings.sshUser }, identityFile, mapping),
            root: mapping?.root ?? settings.root,
          })
        : null;
    const created = Date.parse(raw.creationTimestamp ?? "");
    return Object.freeze({
      id,
      status: sshReachableStatus(status, ssh),
      publicIp,
      privateIp,
      ssh,
      spot: raw.scheduling?.provisioningModel === "SPOT" || raw.scheduling?.preemptible === true,
      hourlyPrice: hourlyPriceFromTags(tags),
      offerId: tags[SKYWARD_TAGS.offer] ?? fallbackOfferId,
      createdAt: Number.isFinite(created) ? created : Date.now(),
      tags: Object.freeze(tags),
    });
  };

  return { mappingOf, toInstance };
}
