import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { image } from "@skyward/core";
import { applyImageTransforms, collectBootstrapOps } from "@skyward/core/contract";
import { configurationIssuesOf, fakeCluster, runBootstrapScript } from "@skyward/testing";
import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest";
import { DEFAULT_HUGGINGFACE_PACKAGES, huggingface } from "./index.js";

const TOKEN = "hf_SeCrEtToKeN0123456789abcdefXYZ";
const cluster = fakeCluster();
const scratch = mkdtempSync(join(tmpdir(), "skyward-huggingface-test-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

let savedToken: string | undefined;
beforeEach(() => {
  savedToken = process.env.HF_TOKEN;
  delete process.env.HF_TOKEN;
});
afterEach(() => {
  if (savedToken === undefined) delete process.env.HF_TOKEN;
  else process.env.HF_TOKEN = savedToken;
});

/** A stand-in `huggingface_hub` whose `login` records what it was given. */
function fakeHub(): { pythonPath: string; record: string } {
  const pythonPath = mkdtempSync(join(scratch, "fake-hub-"));
  mkdirSync(join(pythonPath, "huggingface_hub"));
  writeFileSync(
    join(pythonPath, "huggingface_hub", "__init__.py"),
    [
      "import json, os",
      "def login(token=None, add_to_git_credential=False, **kwargs):",
      '    with open(os.environ["FAKE_HUB_RECORD"], "a") as record:',
      '        record.write(json.dumps({"token": token, "git": add_to_git_credential}) + "\\n")',
      "",
    ].join("\n"),
  );
  return { pythonPath, record: join(pythonPath, "record.jsonl") };
}

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

  it("replaces the package list when given one, keeping huggingface_hub for the login", async () => {
    const pinned = await applyImageTransforms(
      [huggingface({ packages: ["transformers==4.46.3"] })],
      image(),
      cluster,
    );
    expect(pinned.pip).toEqual(["transformers==4.46.3", "huggingface_hub"]);
    const named = await applyImageTransforms(
      [huggingface({ packages: ["Huggingface-Hub>=0.26"] })],
      image(),
      cluster,
    );
    expect(named.pip).toEqual(["Huggingface-Hub>=0.26"]);
  });
});

describe("the token", () => {
  it("is in the transformed image's env and nowhere else: not in the pip list, nor in any bootstrap op", async () => {
    const plugin = huggingface({ token: TOKEN });
    const transformed = await applyImageTransforms([plugin], image(), cluster);
    expect(transformed.env).toEqual({ HF_TOKEN: TOKEN });
    const { env: _env, ...rest } = transformed;
    expect(JSON.stringify(rest)).not.toContain(TOKEN);
    const ops = collectBootstrapOps([plugin], cluster);
    expect(ops.length).toBe(1);
    expect(ops.join("\n")).not.toContain(TOKEN);
    expect(JSON.stringify(plugin)).not.toContain(TOKEN);
  });

  it("defaults to HF_TOKEN of this process when the pool starts, not when the plugin is made", async () => {
    const plugin = huggingface();
    process.env.HF_TOKEN = TOKEN;
    const transformed = await applyImageTransforms([plugin], image(), cluster);
    expect(transformed.env.HF_TOKEN).toBe(TOKEN);
    delete process.env.HF_TOKEN;
    expect((await applyImageTransforms([plugin], image(), cluster)).env).toEqual({});
  });

  it("reaches the hub login at bootstrap through env.sh, and appears in nothing the bootstrap prints", async () => {
    const plugin = huggingface({ token: TOKEN });
    const transformed = await applyImageTransforms([plugin], image(), cluster);
    // The real script, with the plugin's env and ops; its pip packages are left out (no network
    // install in a unit test): the fake hub below stands in for them.
    const hub = fakeHub();
    const run = runBootstrapScript({
      directory: scratch,
      image: image({ env: transformed.env }),
      pluginOps: collectBootstrapOps([plugin], cluster),
      env: { PYTHONPATH: hub.pythonPath, FAKE_HUB_RECORD: hub.record },
    });
    expect(run.code, run.printed).toBe(0);
    expect(
      readFileSync(hub.record, "utf8")
        .trim()
        .split("\n")
        .map((line) => JSON.parse(line)),
    ).toEqual([{ token: TOKEN, git: false }]);
    expect(run.printed).toContain("huggingface: logged in to the hub");
    expect(run.printed).not.toContain(TOKEN);
    expect(run.printed).not.toContain("SeCrEt");
    // Where it does live on the node: env.sh, readable by its owner only.
    const envFile = join(run.root, "env.sh");
    expect(readFileSync(envFile, "utf8")).toContain(TOKEN);
    expect(statSync(envFile).mode & 0o777).toBe(0o600);
  });

  it("skips the login when there is no token", async () => {
    const plugin = huggingface();
    const transformed = await applyImageTransforms([plugin], image(), cluster);
    const hub = fakeHub();
    const run = runBootstrapScript({
      directory: scratch,
      image: image({ env: transformed.env }),
      pluginOps: collectBootstrapOps([plugin], cluster),
      env: { PYTHONPATH: hub.pythonPath, FAKE_HUB_RECORD: hub.record },
    });
    expect(run.code, run.printed).toBe(0);
    expect(run.printed).toContain("huggingface: no HF_TOKEN, not logging in to the hub");
    expect(() => readFileSync(hub.record, "utf8")).toThrow(/ENOENT/);
  });

  it("fails the bootstrap when the login fails, still without printing the token", async () => {
    const plugin = huggingface({ token: TOKEN });
    const transformed = await applyImageTransforms([plugin], image(), cluster);
    const broken = mkdtempSync(join(scratch, "broken-hub-"));
    mkdirSync(join(broken, "huggingface_hub"));
    writeFileSync(
      join(broken, "huggingface_hub", "__init__.py"),
      'def login(token=None, **kwargs):\n    raise ValueError("Invalid user token.")\n',
    );
    const run = runBootstrapScript({
      directory: scratch,
      image: image({ env: transformed.env }),
      pluginOps: collectBootstrapOps([plugin], cluster),
      env: {
        PYTHONPATH: broken,
      },
    });
    expect(run.code).not.toBe(0);
    expect(run.printed).toContain("Invalid user token.");
    expect(run.printed).toMatch(/plugin op 1 of 1 failed/);
    expect(run.printed).not.toContain(TOKEN);
  });
});
