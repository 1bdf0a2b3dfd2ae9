/**
 * Where providers keep private keys on this machine: `$SKYWARD_HOME/keys/` (`~/.skyward/keys/`), in
 * 0600 files of a 0700 directory, so `skyward` commands and the user can reach instances later.
 * Never logged.
 */
import { chmod, mkdir, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { skywardHome } from "@skyward/core/contract";

/** The directory holding Skyward's keys: `$SKYWARD_HOME/keys`, else `~/.skyward/keys`. */
export function skywardKeysDirectory(): string {
  return join(skywardHome(), "keys");
}

/**
 * The file the private key named `name` is kept in: `<directory>/<name>.pem`, characters other than
 * letters, digits, `.`, `_` and `-` replaced by `_`.
 */
export function privateKeyPath(name: string, directory: string = skywardKeysDirectory()): string {
  return join(directory, `${name.replace(/[^A-Za-z0-9._-]/g, "_")}.pem`);
}

/**
 * Writes a private key to its 0600 file ({@link privateKeyPath}; the directory made 0700), replacing
 * an older one; returns the path.
 */
export async function writePrivateKey(
  name: string,
  privateKey: string,
  directory: string = skywardKeysDirectory(),
): Promise<string> {
  await mkdir(directory, { recursive: true, mode: 0o700 });
  const path = privateKeyPath(name, directory);
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
