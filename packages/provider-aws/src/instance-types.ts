/**
 * EC2 instance types as Skyward sees them: vCPUs, memory, architecture and accelerators with their
 * canonical catalog names, read from `DescribeInstanceTypes`.
 */
import {
  DescribeInstanceTypesCommand,
  type EC2Client,
  type InstanceTypeInfo as Ec2InstanceType,
} from "@aws-sdk/client-ec2";
import type { Architecture } from "@skyward/core";
import { acceleratorCatalog, acceleratorFormFactor, canonicalAcceleratorName } from "@skyward/core/contract";
import { awsCall } from "./aws-api.js";

/** One EC2 instance type, reduced to what offers need. */
export interface InstanceType {
  /** The type's name (`g5.xlarge`). */
  readonly instanceType: string;
  /** Default vCPUs. */
  readonly vcpus: number;
  /** Memory, GB (GiB, as AWS counts). */
  readonly memoryGb: number;
  /** The architectures it runs (`x86_64`, `arm64`); Mac and 32-bit types have none here. */
  readonly architectures: readonly Architecture[];
  /** Its accelerators, or null for a CPU-only type. */
  readonly accelerator: InstanceTypeAccelerator | null;
  /** Whether it can be bought as spot. */
  readonly spot: boolean;
  /** Whether it can be bought on demand. */
  readonly onDemand: boolean;
}

/** The accelerators of an instance type. */
export interface InstanceTypeAccelerator {
  /** The catalog name (`A10G`, `Trainium2`) when AWS's name maps to one, else AWS's own name. */
  readonly name: string;
  /** AWS's own name (`A10G`, `RTX PRO Server 6000`). */
  readonly awsName: string;
  /** Who makes it, as AWS says (`NVIDIA`, `AMD`, `AWS`…). */
  readonly manufacturer: string;
  /** Devices per instance; a fraction for GPU partitions (`g6f.large`: 0.125). */
  readonly count: number;
  /** Memory of one whole device, GB, as the catalog names it (see {@link nominalMemoryGb}). */
  readonly memoryGb: number;
  /** `gpu` for GPUs, `neuron` for Trainium and Inferentia. */
  readonly kind: "gpu" | "neuron";
  /** The form factor (`SXM`, `Server`), when known (see {@link formFactorFromAws}). */
  readonly formFactor?: string;
}

/** AWS names the core catalog does not spell out. */
const AWS_ACCELERATOR_ALIASES: Readonly<Record<string, string>> = Object.freeze({
  "RTX PRO Server 6000": "RTX_PRO_6000",
  "Gaudi HL-205": "Gaudi",
});

/** The catalog name for an accelerator as AWS names it, or AWS's name when it has none. */
export function acceleratorNameFromAws(awsName: string): string {
  return canonicalAcceleratorName(AWS_ACCELERATOR_ALIASES[awsName] ?? awsName) ?? awsName;
}

/**
 * Form factors by instance family. `DescribeInstanceTypes` names the GPU (`H100`, `A100`, `V100`) but
 * not its board; AWS's pages do: P3 and P3dn carry V100 SXM2 with NVLink, P4d and P4de A100 SXM4
 * with NVSwitch, P5 H100 SXM, P5e and P5en H200 SXM — every AWS type with one of these GPUs is SXM
 * (https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html,
 * https://aws.amazon.com/ec2/instance-types/p5/, https://aws.amazon.com/ec2/instance-types/p4/,
 * https://aws.amazon.com/ec2/instance-types/p3/).
 */
const AWS_FORM_FACTORS_BY_FAMILY: Readonly<Record<string, string>> = Object.freeze({
  p3: "SXM",
  p3dn: "SXM",
  p4d: "SXM",
  p4de: "SXM",
  p5: "SXM",
  p5e: "SXM",
  p5en: "SXM",
});

/** Form factors AWS's accelerator name says ("RTX PRO Server 6000": the Blackwell Server Edition). */
const AWS_FORM_FACTORS_BY_NAME: Readonly<Record<string, string>> = Object.freeze({
  "RTX PRO Server 6000": "Server",
});

/**
 * The form factor of an instance type's accelerator, when AWS's data or pages say it and the catalog
 * entry has form-factor variants (an A10G has none to tell apart); undefined otherwise, and the offer
 * then does not say (the pool keeps it when a form factor is asked for, and reports it).
 */
export function formFactorFromAws(instanceType: string, awsName: string, name: string): string | undefined {
  const entry = acceleratorCatalog.find((candidate) => candidate.name === name);
  if (!entry || entry.formFactors.length === 0) return undefined;
  const family = instanceType.split(".")[0] ?? "";
  const formFactor =
    AWS_FORM_FACTORS_BY_NAME[awsName] ?? AWS_FORM_FACTORS_BY_FAMILY[family] ?? acceleratorFormFactor(awsName);
  return formFactor !== undefined && entry.formFactors.includes(formFactor) ? formFactor : undefined;
}

