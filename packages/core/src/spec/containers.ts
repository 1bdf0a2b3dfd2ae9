/**
 * Container images: the Docker image a container-based cloud (RunPod, Vast.ai, Novita) starts its
 * machines from, like the reference's `sky.containers`. The Python environment itself is still the
 * pool's {@link Image}; a container image only chooses what it is built on (CUDA, a preinstalled
 * PyTorch). Clouds that boot virtual machines (AWS, GCP, Verda) take machine images instead.
 *
 * Each factory returns a frozen {@link DockerImage}; providers that take a container image accept one
 * of these or a plain tag string.
 */

import { z } from "zod";
import { parseInput } from "../errors/validation.js";

/** A Docker image reference with what is known of its CUDA and Ubuntu versions. */
export interface DockerImage {
  /** The full image reference a container runtime pulls (`nvidia/cuda:12.9.1-cudnn-runtime-ubuntu22.04`). */
  readonly tag: string;
  /** The CUDA version the image carries (`"12.9"`), when known. */
  readonly cuda: string | undefined;
  /** The Ubuntu release the image is built on (`"22.04"`), when known. */
  readonly ubuntu: string | undefined;
  /** The tag, so an image can stand where a string is expected. */
  toString(): string;
}

/** What {@link DockerImage.of} takes besides the tag: what is known of the image. */
export interface DockerImageMetadata {
  /** The CUDA version the image carries, `major.minor` (`"12.8"`). */
  cuda?: string;
  /** The Ubuntu release the image is built on (`"22.04"`). */
  ubuntu?: string;
}

/** The image variants NVIDIA publishes for each CUDA version. */
export type CudaVariant = "runtime" | "devel" | "cudnn-runtime";

/** Where {@link cuda} images are pulled from: Docker Hub (`nvidia/cuda`) or NVIDIA's registry (`nvcr.io`). */
export type CudaRepository = "dockerhub" | "nvidia";

/** Options of {@link cuda}. */
export interface CudaImageOptions {
  /** `"runtime"`, `"devel"` or `"cudnn-runtime"` (default, as in the reference). */
  variant?: CudaVariant;
  /** The Ubuntu release, `"22.04"` by default (as in the reference). */
  ubuntu?: string;
  /** `"dockerhub"` (default) or `"nvidia"` (`nvcr.io/nvidia/cuda`). */
  repository?: CudaRepository;
}

/** Options of {@link pytorch}, {@link runpodPytorch}. */
export interface PytorchImageOptions {
  /** The CUDA version to record for the image; default the one its tag is built with. */
  cuda?: string;
}

/** Options of {@link runpodBase}. */
export interface RunPodBaseImageOptions {
  /** The CUDA version: `"12.6"`, `"12.8"` or `"12.9"` (default). */
  cuda?: string;
}

/** The patch release NVIDIA publishes images for, per CUDA `major.minor`; others get `.0`. */
const CUDA_PATCHES: Readonly<Record<string, string>> = {
  "12.0": "12.0.1",
  "12.1": "12.1.1",
  "12.2": "12.2.2",
  "12.3": "12.3.2",
  "12.4": "12.4.1",
  "12.5": "12.5.1",
  "12.6": "12.6.3",
  "12.8": "12.8.1",
  "12.9": "12.9.1",
};

/** NGC PyTorch container releases and the CUDA they carry, per PyTorch `major.minor`. */
const NGC_PYTORCH: Readonly<Record<string, { release: string; cuda: string }>> = {
  "2.6": { release: "24.11", cuda: "12.6" },
  "2.7": { release: "25.03", cuda: "12.8" },
  "2.8": { release: "25.04", cuda: "12.9" },
};

/** RunPod's PyTorch images and the CUDA they carry, per PyTorch `major.minor`. */
const RUNPOD_PYTORCH: Readonly<Record<string, { tag: string; cuda: string }>> = {
  "2.6": { tag: "runpod/pytorch:2.6.0-py3.12-cuda12.6.3-devel-ubuntu24.04", cuda: "12.6" },
  "2.7": { tag: "runpod/pytorch:2.7.0-py3.13-cuda12.8.1-devel-ubuntu24.04", cuda: "12.8" },
  "2.8": { tag: "runpod/pytorch:2.8.0-py3.13-cuda12.8.1-devel-ubuntu24.04", cuda: "12.8" },
};

