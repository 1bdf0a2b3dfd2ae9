/**
 * The RunPod provider's settings: what a user may set, checked by name before anything is asked of the
 * API, and the CUDA constraint a GPU pod's host must meet (read from the image when not set).
 */
import type { DockerImage } from "@skyward/core";
import { containerImageSchema, parseInput } from "@skyward/core/contract";
import {
  environmentVariablesSchema,
  type HttpSettings,
  httpSettingsShape,
  keysDirectorySchema,
} from "@skyward/provider-utils";
import { z } from "zod";

/** The container image pods run when none is set: CUDA 12.9 on Ubuntu with OpenSSH, from RunPod. */
export const DEFAULT_RUNPOD_IMAGE = "runpod/base:1.0.3-cuda1290-ubuntu2204";

/** What RunPod's own images run at start (sshd with `$PUBLIC_KEY`, then sleep); the boot watchdog hands over to it. */
export const DEFAULT_START_COMMAND = "/start.sh";

/** Which RunPod cloud to rent in. */
export type RunPodCloudType = "secure" | "community" | "all";

/** Settings of the RunPod provider; every field is optional. */
export interface RunPodSettings extends HttpSettings {
  /** The API key. Default: the `RUNPOD_API_KEY` environment variable, read on the first API call. A secret: never logged. */
  apiKey?: string;
  /** Secure cloud, community cloud, or offers from both. Default `"all"`. CPU pods are secure cloud only. */
  cloudType?: RunPodCloudType;
  /**
   * The container image: a tag or a {@link DockerImage} (`sky.containers.runpodPytorch("2.8")`). It must
   * start `sshd` with `$PUBLIC_KEY` authorised for root, as RunPod's images do. Default
   * {@link DEFAULT_RUNPOD_IMAGE}.
   */
  containerImage?: string | DockerImage;
  /**
   * What the image runs at start, after the boot watchdog is armed (the pod's start command is
   * `bash -c "<arm watchdog>; exec <startCommand>"`). Default `/start.sh`, RunPod's images' own.
   */
  startCommand?: string;
  /**
   * The lowest CUDA version a GPU pod's host must run (`"12.8"`): a host with an older driver cannot
   * start a newer CUDA image. Default: the version the image names (`cuda1290` → `"12.9"`, `cu1281` →
   * `"12.8"`, `cuda:12.4.1` → `"12.4"`, a `DockerImage`'s `cuda`), else none.
   */
  minCudaVersion?: string;
  /** Exactly these CUDA versions (`["12.8", "12.9"]`), instead of a minimum; not with `minCudaVersion`. */
  allowedCudaVersions?: readonly string[];
  /**
   * An interruptible pod's bid per GPU above RunPod's minimum bid, as a fraction: 0.05 bids 5 % more.
   * A bid at the exact minimum loses to the next renter at once. Default 0.05, at least 0.01.
   */
  spotBidMargin?: number;
  /** Container disk per pod, GB; a spec's `diskGb` raises it. Default 50. */
  containerDiskGb?: number;
  /** A pod volume, GB (kept while the pod lives, removed with it); 0 or at least 10. GPU pods only. Default 0: none. */
  volumeGb?: number;
  /** Where the pod volume is mounted. Default `/workspace`. */
  volumeMountPath?: string;
  /** Pin pods to this data center (`EU-RO-1`); a spec's `region` does the same. Default: any. */
  dataCenterId?: string;
  /** CPU flavors CPU-only specs may use (`cpu3c`, `cpu3g`, `cpu5c`…). Default: every flavor RunPod lists. */
  cpuFlavorIds?: readonly string[];
  /** More environment variables for every pod. */
  env?: Readonly<Record<string, string>>;
  /** Where the SSH key pair is kept. Default `$SKYWARD_HOME/keys` (`~/.skyward/keys`). */
  keysDirectory?: string;
  /**
   * Skyward's directory on each pod (environment, runtime, code); `{id}` in it becomes the pod's id.
   * Default `/opt/skyward`.
   */
  root?: string;
}

/** The CUDA constraint on a GPU pod's host. */
export type RunPodCudaConstraint =
  | { readonly minCudaVersion: string }
  | { readonly allowedCudaVersions: readonly string[] }
  | Record<string, never>;

const wholeNumber = (what: string) =>
  z
    .number({ error: `expected ${what} as a whole number` })
    .int({ message: `expected ${what} as a whole number` });

const cudaVersion = z
  .string()
  .regex(/^\d+\.\d+$/, { message: 'expected a CUDA version as "major.minor" (e.g. "12.8")' });

const absolutePath = z
  .string()
  .refine((value) => value.startsWith("/"), { message: "expected an absolute path" });

