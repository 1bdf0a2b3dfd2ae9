/**
 * The boot watchdog: the instance's user data. If no Skyward worker has started on the instance
 * within N seconds of boot — the client died or lost the instance before bootstrapping it — the
 * instance shuts itself down, and since it is launched with `InstanceInitiatedShutdownBehavior =
 * terminate`, that terminates it. Once a worker has started, the worker's own TTL watchdog takes over.
 *
 * N is the pool's `ttl` plus the time the pool allows to reach the node over SSH (`sshTimeout`) and
 * to bootstrap it (`bootstrapTimeout`): a node still being set up is never cut short.
 */
import { shellQuote } from "@skyward/core/contract";
import { workerStartedFunction } from "@skyward/provider-utils";

/**
 * Where cloud-init keeps the scripts it runs at every boot (its `scripts_per_boot` module,
 * https://cloudinit.readthedocs.io/en/latest/reference/modules.html#scripts-per-boot).
 */
export const PER_BOOT_DIRECTORY = "/var/lib/cloud/scripts/per-boot";

/** What the boot watchdog needs. */
export interface BootWatchdogOptions {
  /** Skyward's directory on the instance; a worker's start leaves `worker.pid` / `worker.log` there. */
  readonly root: string;
  /** Seconds after boot by which a worker must have started. */
  readonly seconds: number;
  /** Where the script puts a copy of itself that runs at every later boot; default {@link PER_BOOT_DIRECTORY}. */
  readonly perBootDirectory?: string;
}

/** N for a pool: `ttl + sshTimeout + bootstrapTimeout`, in whole seconds. */
export function bootWatchdogSeconds(spec: {
  readonly ttl: number;
  readonly sshTimeout: number;
  readonly bootstrapTimeout: number;
}): number {
  return Math.ceil(spec.ttl + spec.sshTimeout + spec.bootstrapTimeout);
}

/**
 * The user-data script (run as root by cloud-init at first boot). It starts the watchdog in the
 * background, detached, and returns at once so that cloud-init carries on. The time is measured
 * from boot (`/proc/uptime`), not from when cloud-init got to the script. User data runs at the first
 * boot only: the script copies itself among cloud-init's per-boot scripts, so that an instance
 * rebooted (a scheduled reboot event) whose worker died with the old boot is watched again — only a
 * worker started since that boot counts (`workerStartedFunction` of `@skyward/provider-utils`).
 */
export function renderBootWatchdog(options: BootWatchdogOptions): string {
  const seconds = Math.max(0, Math.ceil(options.seconds));
  const perBoot = options.perBootDirectory ?? PER_BOOT_DIRECTORY;
  return `#!/bin/sh
# Skyward boot watchdog: if no Skyward worker has started within ${seconds} s of this boot, shut down
# (this instance terminates on shutdown). A started worker leaves worker.pid/worker.log in ${options.root}.
skyward_per_boot=${shellQuote(`${perBoot}/skyward-boot-watchdog`)}
if [ "$0" != "$skyward_per_boot" ]; then
  mkdir -p ${shellQuote(perBoot)} 2>/dev/null && cp "$0" "$skyward_per_boot" 2>/dev/null && chmod 755 "$skyward_per_boot" 2>/dev/null
fi
${workerStartedFunction(options.root)}
skyward_watchdog() {
  up=$(cut -d. -f1 /proc/uptime 2>/dev/null || echo 0)
  remaining=$((${seconds} - up))
  if [ "$remaining" -gt 0 ]; then sleep "$remaining"; fi
  if ! skyward_started; then
    logger -t skyward "no worker started within ${seconds} s of boot: shutting down" 2>/dev/null || true
    shutdown -h now
  fi
}
# exec, not a redirection on the call: sh keeps copies of redirected descriptors of a function call,
# and an inherited stdout would keep cloud-init waiting for the watchdog.
(
  exec </dev/null >/dev/null 2>&1
  skyward_watchdog
) &
exit 0
`;
}
