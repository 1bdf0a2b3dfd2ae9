/**
 * Which AMI an instance boots: the `amiId` setting, else the image AWS publishes in public SSM
 * parameters — Ubuntu 24.04 for CPU types, the Deep Learning Base image (NVIDIA driver, CUDA,
 * Ubuntu 22.04; 24.04 for GB300) for NVIDIA GPUs, the Neuron Deep Learning image for Trainium and Inferentia — and,
 * where a parameter does not exist (moto, some partitions), the newest matching public image found
 * by `DescribeImages`.
 */
import { DescribeImagesCommand, type Image as Ec2Image, type Filter } from "@aws-sdk/client-ec2";
import { GetParameterCommand } from "@aws-sdk/client-ssm";
import { type Architecture, ProvisionError } from "@skyward/core";
import type { Offer } from "@skyward/core/contract";
import { type AwsClients, awsCall, awsErrorCode, PROVIDER_NAME } from "./aws-api.js";
import type { AwsOfferData } from "./offers.js";

/** The kind of image an offer needs. */
export type ImageKind = "cpu" | "nvidia" | "neuron";

/**
 * The Ubuntu release of the NVIDIA Deep Learning Base image for an instance type: 22.04, except where
 * only the 24.04 image supports the type — GB300 (P6e-GB300), which the ARM64 22.04 image's release
 * notes do not list ("supported_ec2_instances: G5g, P6e-GB200"; the 24.04 image's: "G5g, P6e-GB200,
 * P6e-GB300": https://docs.aws.amazon.com/dlami/latest/devguide/appendix-ami-release-notes.html).
 */
function nvidiaUbuntuRelease(instanceType: string | undefined): "22.04" | "24.04" {
  return /gb300/.test(instanceType?.split(".")[0] ?? "") ? "24.04" : "22.04";
}

/**
 * The public SSM parameter holding the current AMI id of each image kind, per architecture (and, for
 * NVIDIA GPUs, per instance type: see {@link nvidiaUbuntuRelease}).
 */
export function imageParameter(kind: ImageKind, architecture: Architecture, instanceType?: string): string {
  switch (kind) {
    case "nvidia":
      return `/aws/service/deeplearning/ami/${architecture === "arm64" ? "arm64" : "x86_64"}/base-oss-nvidia-driver-gpu-ubuntu-${nvidiaUbuntuRelease(instanceType)}/latest/ami-id`;
    case "neuron":
      return "/aws/service/neuron/dlami/multi-framework/ubuntu-22.04/latest/image_id";
    default:
      return `/aws/service/canonical/ubuntu/server/24.04/stable/current/${architecture === "arm64" ? "arm64" : "amd64"}/hvm/ebs-gp3/ami-id`;
  }
}

/**
 * The name (a `DescribeImages` pattern) of the NVIDIA Deep Learning Base image the SSM parameter
 * names, as AWS publishes it: "Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04) 20250523"
 * for x86_64, "Deep Learning ARM64 Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04) 20250523" for arm64
 * (the DLAMI release notes, https://docs.aws.amazon.com/dlami/latest/devguide/appendix-ami-release-notes.html).
 */
export function nvidiaImageNamePattern(architecture: Architecture, instanceType?: string): string {
  return `Deep Learning ${architecture === "arm64" ? "ARM64 " : ""}Base OSS Nvidia Driver GPU AMI (Ubuntu ${nvidiaUbuntuRelease(instanceType)})*`;
}

/** The image kind an offer needs: NVIDIA GPUs get the driver image, AWS's chips the Neuron one. */
export function imageKindOf(offer: Offer): ImageKind {
  if (!offer.accelerator) return "cpu";
  const manufacturer = (offer.specific as Partial<AwsOfferData>).acceleratorManufacturer?.toUpperCase();
  if (manufacturer === "NVIDIA") return "nvidia";
  if (manufacturer === "AWS") return "neuron";
  return "cpu";
}

