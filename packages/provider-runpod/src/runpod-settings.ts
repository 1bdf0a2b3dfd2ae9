/** The RunPod provider's settings, declared once as a zod schema (the public type is its input). */
import { containerImageSchema } from "@skyward/core/contract";
import {
  absolutePathField,
  type ContainerSettingsShape,
  type CudaConstraint,
  containerSettingsShape,
  cudaConstraint,
  cudaVersionField,
  httpSettingsShape,
  nonEmptyListField,
  wholeNumberField,
} from "@skyward/provider-utils";
import { z } from "zod";

/** The container image pods run when none is set: CUDA 12.9 on Ubuntu with OpenSSH, from RunPod. */
export const DEFAULT_RUNPOD_IMAGE = "runpod/base:1.0.3-cuda1290-ubuntu2204";

// The shapes apart and the schema's type written out: the published declarations keep each key's TSDoc.
type BaseShape = Omit<typeof httpSettingsShape, "apiKey"> & ContainerSettingsShape;
const settingsShape = {
  /** The API key. Default: the `RUNPOD_API_KEY` environment variable, read on the first API call. A secret: never logged. */
  apiKey: httpSettingsShape.apiKey,
  /** Secure cloud, community cloud, or offers from both. Default `"all"`. CPU pods are secure cloud only. */
  cloudType: z
    .enum(["secure", "community", "all"], { message: 'expected "secure", "community" or "all"' })
    .default("all"),
  /** The container image, a tag or a `DockerImage`, starting `sshd` for `$PUBLIC_KEY` (see the README). Default {@link DEFAULT_RUNPOD_IMAGE}. */
  containerImage: containerImageSchema.default(DEFAULT_RUNPOD_IMAGE),
  /** What the image runs at start, once the boot watchdog is armed. Default `/start.sh`, RunPod's images' own. */
  startCommand: z.string().min(1).default("/start.sh"),
  /** The lowest CUDA version a GPU pod's host must run (`"12.8"`). Default: the image's (see the README), else none. */
  minCudaVersion: cudaVersionField().optional(),
  /** Exactly these CUDA versions (`["12.8", "12.9"]`), instead of a minimum; not with `minCudaVersion`. */
  allowedCudaVersions: nonEmptyListField(cudaVersionField(), "CUDA version").readonly().optional(),
  /** An interruptible pod's bid per GPU above RunPod's minimum bid, as a fraction (0.05: 5 % more). Default 0.05. */
  spotBidMargin: z
    .number({ error: "expected a fraction such as 0.05" })
    .min(0.01, { message: "expected at least 0.01: a bid at the exact minimum is outbid at once" })
    .max(1, { message: "expected at most 1 (twice the minimum bid)" })
    .default(0.05),
  /** Container disk per pod, GB; a spec's `diskGb` raises it. Default 50. */
  containerDiskGb: wholeNumberField("the container disk size in GB").min(1).default(50),
  /** A pod volume, GB (kept while the pod lives, removed with it); 0 or at least 10. GPU pods only. Default 0: none. */
  volumeGb: wholeNumberField("the volume size in GB")
    .min(0)
    .refine((value) => value === 0 || value >= 10, {
      message: "expected 0 or at least 10 GB (RunPod's floor)",
    })
    .default(0),
  /** Where the pod volume is mounted. Default `/workspace`. */
  volumeMountPath: absolutePathField().default("/workspace"),
  /** Pin pods to this data center (`EU-RO-1`); a spec's `region` does the same. Default: any. */
  dataCenterId: z.string().min(1).optional(),
  /** CPU flavors CPU-only specs may use (`cpu3c`, `cpu3g`, `cpu5c`…). Default: every flavor RunPod lists. */
  cpuFlavorIds: nonEmptyListField(z.string().min(1), "CPU flavor").readonly().optional(),
  /** Skyward's directory on each pod (environment, runtime, code); `{id}` in it becomes the pod's id. Default `/opt/skyward`. */
  root: absolutePathField().optional(),
};

export const settingsSchema: z.ZodObject<BaseShape & typeof settingsShape, z.core.$strict> = z
  .strictObject({ ...httpSettingsShape, ...containerSettingsShape, ...settingsShape })
  .refine((value) => value.minCudaVersion === undefined || value.allowedCudaVersions === undefined, {
    path: ["allowedCudaVersions"],
    message: "expected either minCudaVersion or allowedCudaVersions, not both",
  });

/** Settings of the RunPod provider; every field is optional. */
export type RunPodSettings = z.input<typeof settingsSchema>;

/** Which RunPod cloud to rent in. */
export type RunPodCloudType = NonNullable<RunPodSettings["cloudType"]>;

/** The settings once checked, with their defaults, and the CUDA constraint they make. */
export type ParsedSettings = z.output<typeof settingsSchema> & { readonly cuda: CudaConstraint };

/** The parsed settings with their CUDA constraint: the settings', else the image's (a `DockerImage`'s `cuda` first). */
export function withCuda(parsed: z.output<typeof settingsSchema>, written: unknown): ParsedSettings {
  const { minCudaVersion: minimum, allowedCudaVersions: allowed, containerImage: image } = parsed;
  return { ...parsed, cuda: cudaConstraint({ minimum, allowed, image, written, key: "containerImage" }) };
}
