/**
 * Secrets on the test bed (real sshd hosts, the real bootstrap and tunnel): the pool's tasks read each
 * secret from `os.environ` (threads, and a process a task starts); no planted value is in any file
 * under the host's root (env.sh, the bootstrap script, the worker's log) or the client's Skyward
 * home, in a process's command line during the run, in the log file, the events or the console; a
 * printed one shows masked. A detached pool attached again gets the attaching client's values.
 */
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";
import { REDACTED } from "@skyward/core/contract";
import {
  createTestbed,
  requireTestbed,
  type ScratchSkywardHome,
  type Testbed,
  testbedSshHosts,
  useScratchSkywardHome,
} from "@skyward/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  capturingStderr,
  secretsInCommandLines,
  secretsInFiles,
} from "../../core/test/fixtures/secret-leaks.js";
import { SSH } from "../src/index.js";

const skipReason = await requireTestbed();
const tasks = fileURLToPath(new URL("../../core/test/fixtures/secret_tasks.py", import.meta.url));
const read = sky.python<[name: string], string | null>("secret_tasks:read");
const readInSubprocess = sky.python<[name: string], string>("secret_tasks:read_in_subprocess");
const say = sky.python<[text: string], string>("secret_tasks:say");
const hold = sky.python<[seconds: number], string>("secret_tasks:hold");

// Planted values (named so that the tests' secret scanner knows them too).
const hfToken = "hf_PlantedSshSecretToken_5Vw8";
const dbPassword = "db-planted-ssh-password-2291";
const rotatedToken = "hf_RotatedSshSecretToken_8Kp1";
const PLANTED = [hfToken, dbPassword, rotatedToken];

describe.skipIf(skipReason !== undefined)("secrets on SSH hosts of the test bed", () => {
  let bed: Testbed;
  let home: ScratchSkywardHome | undefined;
  let outside: string;
  let passwordFile: string;

  beforeAll(async () => {
    bed = await createTestbed({ hosts: 1 });
    home = await useScratchSkywardHome("skyward-ssh-secrets-");
    outside = await mkdtemp(join(tmpdir(), "skyward-ssh-secrets-source-"));
    passwordFile = join(outside, "db-password");
    await writeFile(passwordFile, `${dbPassword}\n`, { mode: 0o600 });
    process.env.SKYTEST_SSH_SECRETS_HF = hfToken;
  }, 300_000);

  afterAll(async () => {
    delete process.env.SKYTEST_SSH_SECRETS_HF;
    await bed?.teardown();
    await home?.restore();
    await rm(outside, { recursive: true, force: true });
  });

  it("reach the tasks over the worker connection only, and are masked in output", async () => {
    const root = bed.hosts[0]?.root as string;
    const homePath = (home as ScratchSkywardHome).path;
    const logFile = join(homePath, "logs", "ssh-secrets.log");
    const events: sky.SkywardEvent[] = [];
    const { result: id, console: consoleOutput } = await capturingStderr(async () => {
      const pool = await sky.compute(
        {
          provider: SSH({ hosts: testbedSshHosts(bed) }),
          nodes: 1,
          ttl: 120,
          image: { includes: [tasks] },
          secrets: { HF_TOKEN: { env: "SKYTEST_SSH_SECRETS_HF" }, DB_PASSWORD: { file: passwordFile } },
          options: { console: "log", logging: { file: logFile, level: "DEBUG" } },
        },
        { onEvent: (event) => events.push(event) },
      );
      expect(await pool.run(read("HF_TOKEN"))).toBe(hfToken);
      expect(await pool.run(read("DB_PASSWORD"))).toBe(dbPassword);
      expect(await pool.run(readInSubprocess("DB_PASSWORD"))).toBe(dbPassword);
      await pool.run(say(`the token is ${hfToken}`));
      const held = pool.run(hold(1.5));
      expect(await secretsInCommandLines(PLANTED)).toEqual([]);
      expect(await secretsInFiles([root], PLANTED)).toEqual([]);
      await held;
      return pool.detach();
    });
    const printed = events.filter((event) => event.type === "log").map((event) => event.line);
    expect(printed).toContain(`the token is ${REDACTED}`);
    const leaked = new RegExp(PLANTED.join("|"));
    expect(JSON.stringify(events)).not.toMatch(leaked);
    expect(consoleOutput).toContain(`the token is ${REDACTED}`);
    expect(consoleOutput).not.toMatch(leaked);
    expect(await readFile(logFile, "utf8")).not.toMatch(leaked);
    // The state file of the detached pool is in the home: names only.
    expect(await secretsInFiles([homePath, root], PLANTED)).toEqual([]);

    // Attached again, the workers get the values this client reads now (one rotated).
    process.env.HF_TOKEN = rotatedToken;
    try {
      await using again = await sky.attach(id, {
        provider: SSH({ hosts: testbedSshHosts(bed) }),
        options: { console: false },
        secrets: { DB_PASSWORD: { file: passwordFile } },
      });
      expect(await again.run(read("HF_TOKEN"))).toBe(rotatedToken);
      expect(await again.run(read("DB_PASSWORD"))).toBe(dbPassword);
    } finally {
      delete process.env.HF_TOKEN;
    }
    expect(await secretsInFiles([homePath, root], PLANTED)).toEqual([]);
  }, 300_000);
});