/**
 * Why the NVIDIA Deep Learning Base image cannot drive an instance type's GPU, or undefined when it
 * can. From the DLAMI release notes ("Supported EC2 instances",
 * https://docs.aws.amazon.com/dlami/latest/devguide/appendix-ami-release-notes.html) and the EC2
 * accelerated-computing guide (https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html):
 * P3/P3dn (V100), G3 (M60) and P2 (K80) are not supported by the OSS-driver base image (NVIDIA's
 * open kernel modules drive Turing and newer), G6f (fractional L4) needs NVIDIA's GRID driver, G4ad
 * has AMD Radeon GPUs.
 */
export function unsupportedByNvidiaImage(instanceType: string): string | undefined {
  const family = instanceType.split(".")[0] ?? "";
  if (family === "p3" || family === "p3dn")
    return "P3 (V100) instances are not supported by the Deep Learning Base OSS NVIDIA driver image";
  // NVIDIA's open kernel modules (the OSS driver) need Turing or newer: not Maxwell, not Kepler.
  if (family === "g3" || family === "g3s")
    return "G3 (Tesla M60, Maxwell) instances are not supported by the Deep Learning Base OSS NVIDIA driver image";
  if (family === "p2")
    return "P2 (Tesla K80, Kepler) instances are not supported by the Deep Learning Base OSS NVIDIA driver image";
  if (family.startsWith("g6f") || family.startsWith("gr6f"))
    return "G6f fractional-GPU instances need NVIDIA's GRID driver, which the Deep Learning Base OSS image does not have";
  if (family === "g4ad") return "G4ad instances have AMD Radeon GPUs; the NVIDIA image cannot drive them";
  return undefined;
}

/** Public images to look for when the SSM parameter is missing, best first. */
function fallbackSearches(
  kind: ImageKind,
  architecture: Architecture,
  instanceType: string,
): { owners: string[]; filters: Filter[] }[] {
  const ubuntuArchitecture = architecture === "arm64" ? "arm64" : "amd64";
  const ubuntu = {
    owners: ["099720109477"], // Canonical
    filters: [{ Name: "name", Values: [`ubuntu/images/*ubuntu-*-${ubuntuArchitecture}-server-*`] }],
  };
  if (kind === "cpu") return [ubuntu];
  const deepLearning = {
    owners: ["amazon"],
    filters: [
      {
        Name: "name",
        // Only the images the SSM parameters name: the Base OSS NVIDIA driver image, or the Neuron
        // multi-framework one — never a framework (PyTorch, TensorFlow) or Neuron image for a GPU.
        Values:
          kind === "neuron"
            ? ["Deep Learning AMI Neuron*Ubuntu 22.04*"]
            : [nvidiaImageNamePattern(architecture, instanceType)],
      },
    ],
  };
  // A GPU or Neuron node on plain Ubuntu could not use its accelerators: no fallback to it.
  return [deepLearning];
}

/** The AMI chosen for a cluster. */
export interface MachineImage {
  readonly imageId: string;
  /** Where it came from: the `amiId` setting, an SSM parameter, or a `DescribeImages` search. */
  readonly source: "setting" | "ssm" | "describe-images";
  /** Its root device (`/dev/sda1`), to size the root volume; undefined when unknown. */
  readonly rootDeviceName: string | undefined;
  /** The size of its root snapshot, GiB: the smallest root volume it boots on; undefined when unknown. */
  readonly rootSnapshotGb: number | undefined;
}

/** The root snapshot's size (GiB) of an image, from its block device mappings. */
function rootSnapshotGb(image: Ec2Image | undefined): number | undefined {
  const root = image?.BlockDeviceMappings?.find((mapping) => mapping.DeviceName === image.RootDeviceName);
  return root?.Ebs?.VolumeSize;
}

