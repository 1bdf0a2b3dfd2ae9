import type { InstanceTypeInfo } from "@aws-sdk/client-ec2";
import { describe, expect, it } from "vitest";
import { acceleratorNameFromAws, instanceTypeFromAws, nominalMemoryGb } from "./instance-types.js";

// Shapes as DescribeInstanceTypes returns them (trimmed to the fields read).
const g5xlarge: InstanceTypeInfo = {
  InstanceType: "g5.xlarge",
  VCpuInfo: { DefaultVCpus: 4 },
  MemoryInfo: { SizeInMiB: 16384 },
  ProcessorInfo: { SupportedArchitectures: ["x86_64"] },
  SupportedUsageClasses: ["on-demand", "spot"],
  GpuInfo: {
    Gpus: [{ Name: "A10G", Manufacturer: "NVIDIA", Count: 1, MemoryInfo: { SizeInMiB: 22888 } }],
    TotalGpuMemoryInMiB: 22888,
  },
};

describe("instanceTypeFromAws", () => {
  it("reads vCPUs, memory, architecture, markets and the GPU with its catalog name", () => {
    expect(instanceTypeFromAws(g5xlarge)).toEqual({
      instanceType: "g5.xlarge",
      vcpus: 4,
      memoryGb: 16,
      architectures: ["x86_64"],
      accelerator: {
        name: "A10G",
        awsName: "A10G",
        manufacturer: "NVIDIA",
        count: 1,
        memoryGb: 24,
        kind: "gpu",
      },
      spot: true,
      onDemand: true,
    });
  });

  it("labels the form factor AWS's pages give per family, only for GPUs with form-factor variants", () => {
    type Ec2TypeName = NonNullable<Parameters<typeof instanceTypeFromAws>[0]["InstanceType"]>;
    const typed = (instanceType: Ec2TypeName, name: string, mib: number) =>
      instanceTypeFromAws({
        ...g5xlarge,
        InstanceType: instanceType,
        GpuInfo: { Gpus: [{ Name: name, Manufacturer: "NVIDIA", Count: 8, MemoryInfo: { SizeInMiB: mib } }] },
      })?.accelerator;
    expect(typed("p5.48xlarge", "H100", 81920)?.formFactor).toBe("SXM");
    expect(typed("p5en.48xlarge", "H200", 144384)?.formFactor).toBe("SXM");
    expect(typed("p4de.24xlarge", "A100", 81920)?.formFactor).toBe("SXM");
    expect(typed("p3dn.24xlarge", "V100", 32768)?.formFactor).toBe("SXM");
    expect(typed("g7e.48xlarge", "RTX PRO Server 6000", 98304)).toMatchObject({
      name: "RTX_PRO_6000",
      formFactor: "Server",
    });
    // A10G and L40S have no variants to tell apart; an unknown family with an H100 is left unlabelled.
    expect(typed("g5.48xlarge", "A10G", 24576)).not.toHaveProperty("formFactor");
    expect(typed("g6e.48xlarge", "L40S", 46068)).not.toHaveProperty("formFactor");
    expect(typed("x9.48xlarge" as Ec2TypeName, "H100", 81920)).not.toHaveProperty("formFactor");
  });

  it("counts every GPU and reads a GPU partition as a fraction of a whole device", () => {
    const p4d = instanceTypeFromAws({
      ...g5xlarge,
      InstanceType: "p4d.24xlarge",
      GpuInfo: {
        Gpus: [{ Name: "A100", Manufacturer: "NVIDIA", Count: 8, MemoryInfo: { SizeInMiB: 40960 } }],
      },
    });
    expect(p4d?.accelerator).toMatchObject({ name: "A100", count: 8, memoryGb: 40, formFactor: "SXM" });
    const g6f = instanceTypeFromAws({
      ...g5xlarge,
      InstanceType: "g6f.large",
      GpuInfo: {
        Gpus: [
          {
            Name: "L4",
            Manufacturer: "NVIDIA",
            Count: 1,
            GpuPartitionSize: 0.125,
            MemoryInfo: { SizeInMiB: 2861 },
          },
        ],
      },
    });
    expect(g6f?.accelerator).toMatchObject({ name: "L4", count: 0.125, memoryGb: 24 });
    // As DescribeInstanceTypes answers for g6f (and moto's copy of it): Count 0, LogicalGpuCount 1.
    const logical = instanceTypeFromAws({
      ...g5xlarge,
      InstanceType: "g6f.large",
      GpuInfo: {
        Gpus: [
          {
            Name: "L4",
            Manufacturer: "NVIDIA",
            Count: 0,
            LogicalGpuCount: 1,
            GpuPartitionSize: 0.125,
            MemoryInfo: { SizeInMiB: 2861 },
          } as never,
        ],
      },
    });
    expect(logical?.accelerator).toMatchObject({ name: "L4", count: 0.125, memoryGb: 24 });
  });

  it("reads Trainium and Inferentia devices as accelerators", () => {
    const trn1 = instanceTypeFromAws({
      InstanceType: "trn1.2xlarge",
      VCpuInfo: { DefaultVCpus: 8 },
      MemoryInfo: { SizeInMiB: 32768 },
      ProcessorInfo: { SupportedArchitectures: ["x86_64"] },
      SupportedUsageClasses: ["on-demand"],
      NeuronInfo: { NeuronDevices: [{ Name: "Trainium", Count: 1, MemoryInfo: { SizeInMiB: 32768 } }] },
    });
    expect(trn1?.accelerator).toEqual({
      name: "Trainium1",
      awsName: "Trainium",
      manufacturer: "AWS",
      count: 1,
      memoryGb: 32,
      kind: "neuron",
    });
    expect(trn1?.spot).toBe(false);
  });

  it("leaves out Mac and 32-bit-only types, and keeps arm64", () => {
    const mac = {
      ...g5xlarge,
      GpuInfo: undefined,
      ProcessorInfo: { SupportedArchitectures: ["x86_64_mac" as const] },
    };
    expect(instanceTypeFromAws(mac)).toBeUndefined();
    expect(
      instanceTypeFromAws({ ...mac, ProcessorInfo: { SupportedArchitectures: ["i386"] } }),
    ).toBeUndefined();
    const graviton = instanceTypeFromAws({ ...mac, ProcessorInfo: { SupportedArchitectures: ["arm64"] } });
    expect(graviton?.architectures).toEqual(["arm64"]);
    expect(graviton?.accelerator).toBeNull();
  });
});

