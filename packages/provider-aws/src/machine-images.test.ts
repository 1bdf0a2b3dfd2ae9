import { describe, expect, it } from "vitest";
import { imageParameter, nvidiaImageNamePattern, unsupportedByNvidiaImage } from "./machine-images.js";

describe("unsupportedByNvidiaImage", () => {
  it("names the families the Deep Learning Base OSS NVIDIA image cannot drive, and only those", () => {
    expect(unsupportedByNvidiaImage("p3.2xlarge")).toMatch(/^P3 \(V100\)/);
    expect(unsupportedByNvidiaImage("p3dn.24xlarge")).toMatch(/^P3 \(V100\)/);
    expect(unsupportedByNvidiaImage("g6f.large")).toMatch(/GRID driver/);
    expect(unsupportedByNvidiaImage("gr6f.4xlarge")).toMatch(/GRID driver/);
    expect(unsupportedByNvidiaImage("g4ad.xlarge")).toMatch(/AMD Radeon/);
    // Maxwell and Kepler: before Turing, which NVIDIA's open kernel modules need.
    expect(unsupportedByNvidiaImage("g3.4xlarge")).toMatch(/^G3 \(Tesla M60, Maxwell\)/);
    expect(unsupportedByNvidiaImage("g3s.xlarge")).toMatch(/^G3 \(Tesla M60, Maxwell\)/);
    expect(unsupportedByNvidiaImage("p2.xlarge")).toMatch(/^P2 \(Tesla K80, Kepler\)/);
    for (const supported of [
      "g4dn.xlarge",
      "g5.xlarge",
      "g6.xlarge",
      "g6e.12xlarge",
      "p4d.24xlarge",
      "p5.48xlarge",
      "g5g.xlarge",
      "p6e-gb200.36xlarge",
    ])
      expect(unsupportedByNvidiaImage(supported)).toBeUndefined();
  });
});

describe("the NVIDIA Deep Learning Base image", () => {
  it("is looked up by AWS's own names: ARM64 in the name for arm64, Ubuntu 24.04 for GB300", () => {
    // Names and supported instances from the DLAMI release notes
    // (https://docs.aws.amazon.com/dlami/latest/devguide/appendix-ami-release-notes.html):
    // "Deep Learning ARM64 Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04)": G5g, P6e-GB200;
    // "Deep Learning ARM64 Base OSS Nvidia Driver GPU AMI (Ubuntu 24.04)": G5g, P6e-GB200, P6e-GB300.
    const matches = (pattern: string, name: string) =>
      new RegExp(`^${pattern.replace(/[()]/g, "\\$&").replace("*", ".*")}$`).test(name);
    expect(
      matches(
        nvidiaImageNamePattern("arm64"),
        "Deep Learning ARM64 Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04) 20250523",
      ),
    ).toBe(true);
    expect(
      matches(
        nvidiaImageNamePattern("x86_64"),
        "Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04) 20250523",
      ),
    ).toBe(true);
    expect(
      matches(
        nvidiaImageNamePattern("arm64", "p6e-gb300.36xlarge"),
        "Deep Learning ARM64 Base OSS Nvidia Driver GPU AMI (Ubuntu 24.04) 20260428",
      ),
    ).toBe(true);
    expect(imageParameter("nvidia", "arm64", "p6e-gb300.36xlarge")).toBe(
      "/aws/service/deeplearning/ami/arm64/base-oss-nvidia-driver-gpu-ubuntu-24.04/latest/ami-id",
    );
    expect(imageParameter("nvidia", "arm64", "p6e-gb200.36xlarge")).toBe(
      "/aws/service/deeplearning/ami/arm64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id",
    );
    expect(imageParameter("nvidia", "x86_64")).toBe(
      "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id",
    );
  });
});