/** RunPod's base images (CUDA, Ubuntu 22.04, OpenSSH), per CUDA `major.minor`. */
const RUNPOD_BASE: Readonly<Record<string, string>> = {
  "12.6": "runpod/base:1.0.3-cuda1260-ubuntu2204",
  "12.8": "runpod/base:1.0.3-cuda1281-ubuntu2204",
  "12.9": "runpod/base:1.0.3-cuda1290-ubuntu2204",
};

const CUDA_VERSION = /^\d{1,2}\.\d{1,2}$/;
const UBUNTU_VERSION = /^\d{2}\.\d{2}$/;
/**
 * A Docker image reference: `[registry[:port]/]path[:tag][@sha256:digest]`, path components in
 * lowercase letters, digits and separators (Docker's reference grammar, without its length limits).
 */
const IMAGE_REFERENCE =
  /^(?:[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?(?::\d+)?\/)?[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*(?:\/[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*)*(?::[\w@][\w.@-]{0,127})?(?:@sha256:[0-9a-f]{64})?$/;

function quoted(value: string): string {
  return JSON.stringify(value);
}

function known(table: Readonly<Record<string, unknown>>): string {
  return Object.keys(table)
    .map((key) => quoted(key))
    .join(", ");
}

/** A string schema that accepts what `test` accepts, else says `message(value)`. */
function checkedString(
  expected: string,
  test: (value: string) => boolean,
  message: (value: string) => string,
) {
  return z.string({ error: `expected ${expected}` }).superRefine((value, context) => {
    if (!test(value)) context.addIssue({ code: "custom", message: message(value) });
  });
}

const cudaVersionSchema = checkedString(
  'a CUDA version like "12.9"',
  (value) => CUDA_VERSION.test(value),
  (value) => `expected a CUDA version major.minor like "12.9", received ${quoted(value)}`,
);

const ubuntuVersionSchema = checkedString(
  'an Ubuntu release like "24.04"',
  (value) => UBUNTU_VERSION.test(value),
  (value) => `expected an Ubuntu release like "24.04", received ${quoted(value)}`,
);

/** A Docker image reference (`repo/name:tag`), checked against Docker's reference grammar. */
export const imageReferenceSchema = checkedString(
  'a Docker image reference like "nvidia/cuda:12.9.1-runtime-ubuntu24.04"',
  (value) => IMAGE_REFERENCE.test(value),
  (value) =>
    `expected a Docker image reference like "nvidia/cuda:12.9.1-runtime-ubuntu24.04" (lowercase repository, optional registry, :tag and @sha256:digest), received ${quoted(value)}`,
);

function makeImage(
  tag: string,
  cudaVersion: string | undefined,
  ubuntuVersion: string | undefined,
): DockerImage {
  return Object.freeze({ tag, cuda: cudaVersion, ubuntu: ubuntuVersion, toString: () => tag });
}

const metadataSchema = z.strictObject({
  cuda: cudaVersionSchema.optional(),
  ubuntu: ubuntuVersionSchema.optional(),
});

/**
 * Wraps any image reference, with what is known of it.
 *
 * @example
 * ```ts
 * import * as sky from "@skyward/core";
 *
 * const mine = sky.DockerImage.of("ghcr.io/acme/trainer:1.4", { cuda: "12.8", ubuntu: "22.04" });
 * console.log(String(mine)); // ghcr.io/acme/trainer:1.4
 * ```
 */
function of(tag: string, metadata: DockerImageMetadata = {}): DockerImage {
  const parsed = parseInput(
    z.object({ tag: imageReferenceSchema, metadata: metadataSchema }),
    { tag, metadata },
    "DockerImage.of",
  );
  return makeImage(parsed.tag, parsed.metadata.cuda, parsed.metadata.ubuntu);
}

/** Whether `value` is a {@link DockerImage} (made by {@link DockerImage.of} or a `containers` factory). */
function isDockerImage(value: unknown): value is DockerImage {
  if (typeof value !== "object" || value === null) return false;
  const candidate = value as Record<string, unknown>;
  return (
    typeof candidate.tag === "string" &&
    (candidate.cuda === undefined || typeof candidate.cuda === "string") &&
    (candidate.ubuntu === undefined || typeof candidate.ubuntu === "string")
  );
}

/** Makes and recognises {@link DockerImage}s: `DockerImage.of(tag, { cuda, ubuntu })`. */
export const DockerImage = Object.freeze({ of, isDockerImage });

/**
 * An NVIDIA CUDA base image: `nvidia/cuda:<patch>-<variant>-ubuntu<ubuntu>` (the patch release NVIDIA
 * publishes for the version; `.0` for versions not in the table), by default the `cudnn-runtime`
 * variant on Ubuntu 22.04 from Docker Hub, as in the reference.
 *
 * @example
 * ```ts
 * import * as sky from "@skyward/core";
 *
 * const image = sky.containers.cuda("12.9", { variant: "devel", ubuntu: "24.04" });
 * console.log(image.tag); // nvidia/cuda:12.9.1-devel-ubuntu24.04
 * ```
 */
export function cuda(version: string, options: CudaImageOptions = {}): DockerImage {
  const parsed = parseInput(
    z.object({
      version: cudaVersionSchema,
      options: z.strictObject({
        variant: z
          .enum(["runtime", "devel", "cudnn-runtime"], {
            error: (issue) =>
              `expected "runtime", "devel" or "cudnn-runtime", received ${JSON.stringify(issue.input)}`,
          })
          .default("cudnn-runtime"),
        ubuntu: ubuntuVersionSchema.default("22.04"),
        repository: z
          .enum(["dockerhub", "nvidia"], {
            error: (issue) => `expected "dockerhub" or "nvidia", received ${JSON.stringify(issue.input)}`,
          })
          .default("dockerhub"),
      }),
    }),
    { version, options },
    "containers.cuda",
  );
  const patch = CUDA_PATCHES[parsed.version] ?? `${parsed.version}.0`;
  const name = `nvidia/cuda:${patch}-${parsed.options.variant}-ubuntu${parsed.options.ubuntu}`;
  return makeImage(
    parsed.options.repository === "nvidia" ? `nvcr.io/${name}` : name,
    parsed.version,
    parsed.options.ubuntu,
  );
}

/**
 * A plain Ubuntu image, `ubuntu:<version>`; 24.04 by default.
 *
 * @example
 * ```ts
 * import * as sky from "@skyward/core";
 *
 * console.log(sky.containers.ubuntu("22.04").tag); // ubuntu:22.04
 * ```
 */
export function ubuntu(version = "24.04"): DockerImage {
  const parsed = parseInput(z.object({ version: ubuntuVersionSchema }), { version }, "containers.ubuntu");
  return makeImage(`ubuntu:${parsed.version}`, undefined, parsed.version);
}

/** Parses a PyTorch version against `table`, naming the versions known and the way out for others. */
function pytorchVersion(
  table: Readonly<Record<string, unknown>>,
  version: string,
  options: PytorchImageOptions,
  prefix: string,
): { version: string; cuda: string | undefined } {
  const parsed = parseInput(
    z.object({
      version: checkedString(
        `a PyTorch version: ${known(table)}`,
        (value) => Object.hasOwn(table, value),
        (value) =>
          `expected a PyTorch version with a known image: ${known(table)}, received ${quoted(value)}; for another image use DockerImage.of(tag)`,
      ),
      options: z.strictObject({ cuda: cudaVersionSchema.optional() }),
    }),
    { version, options },
    prefix,
  );
  return { version: parsed.version, cuda: parsed.options.cuda };
}

/**
 * NVIDIA's NGC PyTorch container for a PyTorch release (`nvcr.io/nvidia/pytorch:25.04-py3` for
 * `"2.8"`), recording the CUDA it carries unless `cuda` says otherwise. Versions: `"2.6"`, `"2.7"`,
 * `"2.8"`; any other is refused (the reference falls back to `latest`, which is not what was asked).
 *
 * @example
 * ```ts
 * import * as sky from "@skyward/core";
 *
 * const image = sky.containers.pytorch("2.8");
 * console.log(image.tag, image.cuda); // nvcr.io/nvidia/pytorch:25.04-py3 12.9
 * ```
 */
export function pytorch(version: string, options: PytorchImageOptions = {}): DockerImage {
  const parsed = pytorchVersion(NGC_PYTORCH, version, options, "containers.pytorch");
  const entry = NGC_PYTORCH[parsed.version] as { release: string; cuda: string };
  return makeImage(`nvcr.io/nvidia/pytorch:${entry.release}-py3`, parsed.cuda ?? entry.cuda, undefined);
}

/**
 * RunPod's PyTorch image for a PyTorch release (`"2.8"` by default): CUDA, Ubuntu 24.04 and OpenSSH,
 * usually cached on RunPod's hosts, so pods start sooner. Versions: `"2.6"`, `"2.7"`, `"2.8"`.
 *
 * @example
 * ```ts
 * import * as sky from "@skyward/core";
 *
 * console.log(sky.containers.runpodPytorch().tag);
 * // runpod/pytorch:2.8.0-py3.13-cuda12.8.1-devel-ubuntu24.04
 * ```
 */
export function runpodPytorch(version = "2.8", options: PytorchImageOptions = {}): DockerImage {
  const parsed = pytorchVersion(RUNPOD_PYTORCH, version, options, "containers.runpodPytorch");
  const entry = RUNPOD_PYTORCH[parsed.version] as { tag: string; cuda: string };
  return makeImage(entry.tag, parsed.cuda ?? entry.cuda, "24.04");
}

/**
 * RunPod's base image for a CUDA version (`"12.9"` by default; `"12.6"`, `"12.8"`): CUDA on Ubuntu
 * 22.04 with OpenSSH — the image RunPod pods run when none is set.
 *
 * @example
 * ```ts
 * import * as sky from "@skyward/core";
 *
 * console.log(sky.containers.runpodBase({ cuda: "12.8" }).tag); // runpod/base:1.0.3-cuda1281-ubuntu2204
 * ```
 */
export function runpodBase(options: RunPodBaseImageOptions = {}): DockerImage {
  const parsed = parseInput(
    z.strictObject({
      cuda: checkedString(
        `a CUDA version: ${known(RUNPOD_BASE)}`,
        (value) => Object.hasOwn(RUNPOD_BASE, value),
        (value) =>
          `expected a CUDA version with a RunPod base image: ${known(RUNPOD_BASE)}, received ${quoted(value)}`,
      ).default("12.9"),
    }),
    options,
    "containers.runpodBase",
  );
  return makeImage(RUNPOD_BASE[parsed.cuda] as string, parsed.cuda, "22.04");
}

/**
 * The container-image factories as one namespace, like the reference's `sky.containers`:
 * `sky.containers.cuda("12.9")`, `.ubuntu()`, `.pytorch("2.8")`, `.runpodPytorch()`, `.runpodBase()`,
 * and `.DockerImage.of(tag)` for any other image.
 *
 * @example
 * ```ts
 * import * as sky from "@skyward/core";
 *
 * const images = [
 *   sky.containers.cuda("12.8", { variant: "runtime", ubuntu: "24.04" }),
 *   sky.containers.ubuntu(),
 *   sky.containers.pytorch("2.7"),
 *   sky.containers.DockerImage.of("my-registry.io/custom:latest"),
 * ];
 * ```
 */
export const containers = Object.freeze({ cuda, ubuntu, pytorch, runpodPytorch, runpodBase, DockerImage });

/**
 * What providers accept for a container image: a {@link DockerImage} or a tag string, either checked
 * against Docker's reference grammar; the output is the tag to send to the cloud.
 */
export const containerImageSchema = z
  .custom<string | DockerImage>((value) => typeof value === "string" || isDockerImage(value), {
    error: "expected an image tag string or a DockerImage (sky.containers…, sky.DockerImage.of)",
  })
  .transform((value) => (typeof value === "string" ? value : value.tag))
  .pipe(imageReferenceSchema);
