/**
 * SSH key pairs Skyward generates for the providers that need one of their own (RunPod, Vast.ai…):
 * ed25519, made here with `node:crypto`, kept under a directory such as `$SKYWARD_HOME/keys` (the
 * private key 0600, in OpenSSH format). One pair per provider, created when it first creates a machine
 * and reused after, so instances of earlier pools stay reachable; reading (listing, terminating) only
 * looks the pair up, and creates nothing.
 */
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { chmod, mkdir, readFile, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";

/** A key pair on disk. */
export interface SshKeyPair {
  /** Path of the private key (mode 0600). */
  readonly identityFile: string;
  /** The public key as an `authorized_keys` line: `ssh-ed25519 AAAA… comment`. */
  readonly publicKey: string;
}

function sshString(value: Buffer | string): Buffer {
  const bytes = typeof value === "string" ? Buffer.from(value, "utf8") : value;
  const length = Buffer.alloc(4);
  length.writeUInt32BE(bytes.length);
  return Buffer.concat([length, bytes]);
}

function uint32(value: number): Buffer {
  const bytes = Buffer.alloc(4);
  bytes.writeUInt32BE(value >>> 0);
  return bytes;
}

/** A fresh ed25519 key pair: the private key in OpenSSH format, the public key as an `authorized_keys` line. */
export function generateEd25519KeyPair(comment: string): { privateKey: string; publicKey: string } {
  const { privateKey, publicKey } = generateKeyPairSync("ed25519");
  const seed = Buffer.from(String(privateKey.export({ format: "jwk" }).d), "base64url");
  const raw = Buffer.from(String(publicKey.export({ format: "jwk" }).x), "base64url");
  const publicBlob = Buffer.concat([sshString("ssh-ed25519"), sshString(raw)]);
  const check = randomBytes(4).readUInt32BE(0);
  let secret = Buffer.concat([
    uint32(check),
    uint32(check),
    sshString("ssh-ed25519"),
    sshString(raw),
    sshString(Buffer.concat([seed, raw])),
    sshString(comment),
  ]);
  // The private section is padded with 1, 2, 3… to the cipher's block size (8 for "none").
  const padding = (8 - (secret.length % 8)) % 8;
  secret = Buffer.concat([secret, Buffer.from(Array.from({ length: padding }, (_, index) => index + 1))]);
  const blob = Buffer.concat([
    Buffer.from("openssh-key-v1\0", "latin1"),
    sshString("none"),
    sshString("none"),
    sshString(""),
    uint32(1),
    sshString(publicBlob),
    sshString(secret),
  ]);
  const body = blob.toString("base64").replace(/.{1,70}/g, "$&\n");
  return {
    privateKey: `-----BEGIN OPENSSH PRIVATE KEY-----\n${body}-----END OPENSSH PRIVATE KEY-----\n`,
    publicKey: `ssh-ed25519 ${publicBlob.toString("base64")} ${comment}`,
  };
}

/** The public key (`ssh-ed25519 AAAA…`) stored in an unencrypted OpenSSH private key, or undefined. */
export function publicKeyOfOpenSshPrivateKey(text: string): string | undefined {
  const match = /-----BEGIN OPENSSH PRIVATE KEY-----([\s\S]+?)-----END OPENSSH PRIVATE KEY-----/.exec(text);
  if (!match?.[1]) return undefined;
  const blob = Buffer.from(match[1].replace(/\s+/g, ""), "base64");
  const magic = "openssh-key-v1\0";
  if (blob.subarray(0, magic.length).toString("latin1") !== magic) return undefined;
  let offset = magic.length;
  const next = (): Buffer | undefined => {
    if (offset + 4 > blob.length) return undefined;
    const length = blob.readUInt32BE(offset);
    const value = blob.subarray(offset + 4, offset + 4 + length);
    offset += 4 + length;
    return value.length === length ? value : undefined;
  };
  next(); // cipher
  next(); // kdf
  next(); // kdf options
  offset += 4; // number of keys
  const publicBlob = next();
  if (!publicBlob) return undefined;
  const typeLength = publicBlob.readUInt32BE(0);
  const type = publicBlob.subarray(4, 4 + typeLength).toString("utf8");
  return `${type} ${publicBlob.toString("base64")}`;
}

/**
 * The private key file of the key pair `name` in `directory` when there is one, else undefined.
 * Creates nothing, not even the directory: for what only reads, such as listing instances.
 */
export async function findSshIdentityFile(directory: string, name: string): Promise<string | undefined> {
  const identityFile = join(directory, name);
  try {
    return (await stat(identityFile)).isFile() ? identityFile : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The key pair `name` in `directory`, created when missing. The directory is made 0700 and the
 * private key kept 0600 (tightened when found looser); an existing key is never replaced.
 */
export async function ensureSshKeyPair(directory: string, name: string): Promise<SshKeyPair> {
  await mkdir(directory, { recursive: true, mode: 0o700 });
  const identityFile = join(directory, name);
  const publicFile = `${identityFile}.pub`;
  let privateText: string | undefined;
  try {
    privateText = await readFile(identityFile, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
  }
  if (privateText === undefined) {
    const pair = generateEd25519KeyPair(`skyward-${name}`);
    try {
      await writeFile(identityFile, pair.privateKey, { mode: 0o600, flag: "wx" });
      await writeFile(publicFile, `${pair.publicKey}\n`, { mode: 0o644 });
      return { identityFile, publicKey: pair.publicKey };
    } catch (error) {
      // Another process created it first: use theirs.
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
      privateText = await readFile(identityFile, "utf8");
    }
  }
  if (((await stat(identityFile)).mode & 0o077) !== 0) await chmod(identityFile, 0o600);
  let publicKey: string | undefined;
  try {
    publicKey = (await readFile(publicFile, "utf8")).trim() || undefined;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
  }
  if (publicKey === undefined) {
    publicKey = publicKeyOfOpenSshPrivateKey(privateText);
    if (publicKey === undefined) {
      throw new Error(
        `${identityFile} is not an unencrypted OpenSSH private key, and ${publicFile} is missing`,
      );
    }
    await writeFile(publicFile, `${publicKey}\n`, { mode: 0o644 });
  }
  return { identityFile, publicKey };
}
