/**
 * The private keys of the key pairs made per pool, kept in 0600 files under
 * `$SKYWARD_HOME/keys/` (`~/.skyward/keys/`) so that `skyward` commands and the user can reach the
 * instances later. Never logged.
 */
import { chmod, mkdir, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { skywardHome } from "@skyward/core/internal";

/** The directory holding the keys: `$SKYWARD_HOME/keys`, else `~/.skyward/keys`. */
export function keysDirectory(): string {
  return join(skywardHome(), "keys");
}

/** The file a key pair's private key is kept in. */
export function keyFilePath(keyName: string): string {
  return join(keysDirectory(), `${keyName.replace(/[^A-Za-z0-9._-]/g, "_")}.pem`);
}

/** Writes a private key to its 0600 file (the directory 0700), replacing an older one; returns the path. */
export async function writePrivateKey(keyName: string, privateKey: string): Promise<string> {
  const directory = keysDirectory();
  await mkdir(directory, { recursive: true, mode: 0o700 });
  const path = keyFilePath(keyName);
  await rm(path, { force: true });
  // Created with 0600 from the start (flag wx): the key is never readable by others, not even briefly.
  await writeFile(path, privateKey.endsWith("\n") ? privateKey : `${privateKey}\n`, {
    mode: 0o600,
    flag: "wx",
  });
  await chmod(path, 0o600);
  return path;
}

/** Removes a private key file; a missing file is not an error. */
export async function removePrivateKey(path: string): Promise<void> {
  await rm(path, { force: true });
}
