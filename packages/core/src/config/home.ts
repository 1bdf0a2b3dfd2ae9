import { homedir } from "node:os";
import { join } from "node:path";

/**
 * Skyward's directory on this machine: `$SKYWARD_HOME`, else `~/.skyward`. An empty
 * `SKYWARD_HOME` counts as unset (it would otherwise put pools, keys and logs in the current directory).
 */
export function skywardHome(): string {
  const home = process.env.SKYWARD_HOME;
  return home ? home : join(homedir(), ".skyward");
}
