/**
 * Which AMI an instance boots: the `amiId` setting, else the image AWS publishes in public SSM
 * parameters — Ubuntu 24.04 for CPU types, the Deep Learning Base image (NVIDIA driver, CUDA,
 * Ubuntu 22.04) for NVIDIA GPUs, the Neuron Deep Learning image for Trainium and Inferentia — and,
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

/** The public SSM parameter holding the current AMI id of each image kind, per architecture. */
export function imageParameter(kind: ImageKind, architecture: Architecture): string {
  switch (kind) {
    case "nvidia":
      return `/aws/service/deeplearning/ami/${architecture === "arm64" ? "arm64" : "x86_64"}/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id`;
    case "neuron":
      return "/aws/service/neuron/dlami/multi-framework/ubuntu-22.04/latest/image_id";
    default:
      return `/aws/service/canonical/ubuntu/server/24.04/stable/current/${architecture === "arm64" ? "arm64" : "amd64"}/hvm/ebs-gp3/ami-id`;
  }
}

/** The image kind an offer needs: NVIDIA GPUs get the driver image, AWS's chips the Neuron one. */
export function imageKindOf(offer: Offer): ImageKind {
  if (!offer.accelerator) return "cpu";
  const manufacturer = (offer.specific as Partial<AwsOfferData>).acceleratorManufacturer?.toUpperCase();
  if (manufacturer === "NVIDIA") return "nvidia";
  if (manufacturer === "AWS") return "neuron";
  return "cpu";
}

/** Public images to look for when the SSM parameter is missing, best first. */
function fallbackSearches(
  kind: ImageKind,
  architecture: Architecture,
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
        Values: kind === "neuron" ? ["Deep Learning*Neuron*Ubuntu*"] : ["Deep Learning*Ubuntu*"],
      },
    ],
  };
  return [deepLearning, ubuntu];
}

/** The AMI chosen for a cluster. */
export interface MachineImage {
  readonly imageId: string;
  /** Where it came from: the `amiId` setting, an SSM parameter, or a `DescribeImages` search. */
  readonly source: "setting" | "ssm" | "describe-images";
  /** Its root device (`/dev/sda1`), to size the root volume; undefined when unknown. */
  readonly rootDeviceName: string | undefined;
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
    return { imageId: amiId, source: "setting", rootDeviceName: image?.RootDeviceName };
  }
  const kind = imageKindOf(offer);
  const parameter = imageParameter(kind, offer.architecture);
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
    return { imageId: fromParameter, source: "ssm", rootDeviceName: image?.RootDeviceName };
  }
  for (const search of fallbackSearches(kind, offer.architecture)) {
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
      return { imageId: newest.ImageId, source: "describe-images", rootDeviceName: newest.RootDeviceName };
  }
  throw new ProvisionError({
    provider: PROVIDER_NAME,
    message: `no AMI found for ${offer.instanceType} in ${clients.region}: SSM parameter ${parameter} is missing and no public ${kind === "cpu" ? "Ubuntu" : "Deep Learning"} image matched; set amiId`,
  });
}
