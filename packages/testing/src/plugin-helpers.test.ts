import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConfigurationError, image } from "@skyward/core";
import { afterAll, describe, expect, it } from "vitest";
import {
  bootstrapScriptText,
  configurationIssuesOf,
  fakeCluster,
  runBootstrapScript,
} from "./plugin-helpers.js";

const scratch = mkdtempSync(join(tmpdir(), "skyward-plugin-helpers-test-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe("fakeCluster", () => {
  it("is a complete cluster without a provider, with overrides applied", () => {
    expect(fakeCluster()).toEqual({
      id: "cluster",
      provider: "fake",
      poolId: "pool",
      region: "local",
      spec: {},
      offer: {},
      ssh: null,
      specific: {},
    });
    expect(fakeCluster({ region: "eu", specific: { vpc: 1 } })).toMatchObject({
      region: "eu",
      specific: { vpc: 1 },
    });
  });
});

describe("configurationIssuesOf", () => {
  it("returns the issues of a ConfigurationError, rethrows other errors, and fails when nothing is thrown", () => {
    const issues = [{ path: "plugin.field", message: "expected a number" }];
    expect(
      configurationIssuesOf(() => {
        throw new ConfigurationError({ issues });
      }),
    ).toEqual(issues);
    expect(() =>
      configurationIssuesOf(() => {
        throw new TypeError("boom");
      }),
    ).toThrow(TypeError);
    expect(() => configurationIssuesOf(() => 1)).toThrow("expected a ConfigurationError");
  });
});

describe("runBootstrapScript", () => {
  it("runs the rendered bootstrap with the plugin ops and the given environment on top of this process's", () => {
    const run = runBootstrapScript({
      directory: scratch,
      image: image({ env: { FROM_IMAGE: "image-value" } }),
      pluginOps: ['echo "op saw $FAKE_VALUE and $FROM_IMAGE"; command -v bash >/dev/null && echo path-kept'],
      env: { FAKE_VALUE: "fake-value" },
    });
    expect(run.code, run.printed).toBe(0);
    expect(run.printed).toContain("op saw fake-value and image-value");
    expect(run.printed).toContain("path-kept");
    expect(run.root.startsWith(join(scratch, "root-"))).toBe(true);
    expect(existsSync(join(run.root, "runtime", "skyward_worker.py"))).toBe(true);
  });

  it("reports a failing op with its exit code and output", () => {
    const run = runBootstrapScript({ directory: scratch, pluginOps: ["echo op-failed-here >&2; exit 3"] });
    expect(run.code).not.toBe(0);
    expect(run.printed).toContain("op-failed-here");
  });
});

describe("bootstrapScriptText", () => {
  it("renders the script runBootstrapScript runs, with the image's packages and the plugin ops", () => {
    const script = bootstrapScriptText({
      image: image({ pip: ["numpy"] }),
      pluginOps: ["echo plugin-op-here"],
    });
    expect(script.startsWith("#!")).toBe(true);
    expect(script).toContain("numpy");
    expect(script).toContain("plugin-op-here");
    expect(script).toContain("/opt/skyward");
    expect(bootstrapScriptText({ root: "/srv/node" })).toContain("/srv/node");
  });
});
