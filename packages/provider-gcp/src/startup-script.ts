/**
 * What runs on a VM to end it: the self-delete (a `DELETE` of the VM through the Compute Engine API
 * with the VM's own service-account token from the metadata server, falling back to a shutdown, which
 * at least stops the billing of its vCPUs and GPUs), and the `startup-script` metadata: a boot watchdog
 * that self-deletes the VM if no Skyward worker has started on it within N seconds of boot — the client
 * died or lost the VM before bootstrapping it. Once a worker has started, the worker's own TTL watchdog
 * takes over, with the same self-delete ({@link selfDeleteCommand}).
 *
 * The token never appears on a command line: the header goes to curl on its standard input (`-H @-`).
 * Metadata server paths: https://cloud.google.com/compute/docs/metadata/predefined-metadata-keys;
 * the token: https://cloud.google.com/compute/docs/access/authenticate-workloads#applications.
 */
import { workerStartedFunction } from "@skyward/provider-utils";

/** What the boot watchdog needs. */
export interface StartupScriptOptions {
  /** Skyward's directory on the VM; a worker's start leaves `worker.pid` / `worker.log` there. */
  readonly root: string;
  /** Seconds after boot by which a worker must have started. */
  readonly seconds: number;
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
 * The shell command that deletes the VM it runs on, or shuts it down when the API call fails. `sudo`
 * prefixes the shutdown for a non-root login.
 */
export function selfDeleteCommand(options: { readonly sudo: boolean }): string {
  const shutdown = `${options.sudo ? "sudo " : ""}shutdown -h now`;
  return [
    "md=http://metadata.google.internal/computeMetadata/v1",
    `get() { curl -sf -H 'Metadata-Flavor: Google' "$md/$1"; }`,
    `token=$(get instance/service-accounts/default/token | sed -n 's/.*"access_token" *: *"\\([^"]*\\)".*/\\1/p')`,
    `target="https://compute.googleapis.com/compute/v1/projects/$(get project/project-id)/zones/$(get instance/zone | sed 's#.*/##')/instances/$(get instance/name)"`,
    `if [ -n "$token" ] && printf 'Authorization: Bearer %s\\n' "$token" | curl -sf -X DELETE -H @- "$target" >/dev/null; then :; else ${shutdown}; fi`,
  ].join("; ");
}

/**
 * The `startup-script` metadata value (run as root by the guest agent at every boot). It starts the
 * watchdog in the background, detached, and returns at once. Time is measured from boot
 * (`/proc/uptime`), not from when the guest agent got to the script.
 */
export function renderStartupScript(options: StartupScriptOptions): string {
  const seconds = Math.max(0, Math.ceil(options.seconds));
  return `#!/bin/sh
# Skyward boot watchdog: if no Skyward worker has started within ${seconds} s of this boot, delete this
# VM (or shut it down). A started worker leaves worker.pid/worker.log in ${options.root}.
${workerStartedFunction(options.root)}
skyward_watchdog() {
  up=$(cut -d. -f1 /proc/uptime 2>/dev/null || echo 0)
  remaining=$((${seconds} - up))
  if [ "$remaining" -gt 0 ]; then sleep "$remaining"; fi
  if ! skyward_started; then
    logger -t skyward "no worker started within ${seconds} s of boot: deleting this VM" 2>/dev/null || true
    ${selfDeleteCommand({ sudo: false })}
  fi
}
(
  exec </dev/null >/dev/null 2>&1
  skyward_watchdog
) &
exit 0
`;
}
