import { describe, expect, it } from "vitest";
import { unsupportedByNvidiaImage } from "./machine-images.js";

describe("unsupportedByNvidiaImage", () => {
  it("names the families the Deep Learning Base OSS NVIDIA image cannot drive, and only those", () => {
    expect(unsupportedByNvidiaImage("p3.2xlarge")).toMatch(/^P3 \(V100\)/);
    expect(unsupportedByNvidiaImage("p3dn.24xlarge")).toMatch(/^P3 \(V100\)/);
    expect(unsupportedByNvidiaImage("g6f.large")).toMatch(/GRID driver/);
    expect(unsupportedByNvidiaImage("gr6f.4xlarge")).toMatch(/GRID driver/);
    expect(unsupportedByNvidiaImage("g4ad.xlarge")).toMatch(/AMD Radeon/);
    for (const supported of [
      "g4dn.xlarge",
      "g5.xlarge",
      "g6.xlarge",
      "g6e.12xlarge",
      "p4d.24xlarge",
      "p5.48xlarge",
    ])
      expect(unsupportedByNvidiaImage(supported)).toBeUndefined();
  });
});
