import { mkdtemp, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { privateKeyPath, removePrivateKey, skywardKeysDirectory, writePrivateKey } from "./keys.js";

let home: string;

beforeEach(async () => {
  home = await mkdtemp(join(tmpdir(), "skyward-keys-"));
  vi.stubEnv("SKYWARD_HOME", home);
});
afterEach(async () => {
  vi.unstubAllEnvs();
  await rm(home, { recursive: true, force: true });
});

describe("keys", () => {
  it("keeps keys under $SKYWARD_HOME/keys in 0600 files of a 0700 directory", async () => {
    expect(skywardKeysDirectory()).toBe(join(home, "keys"));
    expect(privateKeyPath("skyward sky/1")).toBe(join(home, "keys", "skyward_sky_1.pem"));
    const path = await writePrivateKey("pool-key", "-----BEGIN KEY-----");
    expect(path).toBe(join(home, "keys", "pool-key.pem"));
    expect(await readFile(path, "utf8")).toBe("-----BEGIN KEY-----\n");
    expect((await stat(path)).mode & 0o777).toBe(0o600);
    expect((await stat(join(home, "keys"))).mode & 0o777).toBe(0o700);
    await writePrivateKey("pool-key", "second\n");
    expect(await readFile(path, "utf8")).toBe("second\n");
    await removePrivateKey(path);
    await removePrivateKey(path);
    await expect(stat(path)).rejects.toMatchObject({ code: "ENOENT" });
  });

  it("writes to another directory when given one", async () => {
    const path = await writePrivateKey("k", "key", join(home, "elsewhere"));
    expect(path).toBe(join(home, "elsewhere", "k.pem"));
  });
});
