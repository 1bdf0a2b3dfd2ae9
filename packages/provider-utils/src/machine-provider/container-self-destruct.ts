/**
 * The boot script of a marketplace container that is given its own id and an API key scoped to it in
 * its environment (absent from SSH sessions): the script saves both 0600 and installs a command that
 * deletes the container with them, by curl else Python, by the retry rule every self-destruct shares
 * (`retriedShell`: an instance already gone, 404, counts as deleted). Deleting, not stopping, ends the
 * bill: a stopped instance still pays for its disk. The boot watchdog (checked every minute) runs it
 * after `graceSeconds` without a running worker (a client that died before its worker started, a worker
 * that crashed); while a worker runs, its own TTL decides. Nothing secret is in the script.
 */
import { workerWatchdogScript } from "./boot-template.js";
import { deleteRequest, retriedShell, type SelfDestructRequest } from "./self-destruct-retry.js";

/** What {@link containerSelfDestructScript} is given. */
export interface ContainerSelfDestruct {
  /** The marketplace's name, for the installed command's comment (`"Acme"`). */
  readonly label: string;
  /** The variables saved (the container's id and key), read back by the command. */
  readonly variables: readonly string[];
  /** The saved variables' file name, in `/root/.skyward` with the watchdog's log. */
  readonly envFile: string;
  /** Where the command is installed. */
  readonly command: string;
  /** The delete, its key header read from a saved variable. */
  readonly request: SelfDestructRequest;
  /** Seconds without a running worker under `root` before the command runs; 0: no watchdog. */
  readonly graceSeconds: number;
  readonly root: string;
}

/** The boot script; see the module comment. */
export function containerSelfDestructScript(options: ContainerSelfDestruct): string {
  const { command, variables } = options;
  const directory = "/root/.skyward";
  const log = `${directory}/watchdog.log`;
  const seconds = options.graceSeconds;
  const watchdog = workerWatchdogScript({ seconds, root: options.root, command, check: "every-minute", log });
  const format = variables.map((name) => `${name}=%s\\n`).join("");
  const values = variables.map((name) => `"$${name}"`).join(" ");
  return `${[
    "#!/bin/bash",
    "# Skyward: arm the self-destruct of this instance.",
    "umask 077",
    `mkdir -p ${directory}`,
    `printf '${format}' ${values} > ${directory}/${options.envFile}`,
    `cat > ${command} <<'SKYWARD_EOF'`,
    "#!/bin/sh",
    `# Destroys this ${options.label} instance with the API key ${options.label} scoped to it.`,
    `. ${directory}/${options.envFile}`,
    `echo "$(date -u +%FT%TZ) self-destruct" >> ${log}`,
    retriedShell(deleteRequest(options.request)),
    "SKYWARD_EOF",
    `chmod 700 ${command}`,
    ...(watchdog ? [watchdog] : []),
  ].join("\n")}\n`;
}
