import { spawnSync } from "node:child_process";
import { chmod, mkdtemp, readFile, rm, stat, unlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
// The CI rule of @skyward/testing, by path: that package depends on this one.
import { isCi } from "../../testing/src/prerequisites.js";
import {
  ensureSshKeyPair,
  findSshIdentityFile,
  generateEd25519KeyPair,
  publicKeyOfOpenSshPrivateKey,
} from "./keys.js";

let directory: string;
beforeEach(async () => {
  directory = await mkdtemp(join(tmpdir(), "skyward-ssh-key-"));
});
afterEach(async () => {
  await rm(directory, { recursive: true, force: true });
});

const hasSshKeygen = spawnSync("ssh-keygen", ["-?"]).error === undefined;
if (!hasSshKeygen && isCi()) throw new Error("CI requires ssh-keygen (apt-get install openssh-client)");

describe("generateEd25519KeyPair", () => {
  it("writes an OpenSSH private key whose public half matches the authorized_keys line", () => {
    const pair = generateEd25519KeyPair("skyward-test");
    expect(pair.privateKey).toMatch(
      /^-----BEGIN OPENSSH PRIVATE KEY-----\n[A-Za-z0-9+/=\n]+-----END OPENSSH PRIVATE KEY-----\n$/,
    );
    expect(pair.publicKey).toMatch(
      /^ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI[A-Za-z0-9+/]+={0,2} skyward-test$/,
    );
    expect(publicKeyOfOpenSshPrivateKey(pair.privateKey)).toBe(pair.publicKey.replace(/ skyward-test$/, ""));
    expect(generateEd25519KeyPair("x").publicKey).not.toBe(generateEd25519KeyPair("x").publicKey);
  });

  it.skipIf(!hasSshKeygen)("is read by ssh-keygen, which derives the same public key", async () => {
    const pair = generateEd25519KeyPair("skyward-test");
    const file = join(directory, "key");
    await writeFile(file, pair.privateKey, { mode: 0o600 });
    const derived = spawnSync("ssh-keygen", ["-y", "-f", file], { encoding: "utf8" });
    expect(derived.stderr).toBe("");
    expect(derived.stdout.trim()).toBe(pair.publicKey);
  });
});

describe("ensureSshKeyPair", () => {
  it("creates the pair once, the private key 0600 in a 0700 directory, and reuses it", async () => {
    const keys = join(directory, "keys");
    const first = await ensureSshKeyPair(keys, "provider_ed25519");
    expect(first.identityFile).toBe(join(keys, "provider_ed25519"));
    expect((await stat(first.identityFile)).mode & 0o777).toBe(0o600);
    expect((await stat(keys)).mode & 0o777).toBe(0o700);
    expect((await readFile(`${first.identityFile}.pub`, "utf8")).trim()).toBe(first.publicKey);
    const second = await ensureSshKeyPair(keys, "provider_ed25519");
    expect(second).toEqual(first);
  });

  it("tightens a private key left readable by others, and rebuilds a missing .pub from it", async () => {
    const first = await ensureSshKeyPair(directory, "k");
    await chmod(first.identityFile, 0o644);
    await unlink(`${first.identityFile}.pub`);
    const again = await ensureSshKeyPair(directory, "k");
    expect((await stat(first.identityFile)).mode & 0o777).toBe(0o600);
    expect(again.publicKey).toBe(first.publicKey.replace(/ skyward-k$/, ""));
  });

  it("concurrent callers end up with the same key", async () => {
    const pairs = await Promise.all([1, 2, 3].map(() => ensureSshKeyPair(directory, "same")));
    expect(new Set(pairs.map((pair) => pair.publicKey.split(" ")[1])).size).toBe(1);
  });
});

describe("findSshIdentityFile", () => {
  it("finds the private key ensureSshKeyPair made, and creates nothing when there is none", async () => {
    const keys = join(directory, "keys");
    expect(await findSshIdentityFile(keys, "provider_ed25519")).toBeUndefined();
    await expect(stat(keys)).rejects.toMatchObject({ code: "ENOENT" });
    const pair = await ensureSshKeyPair(keys, "provider_ed25519");
    expect(await findSshIdentityFile(keys, "provider_ed25519")).toBe(pair.identityFile);
    expect(await findSshIdentityFile(keys, "other_ed25519")).toBeUndefined();
  });
});
