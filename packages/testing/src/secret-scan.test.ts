import { spawn } from "node:child_process";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { plantedSecretsIn, scanCommandLinesForSecrets, scanForSecrets } from "./secret-scan.js";

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "skyward-secret-scan-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("plantedSecretsIn", () => {
  it("finds string literals assigned to key, token, secret and password names", () => {
    const source = [
      'const RUNPOD_API_KEY = "rp_test_5ecret_key_0123456789";',
      "const provider = RunPod({ apiKey: 'rp_wrong_key_123' });",
      "env: { HF_TOKEN: `hf_SeCrEtToKeN0123456789abcdefXYZ` },",
      'secretAccessKey: "testing1234",',
      'const short = { token: "abc" };', // too short to be told from ordinary words
      'const name = "not-a-secret-at-all";',
      'const TOML_KEY = "toml-secret-key-9876543210";',
      'apiKeyEnv: "fixture-variable", secret_key_env: "x", token: "R2_SECRET_KEY",',
      // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell-style placeholder, not a secret
      'const template = { apiKey: "${value}" };',
      'collectPluginSecrets: "packages/plugin-huggingface/src/index.test.ts",', // a file, not a secret
    ].join("\n");
    expect(plantedSecretsIn(source, "a.test.ts")).toEqual([
      { name: "a.test.ts: RUNPOD_API_KEY", value: "rp_test_5ecret_key_0123456789" },
      { name: "a.test.ts: apiKey", value: "rp_wrong_key_123" },
      { name: "a.test.ts: HF_TOKEN", value: "hf_SeCrEtToKeN0123456789abcdefXYZ" },
      { name: "a.test.ts: secretAccessKey", value: "testing1234" },
      { name: "a.test.ts: TOML_KEY", value: "toml-secret-key-9876543210" },
    ]);
  });
});

describe("scanForSecrets", () => {
  it("reports planted secrets and secret-shaped strings by file, line and name, recursing into directories", async () => {
    await mkdir(join(dir, "logs", "nested"), { recursive: true });
    await writeFile(join(dir, "logs", "clean.log"), "all good\nnothing here\n");
    await writeFile(
      join(dir, "logs", "nested", "leaky.log"),
      [
        "starting",
        "key is rp_test_5ecret_key_0123456789 oops",
        "-----BEGIN OPENSSH PRIVATE KEY-----",
        "b3BlbnNzaC1rZXktdjEAAAAA",
        `token ${"hf_"}${"a".repeat(34)} and AKIA${"B".repeat(16)}`,
      ].join("\n"),
    );
    const report = await scanForSecrets([join(dir, "logs"), join(dir, "missing")], {
      secrets: [{ name: "cli.test.ts: API_KEY", value: "rp_test_5ecret_key_0123456789" }],
    });
    expect(report.files).toBe(2);
    expect(report.bytes).toBeGreaterThan(100);
    expect(report.findings).toEqual([
      { file: join(dir, "logs", "nested", "leaky.log"), line: 2, secret: "cli.test.ts: API_KEY" },
      { file: join(dir, "logs", "nested", "leaky.log"), line: 3, secret: "private key block" },
      { file: join(dir, "logs", "nested", "leaky.log"), line: 5, secret: "Hugging Face token" },
      { file: join(dir, "logs", "nested", "leaky.log"), line: 5, secret: "AWS access key id" },
    ]);
  });

  it("finds nothing in clean files", async () => {
    await writeFile(join(dir, "ok.log"), "BEGIN PUBLIC KEY is fine\nhf_short\n");
    const report = await scanForSecrets([join(dir, "ok.log")], {
      secrets: [{ name: "x", value: "rp_test_5ecret_key_0123456789" }],
    });
    expect(report).toEqual({ files: 1, bytes: 34, findings: [] });
  });
});

describe("scanCommandLinesForSecrets", () => {
  it("names the process whose command line holds a planted secret, and only that one", async () => {
    const planted = { name: "scan test: argument", value: "command-line-planted-value-6617" };
    const holder = spawn(process.execPath, ["-e", "setTimeout(() => {}, 60_000)", planted.value], {
      stdio: "ignore",
    });
    await new Promise((resolve) => holder.once("spawn", resolve));
    try {
      const absent = { name: "scan test: absent", value: "never-on-a-command-line-2290" };
      expect(await scanCommandLinesForSecrets([planted, absent])).toEqual([
        { pid: holder.pid, secret: "scan test: argument" },
      ]);
    } finally {
      holder.kill();
    }
  });
});
