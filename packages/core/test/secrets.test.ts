/**
 * Secrets end to end on Local pools: tasks read them from `os.environ` (threads, child processes and
 * a process a task starts); then no planted value is in any file under the node's root or the
 * client's Skyward home, in a process's command line during the run, in the log file, the events or
 * the console; a printed or raised one shows masked. A detached pool attached from another process
 * gets them from that process, and one that cannot read them is refused by the secret's name.
 */
import { spawn } from "node:child_process";
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Plugin, REDACTED } from "../src/contract.js";
import * as sky from "../src/index.js";
import { capturingStderr, secretsInCommandLines, secretsInFiles } from "./fixtures/secret-leaks.js";

const tasks = fileURLToPath(new URL("./fixtures/secret_tasks.py", import.meta.url));
const attachChild = fileURLToPath(new URL("./fixtures/attach-secrets-child.ts", import.meta.url));
const read = sky.python<[name: string], string | null>("secret_tasks:read");
const readInSubprocess = sky.python<[name: string], string>("secret_tasks:read_in_subprocess");
const say = sky.python<[text: string], string>("secret_tasks:say");
const fail = sky.python<[text: string], never>("secret_tasks:fail");
const hold = sky.python<[seconds: number], string>("secret_tasks:hold");

// Planted values (named so that the tests' secret scanner knows them too).
const hfToken = "hf_PlantedSecretsE2eToken_7Qx2";
const dbPassword = "db-planted-secrets-password-8812";
const apiKey = "literal-planted-secrets-key-5531";
const rotatedToken = "hf_RotatedSecretsE2eToken_3Lm9";
const rotatedPassword = "db-rotated-secrets-password-4410";
const PLANTED = [hfToken, dbPassword, apiKey, rotatedToken, rotatedPassword];

let home: string;
let outside: string;
let passwordFile: string;
const previousHome = process.env.SKYWARD_HOME;

beforeAll(async () => {
  // A home of this test's own, searched whole afterwards (no venv in it: the image has no pip packages).
  home = await mkdtemp(join(tmpdir(), "skyward-secrets-home-"));
  process.env.SKYWARD_HOME = home;
  // The file a secret is read from holds its value: it is kept out of every searched directory.
  outside = await mkdtemp(join(tmpdir(), "skyward-secrets-source-"));
  passwordFile = join(outside, "db-password");
  await writeFile(passwordFile, `${dbPassword}\n`, { mode: 0o600 });
  process.env.SKYTEST_SECRETS_HF = hfToken;
});

afterAll(async () => {
  process.env.SKYWARD_HOME = previousHome;
  delete process.env.SKYTEST_SECRETS_HF;
  await rm(home, { recursive: true, force: true });
  await rm(outside, { recursive: true, force: true });
});

/** The pool's secrets: one from the environment, one from a file, one given as a value. */
function secrets(): sky.SecretsInput {
  return { HF_TOKEN: { env: "SKYTEST_SECRETS_HF" }, DB_PASSWORD: { file: passwordFile }, API_KEY: apiKey };
}

describe.each(["thread", "process"] as const)("a Local pool's secrets, %s executor", (executor) => {
  it("reach its tasks' environment and nowhere else; printed or raised, they show masked", async () => {
    const workRoot = await mkdtemp(join(tmpdir(), "skyward-secrets-root-"));
    const logFile = join(home, "logs", `secrets-${executor}.log`);
    const events: sky.SkywardEvent[] = [];
    const { console: consoleOutput } = await capturingStderr(async () => {
      await using pool = await sky.compute(
        {
          provider: sky.Local({ workRoot }),
          image: { includes: [tasks] },
          secrets: secrets(),
          options: { console: "log", logging: { file: logFile, level: "DEBUG" }, worker: { executor } },
        },
        { onEvent: (event) => events.push(event) },
      );
      expect(await pool.run(read("HF_TOKEN"))).toBe(hfToken);
      expect(await pool.run(read("DB_PASSWORD"))).toBe(dbPassword);
      expect(await pool.run(read("API_KEY"))).toBe(apiKey);
      expect(await pool.run(readInSubprocess("HF_TOKEN"))).toBe(hfToken);

      await pool.run(say(`the token is ${hfToken}`));
      const failure = await pool.run(fail(`refused with ${dbPassword}`)).then(
        () => undefined,
        (error: Error) => error,
      );
      expect(failure?.message).toContain(REDACTED);
      expect(`${failure?.message}\n${failure?.stack}`).not.toContain(dbPassword);

      // While a task runs: no process's command line, no file under the node's root.
      const held = pool.run(hold(1.5));
      expect(await secretsInCommandLines(PLANTED)).toEqual([]);
      expect(await secretsInFiles([workRoot], PLANTED)).toEqual([]);
      await held;
    });
    await rm(workRoot, { recursive: true, force: true });

    const printed = events.filter((event) => event.type === "log").map((event) => event.line);
    expect(printed).toContain(`the token is ${REDACTED}`);
    expect(JSON.stringify(events)).not.toMatch(new RegExp(PLANTED.join("|")));
    expect(consoleOutput).toContain(`the token is ${REDACTED}`);
    expect(consoleOutput).not.toMatch(new RegExp(PLANTED.join("|")));
    const log = await readFile(logFile, "utf8");
    expect(log).toContain(`the token is ${REDACTED}`);
    expect(await secretsInFiles([home], PLANTED)).toEqual([]);
  });
});

