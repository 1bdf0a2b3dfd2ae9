import { image } from "@skyward/core";
import { applyImageTransforms, collectBootstrapOps, collectPluginSecrets } from "@skyward/core/contract";
import { configurationIssuesOf, fakeCluster } from "@skyward/testing";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { DEFAULT_HUGGINGFACE_PACKAGES, huggingface } from "./index.js";

const TOKEN = "hf_SeCrEtToKeN0123456789abcdefXYZ";
const cluster = fakeCluster();

let savedToken: string | undefined;
beforeEach(() => {
  savedToken = process.env.HF_TOKEN;
  delete process.env.HF_TOKEN;
});
afterEach(() => {
  if (savedToken === undefined) delete process.env.HF_TOKEN;
  else process.env.HF_TOKEN = savedToken;
});

describe("huggingface() options", () => {
  it("refuses bad options naming the field, without repeating the token", () => {
    expect(configurationIssuesOf(() => huggingface({ token: "" }))).toEqual([
      {
        path: "huggingface.token",
        message: "expected a Hugging Face access token, received an empty string",
      },
    ]);
    const issues = configurationIssuesOf(() => huggingface({ token: `${TOKEN}\nsecond line` }));
    expect(issues).toEqual([
      {
        path: "huggingface.token",
        message: "expected a Hugging Face access token without whitespace or control characters",
      },
    ]);
    expect(JSON.stringify(issues)).not.toContain("SeCrEt");
    expect(configurationIssuesOf(() => huggingface({ token: 42 as unknown as string }))[0]?.path).toBe(
      "huggingface.token",
    );
    expect(configurationIssuesOf(() => huggingface({ packages: ["transformers", ""] }))[0]?.path).toBe(
      "huggingface.packages[1]",
    );
    expect(configurationIssuesOf(() => huggingface({ tokne: TOKEN } as never))).toEqual([
      { path: "huggingface.tokne", message: "unknown field" },
    ]);
  });

  it("installs transformers, datasets, tokenizers and huggingface_hub", async () => {
    const transformed = await applyImageTransforms([huggingface()], image({ pip: ["numpy"] }), cluster);
    expect(transformed.pip).toEqual(["numpy", ...DEFAULT_HUGGINGFACE_PACKAGES]);
    expect(transformed.env).toEqual({});
  });

  it("replaces the package list when given one", async () => {
    const pinned = await applyImageTransforms(
      [huggingface({ packages: ["transformers==4.46.3"] })],
      image(),
      cluster,
    );
    expect(pinned.pip).toEqual(["transformers==4.46.3"]);
  });
});

describe("the token", () => {
  it("is a secret of the pool: in no image field, no bootstrap op, nor the plugin itself", async () => {
    const plugin = huggingface({ token: TOKEN });
    expect(collectPluginSecrets([plugin])).toEqual({ HF_TOKEN: { value: TOKEN } });
    const transformed = await applyImageTransforms([plugin], image(), cluster);
    expect(transformed.env).toEqual({});
    expect(JSON.stringify(transformed)).not.toContain(TOKEN);
    // No login at bootstrap: huggingface_hub reads HF_TOKEN from the task's environment.
    expect(collectBootstrapOps([plugin], cluster)).toEqual([]);
    expect(JSON.stringify(plugin)).not.toContain(TOKEN);
  });

  it("defaults to HF_TOKEN of this process when the pool starts, not when the plugin is made", () => {
    const plugin = huggingface();
    expect(collectPluginSecrets([plugin])).toEqual({});
    process.env.HF_TOKEN = TOKEN;
    // The source, not the value: the pool reads it with the spec's own secrets, refusing it by name.
    expect(collectPluginSecrets([plugin])).toEqual({ HF_TOKEN: { env: "HF_TOKEN" } });
  });

  it("refuses a malformed HF_TOKEN of this process without repeating it", () => {
    process.env.HF_TOKEN = `${TOKEN} trailing`;
    let message = "";
    try {
      collectPluginSecrets([huggingface()]);
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toMatch(/HF_TOKEN: expected a Hugging Face access token without whitespace/);
    expect(message).not.toContain("SeCrEt");
  });
});