async function describeImage(
  clients: AwsClients,
  imageId: string,
  signal: AbortSignal,
): Promise<Ec2Image | undefined> {
  const result = await awsCall("DescribeImages", signal, () =>
    clients.ec2.send(new DescribeImagesCommand({ ImageIds: [imageId] }), { abortSignal: signal }),
  );
  return result.Images?.[0];
}

/** Resolves the AMI for `offer`; throws `ProvisionError` when none can be found. */
export async function resolveMachineImage(
  clients: AwsClients,
  offer: Offer,
  amiId: string | undefined,
  signal: AbortSignal,
): Promise<MachineImage> {
  if (amiId !== undefined) {
    const image = await describeImage(clients, amiId, signal).catch(() => undefined);
    return {
      imageId: amiId,
      source: "setting",
      rootDeviceName: image?.RootDeviceName,
      rootSnapshotGb: rootSnapshotGb(image),
    };
  }
  const kind = imageKindOf(offer);
  const unsupported = offer.accelerator ? unsupportedByNvidiaImage(offer.instanceType) : undefined;
  if (unsupported !== undefined)
    throw new ProvisionError({
      provider: PROVIDER_NAME,
      message: `${offer.instanceType}: ${unsupported}; choose another instance type, or set amiId to an image that supports it`,
    });
  if (kind === "cpu" && offer.accelerator)
    throw new ProvisionError({
      provider: PROVIDER_NAME,
      message: `${offer.instanceType}: no image is known for its ${(offer.specific as Partial<AwsOfferData>).acceleratorManufacturer ?? "unknown"} accelerators; set amiId`,
    });
  const parameter = imageParameter(kind, offer.architecture, offer.instanceType);
  let fromParameter: string | undefined;
  try {
    const result = await clients.ssm.send(new GetParameterCommand({ Name: parameter }), {
      abortSignal: signal,
    });
    fromParameter = result.Parameter?.Value;
  } catch (error) {
    signal.throwIfAborted();
    const code = awsErrorCode(error);
    // A missing parameter (or one this account may not read) leaves the DescribeImages search.
    if (code !== "ParameterNotFound" && code !== "AccessDeniedException" && code !== "InvalidParameter")
      await awsCall("GetParameter", signal, () => Promise.reject(error));
  }
  if (fromParameter) {
    const image = await describeImage(clients, fromParameter, signal).catch(() => undefined);
    return {
      imageId: fromParameter,
      source: "ssm",
      rootDeviceName: image?.RootDeviceName,
      rootSnapshotGb: rootSnapshotGb(image),
    };
  }
  for (const search of fallbackSearches(kind, offer.architecture, offer.instanceType)) {
    const result = await awsCall("DescribeImages", signal, () =>
      clients.ec2.send(
        new DescribeImagesCommand({
          Owners: search.owners,
          Filters: [
            ...search.filters,
            { Name: "architecture", Values: [offer.architecture] },
            { Name: "state", Values: ["available"] },
          ],
        }),
        { abortSignal: signal },
      ),
    );
    const newest = [...(result.Images ?? [])]
      .filter((image) => image.ImageId)
      .sort(
        (a, b) =>
          (b.CreationDate ?? "").localeCompare(a.CreationDate ?? "") ||
          (b.Name ?? "").localeCompare(a.Name ?? ""),
      )[0];
    if (newest?.ImageId)
      return {
        imageId: newest.ImageId,
        source: "describe-images",
        rootDeviceName: newest.RootDeviceName,
        rootSnapshotGb: rootSnapshotGb(newest),
      };
  }
  throw new ProvisionError({
    provider: PROVIDER_NAME,
    message: `no AMI found for ${offer.instanceType} in ${clients.region}: SSM parameter ${parameter} is missing and no public ${kind === "cpu" ? "Ubuntu" : kind === "nvidia" ? `"${nvidiaImageNamePattern(offer.architecture, offer.instanceType)}"` : "Deep Learning Neuron (Ubuntu 22.04)"} image matched; set amiId`,
  });
}
