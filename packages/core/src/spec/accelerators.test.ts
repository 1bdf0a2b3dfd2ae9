import { describe, expect, it } from "vitest";
import { ConfigurationError, type ConfigurationIssue } from "../errors/errors.js";
import {
  type Accelerator,
  acceleratorCatalog,
  acceleratorFormFactor,
  acceleratorFromName,
  acceleratorSchema,
  accelerators,
  canonicalAcceleratorName,
  canonicalFormFactor,
} from "./accelerators.js";

/** Runs `fn`, expects a ConfigurationError, and returns its issues. */
function issuesOf(fn: () => unknown): readonly ConfigurationIssue[] {
  try {
    fn();
  } catch (error) {
    expect(ConfigurationError.isInstance(error)).toBe(true);
    return (error as ConfigurationError).issues;
  }
  throw new Error("expected a ConfigurationError, but nothing was thrown");
}

/** Calls a factory with input its types forbid, the way untyped JavaScript callers can. */
function callUntyped(factory: (options?: never) => Accelerator, options: unknown): Accelerator {
  return (factory as (options: unknown) => Accelerator)(options);
}

describe("catalog factories", () => {
  it("A100() is the 80GB variant, count 1, no form factor", () => {
    const a100 = accelerators.A100();
    expect(a100).toEqual({
      kind: "accelerator",
      name: "A100",
      manufacturer: "nvidia",
      memory: "80GB",
      memoryGb: 80,
      count: 1,
      formFactor: undefined,
      custom: false,
      isTrainium: false,
      aliases: [],
    });
    expect(Object.isFrozen(a100)).toBe(true);
    expect(Object.isFrozen(a100.aliases)).toBe(true);
  });

  it("takes memory and count", () => {
    const a100 = accelerators.A100({ memory: "40GB", count: 8 });
    expect([a100.memory, a100.memoryGb, a100.count]).toEqual(["40GB", 40, 8]);
    expect(accelerators.V100().memory).toBe("32GB");
    expect(accelerators.V100({ memory: "16GB" }).memoryGb).toBe(16);
  });

  it("allows fractional counts, as the reference's count: float", () => {
    expect(accelerators.T4({ count: 0.5 }).count).toBe(0.5);
  });

  it("takes form factors, and the form factor can pick the memory", () => {
    expect(accelerators.H100({ formFactor: "SXM" })).toMatchObject({ formFactor: "SXM", memory: "80GB" });
    expect(accelerators.H100({ formFactor: "PCIe", count: 2 })).toMatchObject({
      formFactor: "PCIe",
      count: 2,
    });
    expect(accelerators.H100({ formFactor: "NVL" })).toMatchObject({
      name: "H100",
      formFactor: "NVL",
      memoryGb: 94,
    });
    expect(accelerators.H200({ formFactor: "NVL" })).toMatchObject({ memory: "141GB", formFactor: "NVL" });
    expect(accelerators.P100({ formFactor: "SXM" }).memory).toBe("16GB");
    expect(accelerators.P100({ formFactor: "PCIe", memory: "12GB" }).memory).toBe("12GB");
  });

  it("sets manufacturer, aliases and the Trainium flag from the catalog", () => {
    expect(accelerators.MI300X()).toMatchObject({ manufacturer: "amd", memory: "192GB" });
    expect(accelerators.Trainium2({ count: 16 })).toMatchObject({
      manufacturer: "aws",
      isTrainium: true,
      count: 16,
    });
    expect(accelerators.Inferentia2().isTrainium).toBe(false);
    expect(accelerators.TPU_v5e({ count: 4 })).toMatchObject({ manufacturer: "google", memoryGb: 16 });
    expect(accelerators.RTX_A6000().aliases).toEqual(["A6000"]);
  });

  it("builds every catalog entry's default, with its default memory", () => {
    const factories: Record<string, unknown> = accelerators;
    for (const entry of acceleratorCatalog) {
      const factory = factories[entry.name];
      expect(factory, entry.name).toBeTypeOf("function");
      const accelerator = (factory as () => Accelerator)();
      expect(accelerator).toMatchObject({
        name: entry.name,
        memory: entry.defaultMemory,
        count: 1,
        custom: false,
      });
      expect(entry.memory).toContain(entry.defaultMemory);
      expect(acceleratorSchema.parse(accelerator)).toEqual(accelerator);
    }
  });

  it("has the catalog the brief names, with public memory sizes", () => {
    const memoryOf = (name: string) => acceleratorCatalog.find((entry) => entry.name === name)?.memory;
    const expected: Record<string, readonly string[]> = {
      H100: ["80GB", "94GB"],
      H200: ["141GB"],
      A100: ["40GB", "80GB"],
      A10G: ["24GB"],
      A40: ["48GB"],
      L4: ["24GB"],
      L40S: ["48GB"],
      T4: ["16GB"],
      V100: ["16GB", "32GB"],
      RTX_4090: ["24GB"],
      RTX_5090: ["32GB"],
      RTX_A6000: ["48GB"],
      RTX_6000_Ada: ["48GB"],
      RTX_PRO_6000: ["96GB"],
      MI300X: ["192GB"],
      MI325X: ["256GB"],
      MI355X: ["288GB"],
      Trainium1: ["32GB"],
      Trainium2: ["96GB"],
      Inferentia2: ["32GB"],
      TPU_v5p: ["95GB"],
      TPU_v6e: ["32GB"],
    };
    for (const [name, memory] of Object.entries(expected)) expect(memoryOf(name), name).toEqual(memory);
    expect(acceleratorCatalog.length).toBeGreaterThan(100);
    expect(Object.isFrozen(acceleratorCatalog)).toBe(true);
  });

  it("rejects bad variants at the type level", () => {
    // @ts-expect-error 20GB is not an A100 variant
    expect(() => accelerators.A100({ memory: "20GB" })).toThrow(ConfigurationError);
    // @ts-expect-error the A10G has no form factors
    expect(() => accelerators.A10G({ formFactor: "SXM" })).toThrow(ConfigurationError);
    // @ts-expect-error NVL is not an A100 form factor
    expect(() => accelerators.A100({ formFactor: "NVL" })).toThrow(ConfigurationError);
    // @ts-expect-error unknown option
    expect(() => accelerators.L4({ vram: "24GB" })).toThrow(ConfigurationError);
    // @ts-expect-error count is a number
    expect(() => accelerators.L4({ count: "8" })).toThrow(ConfigurationError);
  });
});

