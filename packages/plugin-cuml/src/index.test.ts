import { existsSync } from "node:fs";
import { basename } from "node:path";
import { ConfigurationError, image } from "@skyward/core";
import { applyImageTransforms, type Cluster, isPlugin, workerModules } from "@skyward/core/contract";
import { bootstrapScriptText } from "@skyward/testing";
import { describe, expect, it } from "vitest";
import { cuml, NVIDIA_PACKAGE_INDEX } from "./index.js";

const cluster = { id: "cluster", provider: "fake", poolId: "pool" } as Cluster;

describe("cuml()", () => {
  it("is a plugin named cuml", () => {
    expect(isPlugin(cuml())).toBe(true);
    expect(cuml().name).toBe("cuml");
  });

  it("installs cuml-cu12 from NVIDIA's index, scoped to the RAPIDS packages", async () => {
    const transformed = await applyImageTransforms([cuml()], image({ pip: ["scikit-learn"] }), cluster);
    expect(transformed.pip).toEqual(["scikit-learn", "cuml-cu12"]);
    expect(transformed.pipIndexes).toHaveLength(1);
    const [index] = transformed.pipIndexes;
    expect(index?.url).toBe(NVIDIA_PACKAGE_INDEX);
    expect(index?.packages).toEqual(
      expect.arrayContaining([
        "cuml-cu12",
        "libcuml-cu12",
        "cudf-cu12",
        "pylibraft-cu12",
        "rmm-cu12",
        "cuvs-cu12",
      ]),
    );
    expect(index?.packages.every((name) => name.endsWith("-cu12"))).toBe(true);
    // The index holds RAPIDS only: cuML's numpy, scikit-learn… come from the default index.
    expect(index?.dependenciesFromDefault).toBe(true);
    expect(transformed.env).toEqual({});
  });

  it("uses the CUDA version asked for", async () => {
    const transformed = await applyImageTransforms([cuml({ cuda: "cu13" })], image(), cluster);
    expect(transformed.pip).toEqual(["cuml-cu13"]);
    expect(transformed.pipIndexes[0]?.packages).toContain("cuml-cu13");
    expect(transformed.pipIndexes[0]?.packages.some((name) => name.endsWith("-cu12"))).toBe(false);
  });

  it("installs cuML from that index (its other dependencies from the default one), scikit-learn from the default one, in the bootstrap's pip phase", async () => {
    const transformed = await applyImageTransforms([cuml()], image({ pip: ["scikit-learn"] }), cluster);
    const script = bootstrapScriptText({ image: transformed });
    const installs = script.split("\n").filter((line) => line.trim().startsWith("skyward_pip_install "));
    expect(installs.find((line) => line.includes("cuml-cu12"))).toBe(
      `  skyward_pip_install --index-url ${NVIDIA_PACKAGE_INDEX} --extra-index-url "\${PIP_INDEX_URL:-https://pypi.org/simple}" cuml-cu12`,
    );
    expect(installs.find((line) => line.includes("scikit-learn"))).not.toContain(NVIDIA_PACKAGE_INDEX);
  });

  it("ships its worker module, which accelerates scikit-learn in every worker process", () => {
    const [module] = workerModules([cuml()]);
    expect(module?.plugin).toBe("cuml");
    expect(module?.module).toBe("skyward_plugin_cuml");
    expect(module?.config).toEqual({ cuda: "cu12" });
    expect(basename(module?.path ?? "")).toBe("skyward_plugin_cuml.py");
    expect(existsSync(module?.path ?? "")).toBe(true);
  });

  it("refuses a CUDA version RAPIDS does not ship, naming the field", () => {
    try {
      cuml({ cuda: "cu10" as "cu12" });
      expect.unreachable();
    } catch (error) {
      expect(ConfigurationError.isInstance(error)).toBe(true);
      expect((error as ConfigurationError).issues[0]?.path).toBe("cuml.cuda");
    }
    expect(() => cuml({ version: "24.12" } as never)).toThrow(/cuml\.version/);
  });
});
