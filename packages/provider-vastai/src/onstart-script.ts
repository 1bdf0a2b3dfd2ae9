/**
 * The `onstart` script every Skyward instance on Vast.ai runs at boot. It arms the self-destruct:
 *
 * - Vast.ai gives each container its instance id and an API key scoped to that instance, as
 *   `CONTAINER_ID` and `CONTAINER_API_KEY` in the container's environment (not in SSH sessions). The
 *   script saves both to `/root/.skyward/vast-instance.env` (mode 0600) and installs
 *   `/usr/local/bin/skyward-self-destruct`, which destroys the instance with
 *   `DELETE https://console.vast.ai/api/v0/instances/$CONTAINER_ID/` (by `curl`, else Python's urllib).
 *   Destroying — not stopping — is what ends the bill: a stopped instance still pays for its disk.
 * - A watchdog loop checks every minute whether a Skyward worker runs (its pid file under the node's
 *   Skyward root); after `graceSeconds` without one — a client that died before its worker started, a
 *   bootstrap that never finished, a worker that crashed — it runs the self-destruct. While a worker
 *   runs, the worker's own TTL decides (it runs the same command, see the provider's `selfDestruct`).
 *
 * Nothing secret is in the script: the key is read from the container's environment on the host.
 */

/** Where the self-destruct command is installed on the instance. */
export const SELF_DESTRUCT_COMMAND = "/usr/local/bin/skyward-self-destruct";

/** Vast.ai's limit on the length of `onstart`. */
export const ONSTART_MAX_LENGTH = 4048;

/** What the script needs to know. */
export interface OnstartScriptOptions {
  /** Seconds without a running worker before the watchdog destroys the instance; 0 disables the watchdog. */
  readonly graceSeconds: number;
  /** The worker's pid file on the instance (`/opt/skyward/worker.pid`). */
  readonly workerPidFile: string;
}

/** Renders the `onstart` script; see the module comment. */
export function renderOnstartScript(options: OnstartScriptOptions): string {
  const grace = Math.max(0, Math.floor(options.graceSeconds));
  const pidFile = options.workerPidFile.replaceAll("'", "");
  const lines = [
    "#!/bin/bash",
    "# Skyward: arm the self-destruct of this instance.",
    "umask 077",
    "mkdir -p /root/.skyward",
    `printf 'CONTAINER_ID=%s\\nCONTAINER_API_KEY=%s\\n' "$CONTAINER_ID" "$CONTAINER_API_KEY" > /root/.skyward/vast-instance.env`,
    `cat > ${SELF_DESTRUCT_COMMAND} <<'SKYWARD_EOF'`,
    "#!/bin/sh",
    "# Destroys this Vast.ai instance with the API key Vast.ai scoped to it.",
    "set -a",
    ". /root/.skyward/vast-instance.env",
    "set +a",
    'url="https://console.vast.ai/api/v0/instances/$CONTAINER_ID/"',
    'echo "$(date -u +%FT%TZ) self-destruct" >> /root/.skyward/watchdog.log',
    "if command -v curl >/dev/null 2>&1; then",
    '  exec curl -fsS -X DELETE -H "Authorization: Bearer $CONTAINER_API_KEY" "$url"',
    "fi",
    'exec python3 -c \'import os,sys,urllib.request as u; u.urlopen(u.Request(sys.argv[1], method="DELETE", headers={"Authorization": "Bearer " + os.environ["CONTAINER_API_KEY"]}), timeout=60)\' "$url"',
    "SKYWARD_EOF",
    `chmod 700 ${SELF_DESTRUCT_COMMAND}`,
  ];
  if (grace > 0) {
    lines.push(
      `# Watchdog: destroy the instance after ${grace} s without a running Skyward worker.`,
      "nohup sh -c '",
      "  idle=0",
      "  while sleep 60; do",
      `    if [ -f ${pidFile} ] && kill -0 "$(cat ${pidFile})" 2>/dev/null; then idle=0; else idle=$((idle + 60)); fi`,
      `    if [ "$idle" -ge ${grace} ]; then ${SELF_DESTRUCT_COMMAND}; idle=0; fi`,
      "  done",
      "' >> /root/.skyward/watchdog.log 2>&1 &",
    );
  }
  return `${lines.join("\n")}\n`;
}