const settingsSchema = z
  .strictObject({
    ...httpSettingsShape,
    cloudType: z
      .enum(["secure", "community", "all"], { message: 'expected "secure", "community" or "all"' })
      .default("all"),
    containerImage: containerImageSchema.default(DEFAULT_RUNPOD_IMAGE),
    startCommand: z.string().min(1).default(DEFAULT_START_COMMAND),
    minCudaVersion: cudaVersion.optional(),
    allowedCudaVersions: z
      .array(cudaVersion)
      .min(1, { message: "expected at least one CUDA version" })
      .optional(),
    spotBidMargin: z
      .number({ error: "expected a fraction such as 0.05" })
      .min(0.01, { message: "expected at least 0.01: a bid at the exact minimum is outbid at once" })
      .max(1, { message: "expected at most 1 (twice the minimum bid)" })
      .default(0.05),
    containerDiskGb: wholeNumber("the container disk size in GB").min(1).default(50),
    volumeGb: wholeNumber("the volume size in GB")
      .min(0)
      .refine((value) => value === 0 || value >= 10, {
        message: "expected 0 or at least 10 GB (RunPod's floor)",
      })
      .default(0),
    volumeMountPath: absolutePath.default("/workspace"),
    dataCenterId: z.string().min(1).optional(),
    cpuFlavorIds: z
      .array(z.string().min(1))
      .min(1, { message: "expected at least one CPU flavor" })
      .optional(),
    env: environmentVariablesSchema.default({}),
    keysDirectory: keysDirectorySchema,
    root: absolutePath.optional(),
  })
  .superRefine((value, context) => {
    if (value.minCudaVersion !== undefined && value.allowedCudaVersions !== undefined)
      context.addIssue({
        code: "custom",
        path: ["allowedCudaVersions"],
        message: "expected either minCudaVersion or allowedCudaVersions, not both",
      });
  });

/** The settings once checked, with their defaults, and the CUDA constraint they make. */
export type ParsedSettings = z.output<typeof settingsSchema> & { readonly cuda: RunPodCudaConstraint };

/**
 * The CUDA version an image's tag names, as `major.minor`: RunPod's `cuda1290` and `cu1281`, NVIDIA's
 * `cuda:12.4.1` and `cuda12.8.0`; undefined when the tag names none.
 */
export function imageCudaVersion(image: string): string | undefined {
  const dotted = /cuda[:\-_]?(\d{1,2})\.(\d{1,2})/i.exec(image);
  if (dotted) return `${Number(dotted[1])}.${Number(dotted[2])}`;
  const packed = /cuda(\d{2})(\d)\d(?!\d)/i.exec(image);
  if (packed) return `${Number(packed[1])}.${Number(packed[2])}`;
  const short = /(?:^|[^a-z])cu(\d{2})(\d)\d?(?!\d)/i.exec(image);
  if (short) return `${Number(short[1])}.${Number(short[2])}`;
  return undefined;
}

/** `a` ≥ `b` for `major.minor` versions, compared numerically (12.10 > 12.9). */
export function cudaAtLeast(a: string, b: string): boolean {
  const [aMajor = 0, aMinor = 0] = a.split(".").map(Number);
  const [bMajor = 0, bMinor = 0] = b.split(".").map(Number);
  return aMajor !== bMajor ? aMajor > bMajor : aMinor >= bMinor;
}

/** Whether a host on CUDA `version` meets the constraint. */
export function cudaFits(constraint: RunPodCudaConstraint, version: string): boolean {
  if ("allowedCudaVersions" in constraint) return constraint.allowedCudaVersions.includes(version);
  if ("minCudaVersion" in constraint) return cudaAtLeast(version, constraint.minCudaVersion);
  return true;
}

/** Checks the settings (errors under `prefix`); the image's CUDA comes from a `DockerImage`'s `cuda` first. */
export function parseSettings(settings: RunPodSettings | undefined, prefix: string): ParsedSettings {
  const parsed = parseInput(settingsSchema, settings ?? {}, prefix);
  const image = settings?.containerImage;
  const declared =
    typeof image === "object" && image !== null ? (image as { cuda?: unknown }).cuda : undefined;
  const minimum =
    parsed.minCudaVersion ??
    (typeof declared === "string" ? declared : imageCudaVersion(parsed.containerImage));
  const cuda: RunPodCudaConstraint = parsed.allowedCudaVersions
    ? { allowedCudaVersions: [...parsed.allowedCudaVersions] }
    : minimum
      ? { minCudaVersion: minimum }
      : {};
  return { ...parsed, cuda };
}