describe("a plugin's secrets", () => {
  it("join the spec's (whose own source wins for a shared name) and reach the tasks, written nowhere", async () => {
    const workRoot = await mkdtemp(join(tmpdir(), "skyward-secrets-plugin-"));
    const plugin = Plugin.create("tokens").withSecrets(() => ({
      PLUGIN_TOKEN: { env: "SKYTEST_SECRETS_HF" },
      API_KEY: "the plugin's, overridden by the spec's",
    }));
    const events: sky.SkywardEvent[] = [];
    {
      await using pool = await sky.compute(
        {
          provider: sky.Local({ workRoot }),
          image: { includes: [tasks] },
          plugins: [plugin],
          secrets: { API_KEY: apiKey },
          options: { console: false, logging: false },
        },
        { onEvent: (event) => events.push(event) },
      );
      expect(await pool.run(read("PLUGIN_TOKEN"))).toBe(hfToken);
      expect(await pool.run(read("API_KEY"))).toBe(apiKey);
      await pool.run(say(`the plugin's token is ${hfToken}`));
      expect(await secretsInCommandLines(PLANTED)).toEqual([]);
      expect(await secretsInFiles([workRoot], PLANTED)).toEqual([]);
    }
    const printed = events.filter((event) => event.type === "log").map((event) => event.line);
    expect(printed).toContain(`the plugin's token is ${REDACTED}`);
    expect(JSON.stringify(events)).not.toMatch(new RegExp(PLANTED.join("|")));
    await rm(workRoot, { recursive: true, force: true });
  });
});

describe("secrets that cannot be read", () => {
  it("refuse the pool before anything is provisioned, naming each", async () => {
    const workRoot = await mkdtemp(join(tmpdir(), "skyward-secrets-refused-"));
    const events: sky.SkywardEvent[] = [];
    const attempt = sky.compute(
      {
        provider: sky.Local({ workRoot }),
        secrets: { HF_TOKEN: { env: "SKYTEST_SECRETS_UNSET" }, DB_PASSWORD: { file: join(outside, "none") } },
        options: { console: false, logging: false },
      },
      { onEvent: (event) => events.push(event) },
    );
    await expect(attempt).rejects.toThrow(sky.ConfigurationError);
    await expect(attempt).rejects.toThrow(/secrets\.HF_TOKEN.*SKYTEST_SECRETS_UNSET is not set/s);
    await expect(attempt).rejects.toThrow(/secrets\.DB_PASSWORD.*cannot be read \(ENOENT\)/s);
    expect(events.filter((event) => event.type.startsWith("node."))).toEqual([]);
    expect(await readdir(workRoot)).toEqual([]);
    await rm(workRoot, { recursive: true, force: true });
  });
});

/** Attaches to pool `id` from another process with `environment`; what it printed. */
async function attachFromAnotherProcess(
  id: string,
  environment: Record<string, string>,
): Promise<{ values?: Record<string, string>; refused?: string; message?: string }> {
  const { SKYTEST_SECRETS_HF: _planted, ...inherited } = process.env;
  const child = spawn(process.execPath, [attachChild, id], {
    env: { ...inherited, SKYWARD_HOME: home, ...environment },
    stdio: ["ignore", "pipe", "inherit"],
  });
  let stdout = "";
  child.stdout.on("data", (chunk: Buffer) => {
    stdout += chunk.toString();
  });
  await new Promise((resolve) => child.once("exit", resolve));
  return JSON.parse(stdout.trim().split("\n").at(-1) ?? "{}");
}

describe("a detached pool's secrets", () => {
  it("are recorded by name only, and come from the process that attaches (refused by name when it cannot)", async () => {
    const workRoot = await mkdtemp(join(tmpdir(), "skyward-secrets-detach-"));
    const pool = await sky.compute({
      provider: sky.Local({ workRoot }),
      image: { includes: [tasks] },
      secrets: secrets(),
      options: { console: false, logging: false },
    });
    let id: string | undefined;
    try {
      expect(await pool.run(read("HF_TOKEN"))).toBe(hfToken);
      id = await pool.detach();
      const state = JSON.parse(await readFile(join(home, "pools", `${id}.json`), "utf8"));
      expect(state.secretNames).toEqual(["HF_TOKEN", "DB_PASSWORD", "API_KEY"]);
      expect(await secretsInFiles([home, workRoot], PLANTED)).toEqual([]);

      const refused = await attachFromAnotherProcess(id, { HF_TOKEN: rotatedToken, API_KEY: apiKey });
      expect(refused.refused).toBe("ConfigurationError");
      expect(refused.message).toMatch(
        /secrets\.DB_PASSWORD: secret DB_PASSWORD: the environment variable DB_PASSWORD is not set/,
      );
      expect(refused.message).not.toMatch(/HF_TOKEN|API_KEY/);

      const attached = await attachFromAnotherProcess(id, {
        HF_TOKEN: rotatedToken,
        DB_PASSWORD: rotatedPassword,
        API_KEY: apiKey,
      });
      expect(attached.values).toEqual({
        HF_TOKEN: rotatedToken,
        DB_PASSWORD: rotatedPassword,
        API_KEY: apiKey,
      });
      id = undefined;
    } finally {
      // A failure above may leave the workers detached: attach here and close them.
      if (id !== undefined) {
        await (
          await sky.attach(id, {
            options: { console: false },
            secrets: { DB_PASSWORD: "x", API_KEY: "x", HF_TOKEN: "x" },
          })
        ).close();
      }
      await rm(workRoot, { recursive: true, force: true });
    }
    expect(await secretsInFiles([home], PLANTED)).toEqual([]);
  });
});
