import { homedir } from "node:os";
import { join } from "node:path";

/** Skyward's directory on this machine: `$SKYWARD_HOME`, else `~/.skyward`. */
export function skywardHome(): string {
  return process.env.SKYWARD_HOME ?? join(homedir(), ".skyward");
}