describe("nominalMemoryGb", () => {
  it("snaps AWS's measured memory to the catalog variant within 10 %", () => {
    expect(nominalMemoryGb("A10G", 22.35)).toBe(24);
    expect(nominalMemoryGb("L40S", 44.7)).toBe(48);
    expect(nominalMemoryGb("A100", 40)).toBe(40);
    expect(nominalMemoryGb("A100", 79.6)).toBe(80);
    expect(nominalMemoryGb("B300", 268.6)).toBe(288);
  });

  it("keeps a figure far from every variant, or of an unknown device, as measured", () => {
    expect(nominalMemoryGb("L4", 2.8)).toBe(3);
    expect(nominalMemoryGb("Qualcomm AI100", 31.6)).toBe(32);
  });
});

describe("acceleratorNameFromAws", () => {
  it("maps AWS's names onto the catalog", () => {
    expect(acceleratorNameFromAws("T4g")).toBe("T4G");
    expect(acceleratorNameFromAws("Inferentia2")).toBe("Inferentia2");
    expect(acceleratorNameFromAws("Radeon Pro V520")).toBe("Radeon_Pro_V520");
    expect(acceleratorNameFromAws("RTX PRO Server 6000")).toBe("RTX_PRO_6000");
    expect(acceleratorNameFromAws("RTX PRO 4500")).toBe("RTX_PRO_4500");
  });

  it("keeps a name the catalog does not know", () => {
    expect(acceleratorNameFromAws("Qualcomm AI100")).toBe("Qualcomm AI100");
  });
});
