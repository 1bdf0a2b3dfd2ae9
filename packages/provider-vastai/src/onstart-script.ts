/**
 * The `onstart` script every Skyward instance on Vast.ai runs at boot, arming its self-destruct. Vast.ai
 * gives each container its id and an API key scoped to that instance (`CONTAINER_ID`,
 * `CONTAINER_API_KEY`, absent from SSH sessions): the script saves both 0600 and installs a command that
 * destroys the instance with them (`DELETE /api/v0/instances/$CONTAINER_ID/`, by curl else Python).
 * Destroying, not stopping, ends the bill: a stopped instance still pays for its disk. A watchdog runs it
 * after `graceSeconds` without a running worker (a client that died before its worker started, a worker
 * that crashed); while a worker runs, its own TTL decides. Nothing secret is in the script.
 */

/** Where the self-destruct command is installed on the instance. */
export const SELF_DESTRUCT_COMMAND = "/usr/local/bin/skyward-self-destruct";

/** Vast.ai's limit on the length of `onstart`. */
export const ONSTART_MAX_LENGTH = 4048;

/**
 * Renders the `onstart` script: `graceSeconds` without a running worker (its pid file `workerPidFile`)
 * before the watchdog destroys the instance; 0 disables the watchdog.
 */
export function renderOnstartScript(options: { graceSeconds: number; workerPidFile: string }): string {
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
