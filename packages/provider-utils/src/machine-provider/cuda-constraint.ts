/**
 * The CUDA version a GPU host must run for a container image to start (a host with an older driver
 * cannot start a newer CUDA image): read from the image (a `DockerImage`'s `cuda`, else its tag), or
 * set as a minimum or an exact list, and compared as `major.minor` numbers (12.10 > 12.9).
 */
import { z } from "zod";
import { declaredImageCuda } from "./machine-settings.js";

/** At least a version, exactly some versions, or no constraint. */
export type CudaConstraint =
  | { readonly minCudaVersion: string }
  | { readonly allowedCudaVersions: readonly string[] }
  | Record<string, never>;

/**
 * The CUDA version an image's tag names, as `major.minor`: RunPod's `cuda1290` and `cu1281`, NVIDIA's
 * `cuda:12.4.1` and `cuda12.8.0`; undefined when the tag names none.
 */
export function imageCudaVersion(image: string): string | undefined {
  const match =
    /cuda[:\-_]?(\d{1,2})\.(\d{1,2})/i.exec(image) ??
    /cuda(\d{2})(\d)\d(?!\d)/i.exec(image) ??
    /(?:^|[^a-z])cu(\d{2})(\d)\d?(?!\d)/i.exec(image);
  return match ? `${Number(match[1])}.${Number(match[2])}` : undefined;
}

/** Whether a host on CUDA `version` meets the constraint (`major.minor` compared numerically: 12.10 > 12.9). */
export function cudaFits(constraint: CudaConstraint, version: string): boolean {
  if ("allowedCudaVersions" in constraint) return constraint.allowedCudaVersions.includes(version);
  if (!("minCudaVersion" in constraint)) return true;
  const [major = 0, minor = 0] = version.split(".").map(Number);
  const [leastMajor = 0, leastMinor = 0] = constraint.minCudaVersion.split(".").map(Number);
  return major !== leastMajor ? major > leastMajor : minor >= leastMinor;
}

/** A CUDA version as a setting, `major.minor` (`"12.8"`): `expected a CUDA version like "12.8" (major.minor)` otherwise. */
export function cudaVersionField() {
  return z
    .string()
    .regex(/^\d{1,2}\.\d{1,2}$/, { message: 'expected a CUDA version like "12.8" (major.minor)' });
}

/** Whether the constraint asks anything of the host. */
export const cudaConstrained = (constraint: CudaConstraint): boolean => Object.keys(constraint).length > 0;

/**
 * The constraint of a provider's settings: exactly `allowed` when given, else at least `minimum`, else
 * the CUDA the image states — a `DockerImage`'s `cuda` as written under the setting `key` (parsing
 * keeps the tag alone), else the tag's ({@link imageCudaVersion}); none when nothing says.
 */
export function cudaConstraint(options: {
  readonly minimum: string | undefined;
  readonly allowed: readonly string[] | undefined;
  readonly image: string;
  readonly written: unknown;
  readonly key: string;
}): CudaConstraint {
  const { allowed, image, written, key } = options;
  const minimum = options.minimum ?? declaredImageCuda(written, key) ?? imageCudaVersion(image);
  return allowed ? { allowedCudaVersions: [...allowed] } : minimum ? { minCudaVersion: minimum } : {};
}
