/**
 * Host keys: a pinned fingerprint, or trust on first use recorded in Skyward's `known_hosts` (plain
 * or hashed names, as OpenSSH writes them), and the host key algorithms to ask for so that an
 * already known key type is negotiated.
 */

import { createHash, createHmac, timingSafeEqual } from "node:crypto";
import { appendFile, mkdir, readFile } from "node:fs/promises";
import { dirname } from "node:path";
import { ConnectionError } from "@skyward/core";
import type { Algorithms, ServerHostKeyAlgorithm } from "ssh2";
import type { ResolvedConnect, SshTarget } from "./target.js";

/** The SHA-256 fingerprint of a host key (its SSH wire encoding), as `ssh-keygen -l` prints it. */
export function sshKeyFingerprint(key: Uint8Array): string {
  return `SHA256:${createHash("sha256").update(key).digest("base64").replace(/=+$/, "")}`;
}

/** The key type (`ssh-ed25519`, `ecdsa-sha2-nistp256`, `ssh-rsa`) named at the start of a key's wire encoding. */
function keyType(key: Buffer): string {
  if (key.length < 4) return "unknown";
  const length = key.readUInt32BE(0);
  return key.subarray(4, 4 + length).toString("latin1");
}

/**
 * The name a host has in `known_hosts`: its alias when it has one, else `host` on port 22 and
 * `[host]:port` otherwise (as OpenSSH writes it).
 */
function knownHostsName(target: Pick<SshTarget, "host" | "port" | "hostKeyAlias">): string {
  if (target.hostKeyAlias !== undefined) return target.hostKeyAlias;
  return target.port === 22 ? target.host : `[${target.host}]:${target.port}`;
}

interface KnownHostEntry {
  readonly line: number;
  readonly type: string;
  readonly key: Buffer;
}

function hostPatternMatches(pattern: string, name: string): boolean {
  if (pattern.startsWith("|1|")) {
    const [salt, hash] = pattern.slice(3).split("|");
    if (!salt || !hash) return false;
    const expected = Buffer.from(hash, "base64");
    const actual = createHmac("sha1", Buffer.from(salt, "base64")).update(name).digest();
    return expected.length === actual.length && timingSafeEqual(expected, actual);
  }
  return pattern === name;
}

/** The entries of a `known_hosts` text for `name` (plain or hashed host names; markers and wildcards are skipped). */
function findKnownHosts(text: string, name: string): KnownHostEntry[] {
  const entries: KnownHostEntry[] = [];
  const lines = text.split("\n");
  for (const [index, raw] of lines.entries()) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#") || line.startsWith("@")) continue;
    const [hosts, type, key] = line.split(/\s+/);
    if (!hosts || !type || !key) continue;
    if (!hosts.split(",").some((pattern) => hostPatternMatches(pattern, name))) continue;
    entries.push({ line: index + 1, type, key: Buffer.from(key, "base64") });
  }
  return entries;
}

/** Host key algorithms that produce keys of a `known_hosts` key type. */
function algorithmsForKeyType(type: string): string[] {
  return type === "ssh-rsa" ? ["rsa-sha2-512", "rsa-sha2-256", "ssh-rsa"] : [type];
}

const supportedHostKeyAlgorithms = new Set<string>([
  "ssh-ed25519",
  "ecdsa-sha2-nistp256",
  "ecdsa-sha2-nistp384",
  "ecdsa-sha2-nistp521",
  "rsa-sha2-512",
  "rsa-sha2-256",
  "ssh-rsa",
]);

// Appends to one known_hosts file are serialised, so that concurrent first connections to the same
// host record it once.
const knownHostsWrites = new Map<string, Promise<unknown>>();

function serialised<T>(file: string, action: () => Promise<T>): Promise<T> {
  const previous = knownHostsWrites.get(file) ?? Promise.resolve();
  const next = previous.then(action, action);
  const settled = next.catch(() => undefined);
  knownHostsWrites.set(file, settled);
  void settled.then(() => {
    if (knownHostsWrites.get(file) === settled) knownHostsWrites.delete(file);
  });
  return next;
}

async function readKnownHosts(file: string): Promise<string> {
  try {
    return await readFile(file, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return "";
    throw error;
  }
}

/** Checks a host key against the pinned fingerprint or `known_hosts`; records it on first use. */
export async function checkHostKey(
  resolved: ResolvedConnect,
  key: Buffer,
): Promise<ConnectionError | undefined> {
  const { target, options, hostPort } = resolved;
  const fingerprint = sshKeyFingerprint(key);
  const type = keyType(key);
  if (target.hostKeyFingerprint !== undefined) {
    if (fingerprint === target.hostKeyFingerprint.replace(/=$/, "")) return undefined;
    return new ConnectionError({
      host: hostPort,
      node: options.node,
      message:
        `host key of ${hostPort} is ${type} ${fingerprint}, but ${target.hostKeyFingerprint} was expected; ` +
        "refusing to connect (someone may be intercepting the connection, or the expected fingerprint is stale)",
    });
  }
  const file = resolved.knownHostsFile;
  const name = knownHostsName(target);
  return serialised(file, async () => {
    const known = findKnownHosts(await readKnownHosts(file), name);
    if (known.some((entry) => entry.key.equals(key))) return undefined;
    if (known.length > 0) {
      const lines = known.map((entry) => entry.line).join(", ");
      const previous = known.map((entry) => `${entry.type} ${sshKeyFingerprint(entry.key)}`).join(", ");
      return new ConnectionError({
        host: hostPort,
        node: options.node,
        message:
          `host key for ${hostPort}${target.hostKeyAlias !== undefined ? ` (recorded as ${target.hostKeyAlias})` : ""} changed: ` +
          `it was ${previous}, the server now offers ${type} ${fingerprint}; ` +
          "someone may be intercepting the connection, or the host was reinstalled — refusing to connect. " +
          `Remove the line (line ${lines}) from ${file} if the change is expected.`,
      });
    }
    await mkdir(dirname(file), { recursive: true, mode: 0o700 });
    await appendFile(file, `${name} ${type} ${key.toString("base64")}\n`, { mode: 0o600 });
    return undefined;
  });
}

/** Host key algorithms with those of the already known keys first, so that the same key type is negotiated. */
export async function hostKeyAlgorithms(resolved: ResolvedConnect): Promise<Algorithms | undefined> {
  if (resolved.target.hostKeyFingerprint !== undefined) return undefined;
  const text = await readKnownHosts(resolved.knownHostsFile);
  const known = findKnownHosts(text, knownHostsName(resolved.target));
  const preferred = [...new Set(known.flatMap((entry) => algorithmsForKeyType(entry.type)))].filter(
    (algorithm): algorithm is ServerHostKeyAlgorithm => supportedHostKeyAlgorithms.has(algorithm),
  );
  if (preferred.length === 0) return undefined;
  // ssh2 applies these in key order and skips a `prepend` entry already in the list, so they are
  // removed first; `prepend` puts each entry in front in turn, hence the reversal.
  return { serverHostKey: { remove: preferred, prepend: [...preferred].reverse(), append: [] } };
}
