import { afterEach, describe, expect, it, vi } from "vitest";
import { isCi, requirePrerequisite, requireSystemPython } from "./prerequisites.js";

afterEach(() => {
  vi.unstubAllEnvs();
});

describe("isCi", () => {
  it.each([
    [undefined, false],
    ["", false],
    ["0", false],
    ["false", false],
    ["FALSE", false],
    ["true", true],
    ["1", true],
    ["yes", true],
  ])("CI=%j is %s", (value, expected) => {
    vi.stubEnv("CI", value);
    expect(isCi()).toBe(expected);
  });
});

describe("requirePrerequisite", () => {
  it("passes the skip reason through outside CI", () => {
    vi.stubEnv("CI", "");
    expect(requirePrerequisite("no torch", "PyTorch for the tests")).toBe("no torch");
    expect(requirePrerequisite(undefined, "PyTorch for the tests")).toBeUndefined();
  });

  it("throws under CI when the prerequisite is missing, and only then", () => {
    vi.stubEnv("CI", "true");
    expect(() => requirePrerequisite("no torch", "PyTorch for the tests")).toThrow(
      "CI requires PyTorch for the tests: no torch",
    );
    expect(requirePrerequisite(undefined, "PyTorch for the tests")).toBeUndefined();
  });
});

describe("requireSystemPython", () => {
  const python = "/usr/bin/python3";

  it("is undefined when the interpreter imports the module", async () => {
    vi.stubEnv("CI", "true");
    expect(
      await requireSystemPython("json.decoder", { purpose: "json", install: "python3", python }),
    ).toBeUndefined();
  });

  it("names the module and the package to install when the import fails, and throws under CI", async () => {
    vi.stubEnv("CI", "");
    const options = { purpose: "a module nobody has", install: "python3-nonexistent", python };
    expect(await requireSystemPython("skyward_no_such_module.sub", options)).toBe(
      `${python} cannot import skyward_no_such_module (apt-get install python3-nonexistent)`,
    );
    vi.stubEnv("CI", "1");
    await expect(requireSystemPython("skyward_no_such_module", options)).rejects.toThrow(
      /^CI requires a module nobody has: \/usr\/bin\/python3 cannot import skyward_no_such_module/,
    );
  });
});