const mibToGb = (mib: number) => Math.round((mib / 1024) * 10) / 10;

/**
 * The memory of one device as the catalog names it. AWS reports what the driver sees, a little under
 * the spec sheet (A10G: 22.4 of 24 GB, L40S: 44.7 of 48 GB); a figure within 10 % of one of the
 * catalog's variants is that variant, so `A10G()` (24GB) matches `g5` types. Others stay as measured.
 */
export function nominalMemoryGb(name: string, measuredGb: number): number {
  const entry = acceleratorCatalog.find((candidate) => candidate.name === name);
  const variants = (entry?.memory ?? []).map((variant) => Number.parseFloat(variant));
  let nearest: number | undefined;
  for (const variant of variants) {
    if (Math.abs(measuredGb - variant) > variant * 0.1) continue;
    if (nearest === undefined || Math.abs(measuredGb - variant) < Math.abs(measuredGb - nearest))
      nearest = variant;
  }
  return nearest ?? Math.round(measuredGb);
}

function acceleratorOf(raw: Ec2InstanceType): InstanceTypeAccelerator | null {
  const gpu = raw.GpuInfo?.Gpus?.[0];
  if (gpu?.Name) {
    const partition = gpu.GpuPartitionSize && gpu.GpuPartitionSize > 0 ? gpu.GpuPartitionSize : 1;
    // A fractional GPU (g6f) is described with Count 0 and LogicalGpuCount 1 (as DescribeInstanceTypes
    // answers, and moto's copy of it): the logical count is the device count then.
    const physical = (raw.GpuInfo?.Gpus ?? []).reduce((sum, entry) => sum + (entry.Count ?? 0), 0);
    const logical = (raw.GpuInfo?.Gpus ?? []).reduce(
      (sum, entry) => sum + ((entry as { LogicalGpuCount?: number }).LogicalGpuCount ?? 0),
      0,
    );
    const devices = physical > 0 ? physical : logical;
    const name = acceleratorNameFromAws(gpu.Name);
    const formFactor = formFactorFromAws(raw.InstanceType ?? "", gpu.Name, name);
    return Object.freeze({
      name,
      awsName: gpu.Name,
      manufacturer: gpu.Manufacturer ?? "",
      count: devices * partition,
      memoryGb: nominalMemoryGb(name, mibToGb(gpu.MemoryInfo?.SizeInMiB ?? 0) / partition),
      kind: "gpu" as const,
      ...(formFactor === undefined ? {} : { formFactor }),
    });
  }
  const neuron = raw.NeuronInfo?.NeuronDevices?.[0];
  if (neuron?.Name) {
    const devices = (raw.NeuronInfo?.NeuronDevices ?? []).reduce((sum, entry) => sum + (entry.Count ?? 0), 0);
    const name = acceleratorNameFromAws(neuron.Name);
    return Object.freeze({
      name,
      awsName: neuron.Name,
      manufacturer: "AWS",
      count: devices,
      memoryGb: nominalMemoryGb(name, mibToGb(neuron.MemoryInfo?.SizeInMiB ?? 0)),
      kind: "neuron" as const,
    });
  }
  return null;
}

/** Reduces one `DescribeInstanceTypes` entry; undefined for types Skyward cannot use (Mac, 32-bit only). */
export function instanceTypeFromAws(raw: Ec2InstanceType): InstanceType | undefined {
  if (!raw.InstanceType) return undefined;
  const architectures = (raw.ProcessorInfo?.SupportedArchitectures ?? []).filter(
    (architecture): architecture is Architecture => architecture === "x86_64" || architecture === "arm64",
  );
  if (architectures.length === 0) return undefined;
  const classes = raw.SupportedUsageClasses ?? [];
  return Object.freeze({
    instanceType: raw.InstanceType,
    vcpus: raw.VCpuInfo?.DefaultVCpus ?? 0,
    memoryGb: mibToGb(raw.MemoryInfo?.SizeInMiB ?? 0),
    architectures: Object.freeze(architectures),
    accelerator: acceleratorOf(raw),
    spot: classes.includes("spot"),
    onDemand: classes.includes("on-demand"),
  });
}

/** Every instance type of the client's region that Skyward can use. */
export async function describeInstanceTypes(ec2: EC2Client, signal: AbortSignal): Promise<InstanceType[]> {
  const types: InstanceType[] = [];
  let nextToken: string | undefined;
  do {
    const page = await awsCall("DescribeInstanceTypes", signal, () =>
      ec2.send(new DescribeInstanceTypesCommand({ MaxResults: 100, NextToken: nextToken }), {
        abortSignal: signal,
      }),
    );
    for (const raw of page.InstanceTypes ?? []) {
      const type = instanceTypeFromAws(raw);
      if (type) types.push(type);
    }
    nextToken = page.NextToken;
  } while (nextToken);
  return types;
}
