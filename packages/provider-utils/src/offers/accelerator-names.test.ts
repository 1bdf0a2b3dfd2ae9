import { describe, expect, it } from "vitest";
import { acceleratorFromNames } from "./accelerator-names.js";

describe("acceleratorFromNames", () => {
  it("takes the first name that names an accelerator, memory and form factor from whichever says them", () => {
    expect(acceleratorFromNames([undefined, "", "H100 SXM5 80GB"])).toEqual({
      name: "H100",
      memoryGb: 80,
      formFactor: "SXM",
    });
    expect(acceleratorFromNames(["A100-80G-PCIe"])).toMatchObject({ name: "A100", memoryGb: 80 });
  });

  it("memory given wins; without one stated, the catalog's default; no accelerator named, undefined", () => {
    expect(acceleratorFromNames(["H100 80GB"], 94)?.memoryGb).toBe(94);
    expect(acceleratorFromNames(["RTX A6000"])).toEqual({ name: "RTX_A6000", memoryGb: 48 });
    expect(acceleratorFromNames(["n1-cpu-small", null])).toBeUndefined();
  });
});