describe("runtime validation of factory options", () => {
  const cases: [string, () => unknown, ConfigurationIssue[]][] = [
    [
      "a memory variant that does not exist",
      () => callUntyped(accelerators.A100, { memory: "20GB" }),
      [{ path: "A100.memory", message: 'expected one of "40GB", "80GB", received "20GB"' }],
    ],
    [
      "memory as a number",
      () => callUntyped(accelerators.V100, { memory: 32 }),
      [{ path: "V100.memory", message: 'expected one of "16GB", "32GB", received 32' }],
    ],
    [
      "a zero count",
      () => accelerators.H100({ count: 0 }),
      [{ path: "H100.count", message: "expected a positive finite number, received 0" }],
    ],
    [
      "a negative count",
      () => accelerators.H100({ count: -2 }),
      [{ path: "H100.count", message: "expected a positive finite number, received -2" }],
    ],
    [
      "an infinite count",
      () => accelerators.L4({ count: Number.POSITIVE_INFINITY }),
      [{ path: "L4.count", message: "expected a positive finite number, received Infinity" }],
    ],
    [
      "a NaN count",
      () => accelerators.L4({ count: Number.NaN }),
      [{ path: "L4.count", message: "expected a positive finite number, received NaN" }],
    ],
    [
      "a count as a string",
      () => callUntyped(accelerators.T4, { count: "8" }),
      [{ path: "T4.count", message: 'expected a positive finite number, received "8"' }],
    ],
    [
      "an unknown form factor",
      () => callUntyped(accelerators.H100, { formFactor: "OAM" }),
      [{ path: "H100.formFactor", message: 'expected one of "SXM", "PCIe", "NVL", received "OAM"' }],
    ],
    [
      "a form factor on an entry without any",
      () => callUntyped(accelerators.A10G, { formFactor: "PCIe" }),
      [{ path: "A10G.formFactor", message: 'A10G has no form-factor variants, received "PCIe"' }],
    ],
    [
      "memory that the form factor does not come with",
      () => accelerators.H100({ formFactor: "NVL", memory: "80GB" }),
      [{ path: "H100.memory", message: 'expected one of "94GB" for form factor "NVL", received "80GB"' }],
    ],
    [
      "an unknown option key",
      () => callUntyped(accelerators.A100, { count: 2, gpus: 4 }),
      [{ path: "A100.gpus", message: "unknown field" }],
    ],
    [
      "options that are not an object",
      () => callUntyped(accelerators.A100, "80GB"),
      [{ path: "A100", message: 'expected an options object such as { count: 8 }, received "80GB"' }],
    ],
    [
      "several problems at once",
      () => callUntyped(accelerators.A100, { memory: "20GB", count: -1 }),
      [
        { path: "A100.count", message: "expected a positive finite number, received -1" },
        { path: "A100.memory", message: 'expected one of "40GB", "80GB", received "20GB"' },
      ],
    ],
  ];

  it.each(cases)("rejects %s", (_, fn, expected) => {
    const issues = issuesOf(fn);
    expect([...issues].sort((a, b) => a.path.localeCompare(b.path))).toEqual(expected);
  });

  it("puts the path and the message in the error text", () => {
    expect(() => callUntyped(accelerators.A100, { memory: "20GB" })).toThrow(
      /A100\.memory: expected one of "40GB", "80GB", received "20GB"/,
    );
  });
});

