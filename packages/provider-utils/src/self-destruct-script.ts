/**
 * A boot script (cloud-init user data, run as root at a VM's first boot) that arms the VM's
 * self-destruct, for providers whose VMs end themselves through the cloud's API:
 *
 * - it saves the secret the API needs (an API key) to a root-only file (mode 0600) and installs a
 *   command that runs the provider's Python 3 program with that file's path — so the secret travels in
 *   a file (and, from there, a request header), never on a command line a process list shows;
 * - a boot watchdog: if no Skyward worker has started within N seconds of boot (the client died before
 *   bootstrapping the VM), the command runs with the VM's own name. Once a worker has started, the
 *   worker's own TTL decides (it runs the provider's `selfDestruct`, which calls the same command).
 *   User data runs at the first boot only: the watchdog is also put among cloud-init's per-boot
 *   scripts, so that a VM rebooted (host maintenance), whose worker and TTL died with the old boot,
 *   is watched again — only a worker started since that boot counts ({@link workerStartedFunction}).
 */
import { shellQuote } from "@skyward/core/contract";
import { workerStartedFunction } from "./worker-started.js";

/**
 * Where cloud-init keeps the scripts it runs at every boot (its `scripts_per_boot` module,
 * https://cloudinit.readthedocs.io/en/latest/reference/modules.html#scripts-per-boot).
 */
const PER_BOOT_DIRECTORY = "/var/lib/cloud/scripts/per-boot";

/** What {@link renderSelfDestructScript} is given. */
export interface SelfDestructScriptOptions {
  /** The secret the program needs. A secret: written to {@link secretFile} (0600), never to a command line. */
  readonly secret: string;
  /** Where the secret is kept on the VM (`/etc/skyward/acme-api-key`). */
  readonly secretFile: string;
  /**
   * The Python 3 program that ends a VM. It is run as `python3 PROGRAM ...programArguments SECRET_FILE
   * TARGET`, TARGET being what the command was given (an instance id, or the VM's name).
   */
  readonly program: string;
  /** Arguments before the secret file's path (the API's URL, say). Not secret: they are on a command line. */
  readonly programArguments?: readonly string[];
  /** Where the command is installed (`/usr/local/sbin/skyward-self-destruct`); the program goes beside it, as `.py`. */
  readonly commandPath: string;
  /** The boot watchdog; without one (or with 0 seconds), none. */
  readonly watchdog?: {
    /** Seconds after boot by which a worker must have started (the pool's `ttl + sshTimeout + bootstrapTimeout`). */
    readonly seconds: number;
    /** Skyward's directory on the VM; a started worker leaves `worker.pid` / `worker.log` there. */
    readonly root: string;
    /** What the command is given when the watchdog fires: the VM's own name. */
    readonly target: string;
    /** Where the watchdog is put to run at every later boot; default cloud-init's per-boot scripts. */
    readonly perBootDirectory?: string;
  };
}

/**
 * Renders the boot script; see the module comment.
 *
 * @example
 * ```ts
 * import { renderSelfDestructScript } from "@skyward/provider-utils";
 *
 * const userData = renderSelfDestructScript({
 *   secret: "the-api-key",
 *   secretFile: "/etc/skyward/acme-api-key",
 *   program: "import sys\nprint('deleting', sys.argv[-1])\n",
 *   programArguments: ["https://api.acme.example"],
 *   commandPath: "/usr/local/sbin/skyward-self-destruct",
 *   watchdog: { seconds: 900, root: "/opt/skyward", target: "skyward-1a2b3c4d-0" },
 * });
 * ```
 */
export function renderSelfDestructScript(options: SelfDestructScriptOptions): string {
  const command = shellQuote(options.commandPath);
  const program = shellQuote(`${options.commandPath}.py`);
  const secretFile = shellQuote(options.secretFile);
  const programArguments = (options.programArguments ?? []).map((argument) => shellQuote(argument)).join(" ");
  const lines = [
    "#!/bin/sh",
    "# Skyward: arm this VM's self-destruct.",
    "umask 077",
    `mkdir -p "$(dirname ${secretFile})" "$(dirname ${command})"`,
    `cat > ${secretFile} <<'SKYWARD_SECRET'`,
    options.secret,
    "SKYWARD_SECRET",
    `cat > ${program} <<'SKYWARD_PY'`,
    options.program.trimEnd(),
    "SKYWARD_PY",
    `cat > ${command} <<'SKYWARD_SH'`,
    "#!/bin/sh",
    `exec python3 ${program} ${programArguments ? `${programArguments} ` : ""}${secretFile} "$1"`,
    "SKYWARD_SH",
    `chmod 700 ${command}`,
  ];
  const watchdog = options.watchdog;
  const seconds = Math.max(0, Math.ceil(watchdog?.seconds ?? 0));
  if (watchdog && seconds > 0) {
    // Kept beside the command, run now, and copied among the per-boot scripts where cloud-init keeps
    // them (a machine without that directory, or a failed copy, still has this boot watched).
    const script = shellQuote(`${options.commandPath}-boot-watchdog`);
    const perBoot = watchdog.perBootDirectory ?? PER_BOOT_DIRECTORY;
    lines.push(
      `# Boot watchdog: no Skyward worker within ${seconds} s of this boot, and this VM ends itself.`,
      `cat > ${script} <<'SKYWARD_WATCHDOG'`,
      "#!/bin/sh",
      workerStartedFunction(watchdog.root),
      "(",
      "  exec </dev/null >/dev/null 2>&1",
      "  up=$(cut -d. -f1 /proc/uptime 2>/dev/null || echo 0)",
      `  remaining=$((${seconds} - up))`,
      '  if [ "$remaining" -gt 0 ]; then sleep "$remaining"; fi',
      `  if ! skyward_started; then ${command} ${shellQuote(watchdog.target)}; fi`,
      ") &",
      "SKYWARD_WATCHDOG",
      `chmod 700 ${script}`,
      `[ -d ${shellQuote(perBoot)} ] && cp ${script} ${shellQuote(`${perBoot}/skyward-boot-watchdog`)} 2>/dev/null`,
      `sh ${script}`,
    );
  }
  lines.push("exit 0");
  return `${lines.join("\n")}\n`;
}
