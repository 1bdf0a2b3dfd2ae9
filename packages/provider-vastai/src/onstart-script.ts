/**
 * The `onstart` script every Skyward instance on Vast.ai runs at boot, arming its self-destruct. Vast.ai
 * gives each container its id and an API key scoped to that instance (`CONTAINER_ID`,
 * `CONTAINER_API_KEY`, absent from SSH sessions): the script saves both 0600 and installs a command that
 * destroys the instance with them (`DELETE /api/v0/instances/$CONTAINER_ID/`, by curl else Python),
 * by the retry rule every self-destruct shares (`retriedShell`: 15 s apart for five minutes while
 * Vast.ai refuses; an instance already gone, 404, counts as destroyed).
 * Destroying, not stopping, ends the bill: a stopped instance still pays for its disk. The boot watchdog
 * (checked every minute) runs it after `graceSeconds` without a running worker (a client that died
 * before its worker started, a worker that crashed); while a worker runs, its own TTL decides. Nothing
 * secret is in the script.
 */
import { deleteRequest, retriedShell, workerWatchdogScript } from "@skyward/provider-utils";

/** Where the self-destruct command is installed on the instance. */
export const SELF_DESTRUCT_COMMAND = "/usr/local/bin/skyward-self-destruct";

/** The destroy, by curl else Python, the key read from the saved file and passed on standard input. */
const destroy = {
  method: "DELETE",
  url: '"https://console.vast.ai/api/v0/instances/$CONTAINER_ID/"',
  header: { variable: "CONTAINER_API_KEY", prefix: "Authorization: Bearer " },
};

/** Vast.ai's limit on the length of `onstart`. */
export const ONSTART_MAX_LENGTH = 4048;

/** The `onstart` script: `graceSeconds` without a worker under `root` (0: no watchdog) and the instance is destroyed. */
export function renderOnstartScript(options: { graceSeconds: number; root: string }): string {
  const watchdog = workerWatchdogScript({
    seconds: options.graceSeconds,
    root: options.root,
    command: SELF_DESTRUCT_COMMAND,
    check: "every-minute",
    log: "/root/.skyward/watchdog.log",
  });
  return `${[
    "#!/bin/bash",
    "# Skyward: arm the self-destruct of this instance.",
    "umask 077",
    "mkdir -p /root/.skyward",
    `printf 'CONTAINER_ID=%s\\nCONTAINER_API_KEY=%s\\n' "$CONTAINER_ID" "$CONTAINER_API_KEY" > /root/.skyward/vast-instance.env`,
    `cat > ${SELF_DESTRUCT_COMMAND} <<'SKYWARD_EOF'`,
    "#!/bin/sh",
    "# Destroys this Vast.ai instance with the API key Vast.ai scoped to it.",
    ". /root/.skyward/vast-instance.env",
    'echo "$(date -u +%FT%TZ) self-destruct" >> /root/.skyward/watchdog.log',
    retriedShell(deleteRequest(destroy)),
    "SKYWARD_EOF",
    `chmod 700 ${SELF_DESTRUCT_COMMAND}`,
    ...(watchdog ? [watchdog] : []),
  ].join("\n")}\n`;
}