describe("Custom", () => {
  it("builds a custom accelerator", () => {
    expect(accelerators.Custom("My-GPU", { memory: "48GB", count: 2 })).toEqual({
      kind: "accelerator",
      name: "My-GPU",
      manufacturer: "custom",
      memory: "48GB",
      memoryGb: 48,
      count: 2,
      formFactor: undefined,
      custom: true,
      isTrainium: false,
      aliases: [],
    });
    expect(accelerators.Custom("  Experimental-TPU ")).toMatchObject({
      name: "Experimental-TPU",
      memory: undefined,
      memoryGb: undefined,
      count: 1,
    });
    expect(accelerators.Custom("Half", { memory: "1.5GB", formFactor: "M.2" })).toMatchObject({
      memoryGb: 1.5,
      formFactor: "M.2",
    });
  });

  it("validates name and options together", () => {
    expect(issuesOf(() => accelerators.Custom("   ", { memory: "48 gigs", count: 0 }))).toEqual([
      { path: "Custom.name", message: "expected a non-empty name" },
      { path: "Custom.memory", message: 'expected memory like "48GB", received "48 gigs"' },
      { path: "Custom.count", message: "expected a positive finite number, received 0" },
    ]);
    expect(issuesOf(() => (accelerators.Custom as (name: unknown) => Accelerator)(42))).toEqual([
      { path: "Custom.name", message: "expected a non-empty name, received 42" },
    ]);
    // @ts-expect-error unknown option
    expect(issuesOf(() => accelerators.Custom("X", { vendor: "acme" }))).toEqual([
      { path: "Custom.vendor", message: "unknown field" },
    ]);
  });
});

