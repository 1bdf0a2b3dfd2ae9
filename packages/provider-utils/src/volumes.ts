/**
 * Volumes on providers whose machines cannot mount them: a container without FUSE (no `/dev/fuse`,
 * no `CAP_SYS_ADMIN`) cannot run s3fs, so its provider refuses the spec's volumes in `prepare`,
 * before anything is created, rather than fail each node in the volumes phase after it is paid for.
 */
import { ConfigurationError, type Volume } from "@skyward/core";

/** Options of {@link refuseVolumesWithoutFuse}. */
export interface RefuseVolumesOptions {
  /** The provider as users name it (`RunPod`). */
  readonly provider: string;
  /** What its machines are (`pods`, `instances`), for the message. */
  readonly machines: string;
}

/**
 * Refuses every volume of a spec on a provider whose containers have no FUSE, naming each
 * `volumes[N]`, the provider and what to do instead. Does nothing without volumes.
 *
 * ```ts
 * import type { Volume } from "@skyward/core";
 * import { refuseVolumesWithoutFuse } from "@skyward/provider-utils";
 *
 * const volumes: Volume[] = [];
 * refuseVolumesWithoutFuse(volumes, { provider: "Example", machines: "containers" });
 * ```
 *
 * @throws {ConfigurationError} with one issue per volume.
 */
export function refuseVolumesWithoutFuse(volumes: readonly Volume[], options: RefuseVolumesOptions): void {
  if (volumes.length === 0) return;
  throw new ConfigurationError({
    issues: volumes.map((volume, index) => ({
      path: `volumes[${index}]`,
      message: `the ${options.provider} provider does not mount volumes (${volume.bucket} on ${volume.mount}): its ${options.machines} are containers without FUSE (no /dev/fuse, no CAP_SYS_ADMIN), so s3fs cannot run there; read the bucket with @skyward/storage (sky.storage in tasks), or use a provider whose nodes are virtual machines (AWS, GCP, SSH, …)`,
    })),
  });
}