describe("acceleratorFromName", () => {
  const path = "pools.train.accelerator";
  const resolve = (text: string) => acceleratorFromName(text, path);

  it.each([
    ["A100", "A100", "80GB", 1, undefined],
    ["a100", "A100", "80GB", 1, undefined],
    ["RTX-4090", "RTX_4090", "24GB", 1, undefined],
    ["rtx 4090", "RTX_4090", "24GB", 1, undefined],
    ["rtx_4070_ti_super", "RTX_4070_Ti_Super", "16GB", 1, undefined],
    ["NVIDIA GeForce RTX 4090", "RTX_4090", "24GB", 1, undefined],
    ["A100-80GB", "A100", "80GB", 1, undefined],
    ["A100 40GB", "A100", "40GB", 1, undefined],
    ["A100-40G", "A100", "40GB", 1, undefined],
    ["H100-SXM", "H100", "80GB", 1, "SXM"],
    ["h100 nvl", "H100", "94GB", 1, "NVL"],
    ["NVIDIA A100-SXM4-80GB", "A100", "80GB", 1, "SXM"],
    ["NVIDIA A100-PCIE-40GB", "A100", "40GB", 1, "PCIe"],
    ["NVIDIA H100 80GB HBM3", "H100", "80GB", 1, undefined],
    ["Tesla V100-SXM2-16GB", "V100", "16GB", 1, "SXM"],
    ["RTX PRO 6000 Blackwell Max-Q", "RTX_PRO_6000", "96GB", 1, "Max-Q"],
    ["NVIDIA RTX 6000 Ada Generation", "RTX_6000_Ada", "48GB", 1, undefined],
    ["AMD Instinct MI300X", "MI300X", "192GB", 1, undefined],
    ["a6000", "RTX_A6000", "48GB", 1, undefined],
    ["trn2", "Trainium2", "96GB", 1, undefined],
    ["v5litepod", "TPU_v5e", "16GB", 1, undefined],
    ["Trillium", "TPU_v6e", "32GB", 1, undefined],
    ["GTX1080", "GTX_1080", "8GB", 1, undefined],
    ["A100:8", "A100", "80GB", 8, undefined],
    ["A100 : 0.5", "A100", "80GB", 0.5, undefined],
    ["A100x8", "A100", "80GB", 8, undefined],
    ["H100 SXM x 4", "H100", "80GB", 4, "SXM"],
    ["MI300Xx8", "MI300X", "192GB", 8, undefined],
    ["8x H100", "H100", "80GB", 8, undefined],
    ["4xA100-40GB", "A100", "40GB", 4, undefined],
    ["  L4  ", "L4", "24GB", 1, undefined],
  ] as const)("reads %j", (text, name, memory, count, formFactor) => {
    expect(resolve(text)).toMatchObject({
      kind: "accelerator",
      name,
      memory,
      count,
      formFactor,
      custom: false,
    });
  });

  it("gives the same frozen object as the factory", () => {
    expect(resolve("A100-40GB:8")).toEqual(accelerators.A100({ memory: "40GB", count: 8 }));
    expect(Object.isFrozen(resolve("T4"))).toBe(true);
  });

  it("rejects unknown names with up to three suggestions", () => {
    expect(issuesOf(() => resolve("FOO"))).toEqual([{ path, message: 'unknown accelerator "FOO"' }]);
    expect(issuesOf(() => resolve("H1OO"))).toEqual([
      { path, message: 'unknown accelerator "H1OO"; did you mean "H100"?' },
    ]);
    const [issue] = issuesOf(() => resolve("4090:2"));
    expect(issue?.message).toMatch(/^unknown accelerator "4090"; did you mean "RTX_4090", "RTX_4090D"/);
    expect(issue?.message.match(/"[^"]+"/g)?.length).toBeLessThanOrEqual(4);
  });

  it("checks variants against the catalog", () => {
    expect(issuesOf(() => resolve("A100-20GB"))).toEqual([
      { path, message: 'A100 memory: expected one of "40GB", "80GB", received "20GB"' },
    ]);
    expect(issuesOf(() => resolve("H100 NVL 80GB"))).toEqual([
      { path, message: 'H100 memory: expected one of "94GB" for form factor "NVL", received "80GB"' },
    ]);
    expect(issuesOf(() => resolve("L4 SXM"))).toEqual([
      { path, message: 'L4 formFactor: L4 has no form-factor variants, received "SXM"' },
    ]);
  });

  it("rejects bad counts and empty names", () => {
    expect(issuesOf(() => resolve("A100:0"))).toEqual([
      { path, message: 'expected a positive count after the name, received "0"' },
    ]);
    expect(issuesOf(() => resolve("A100:lots"))).toEqual([
      { path, message: 'expected a positive count after the name, received "lots"' },
    ]);
    expect(issuesOf(() => resolve("  "))).toEqual([
      { path, message: 'expected an accelerator name such as "A100", received ""' },
    ]);
  });
});

describe("canonicalAcceleratorName", () => {
  it("normalises names as providers and nvidia-smi write them", () => {
    expect(canonicalAcceleratorName("rtx 4090")).toBe("RTX_4090");
    expect(canonicalAcceleratorName("NVIDIA A100-SXM4-80GB")).toBe("A100");
    expect(canonicalAcceleratorName("H100 NVL")).toBe("H100");
    expect(canonicalAcceleratorName("Tesla T4")).toBe("T4");
    expect(canonicalAcceleratorName("RTX 6000 Ada")).toBe("RTX_6000_Ada");
    expect(canonicalAcceleratorName("RTX 6000")).toBeUndefined();
    expect(canonicalAcceleratorName("A100-20GB")).toBe("A100");
    expect(canonicalAcceleratorName("tpu v5 lite")).toBe("TPU_v5e");
    expect(canonicalAcceleratorName("nonsense")).toBeUndefined();
  });

  it("maps every catalog name and alias back to its entry", () => {
    for (const entry of acceleratorCatalog) {
      for (const text of [entry.name, ...entry.aliases, entry.name.toLowerCase().replaceAll("_", " ")]) {
        expect(canonicalAcceleratorName(text), text).toBe(entry.name);
      }
    }
  });
});

describe("acceleratorFormFactor and canonicalFormFactor", () => {
  it("read the form factor a provider's or nvidia-smi's name says, and only when it says one", () => {
    expect(acceleratorFormFactor("H100 SXM")).toBe("SXM");
    expect(acceleratorFormFactor("NVIDIA A100-SXM4-80GB")).toBe("SXM");
    expect(acceleratorFormFactor("Tesla V100-SXM2-16GB")).toBe("SXM");
    expect(acceleratorFormFactor("NVIDIA H100 PCIe")).toBe("PCIe");
    expect(acceleratorFormFactor("NVIDIA A100 80GB PCIe")).toBe("PCIe");
    expect(acceleratorFormFactor("H100 PCIE")).toBe("PCIe");
    expect(acceleratorFormFactor("H100 NVL")).toBe("NVL");
    expect(acceleratorFormFactor("H200-NVL:2")).toBe("NVL");
    expect(acceleratorFormFactor("NVIDIA H100 80GB HBM3")).toBeUndefined();
    expect(acceleratorFormFactor("A100")).toBeUndefined();
    expect(acceleratorFormFactor("no such gpu SXM")).toBeUndefined();
    // Only variants the catalog entry has: an RTX 4090 has none to tell apart.
    expect(acceleratorFormFactor("GeForce RTX 4090 PCIe 24GB")).toBeUndefined();
    expect(acceleratorFormFactor("RTX PRO 6000 Blackwell Server Edition")).toBe("Server");
  });

  it("spell form factors as the catalog does, keeping unknown ones as written", () => {
    expect(canonicalFormFactor("sxm5")).toBe("SXM");
    expect(canonicalFormFactor("PCIE")).toBe("PCIe");
    expect(canonicalFormFactor(" nvl ")).toBe("NVL");
    expect(canonicalFormFactor("max-q")).toBe("Max-Q");
    expect(canonicalFormFactor("M.2")).toBe("M.2");
    expect(canonicalFormFactor("")).toBeUndefined();
    expect(canonicalFormFactor(undefined)).toBeUndefined();
  });
});

describe("acceleratorSchema", () => {
  it("accepts factory output and returns a frozen accelerator", () => {
    const a100 = accelerators.A100({ memory: "40GB", count: 8 });
    const parsed = acceleratorSchema.parse(a100);
    expect(parsed).toEqual(a100);
    expect(Object.isFrozen(parsed)).toBe(true);
    expect(acceleratorSchema.parse(accelerators.Custom("My-GPU", { memory: "48GB" }))).toMatchObject({
      custom: true,
    });
  });

  it("accepts a spread of a factory result with a valid change", () => {
    expect(acceleratorSchema.parse({ ...accelerators.H100(), count: 4 })).toMatchObject({
      name: "H100",
      count: 4,
    });
  });

  it("rejects a string, pointing at sky.accelerators", () => {
    const result = acceleratorSchema.safeParse("A100");
    expect(result.success).toBe(false);
    expect(result.error?.issues[0]?.message).toBe(
      'expected an accelerator from sky.accelerators (e.g. sky.accelerators.A100()), received the string "A100"; strings name accelerators only in skyward.toml',
    );
  });

  it.each([
    ["an unknown catalog name", { name: "Banana" }, "name", /^unknown accelerator "Banana"/],
    [
      "a memory variant that does not exist",
      { memory: "20GB", memoryGb: 20 },
      "memory",
      /expected one of "40GB", "80GB"/,
    ],
    [
      "memoryGb that disagrees with memory",
      { memoryGb: 40 },
      "memoryGb",
      /expected 80 for A100, received 40/,
    ],
    [
      "the wrong manufacturer",
      { manufacturer: "amd" },
      "manufacturer",
      /expected "nvidia" for A100, received "amd"/,
    ],
    ["a zero count", { count: 0 }, "count", /positive finite number, received 0/],
    ["the wrong brand", { kind: "gpu" }, "kind", /expected "accelerator", received "gpu"/],
    ["an extra key", { price: 2 }, "", /./],
  ])("rejects a forged object with %s", (_, change, field, message) => {
    const result = acceleratorSchema.safeParse({ ...accelerators.A100(), ...change });
    expect(result.success).toBe(false);
    const issue = result.error?.issues[0];
    expect(issue?.path.join(".")).toBe(field);
    expect(issue?.message).toMatch(message);
  });

  it("rejects incomplete objects and non-objects", () => {
    expect(acceleratorSchema.safeParse({ kind: "accelerator", name: "A100" }).success).toBe(false);
    expect(acceleratorSchema.safeParse(null).success).toBe(false);
    expect(acceleratorSchema.safeParse(accelerators.A100).success).toBe(false);
  });
});
