/**
 * How a Novita container starts, and how it ends itself. Novita runs the image with one start command
 * (at most 2,047 characters) as PID 1; this one authorises `$PUBLIC_KEY` for root, starts `sshd`
 * (installing OpenSSH and curl with apt-get when the image lacks them), arms the self-destruct and the
 * boot watchdog, then stays up. Killing PID 1 would not do: it is `sleep`, without a signal handler,
 * and Linux drops signals to a namespace's init that has none (pid_namespaces(7)). So the instance
 * deletes itself through the API, which is what ends the bill.
 *
 * The API key comes in the instance's environment (`SKYWARD_NOVITA_API_KEY`), is written to a root-only
 * file as a request header and dropped from the environment before anything else starts; curl reads the
 * header from that file (`-H @file`), so the key is never on a command line.
 */
import { SELF_DESTRUCT_COMMAND } from "@skyward/provider-utils";
import { DEFAULT_NODE_ROOT } from "@skyward/ssh";

const HEADER_FILE = "/etc/skyward/novita-auth";

/** The command every instance starts with; what differs per instance comes in its environment. */
export const STARTUP_COMMAND = [
  "bash -c '",
  "umask 077; mkdir -p /root/.ssh /etc/skyward && chmod 700 /root/.ssh;",
  ' printf "%s\\n" "$PUBLIC_KEY" >> /root/.ssh/authorized_keys && chmod 600 /root/.ssh/authorized_keys;',
  ` printf "Authorization: Bearer %s\\n" "$SKYWARD_NOVITA_API_KEY" > ${HEADER_FILE}; unset SKYWARD_NOVITA_API_KEY;`,
  " if ! command -v curl >/dev/null || { ! command -v sshd >/dev/null && [ ! -x /usr/sbin/sshd ]; }; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssh-server curl ca-certificates; fi;",
  ` printf "%s" "$SKYWARD_SELF_DESTRUCT" | base64 -d > ${SELF_DESTRUCT_COMMAND} && chmod 700 ${SELF_DESTRUCT_COMMAND};`,
  " mkdir -p /run/sshd && ssh-keygen -A && /usr/sbin/sshd;",
  // The boot watchdog: counted from the container's start (its /proc/uptime is the host's).
  ` if [ "$SKYWARD_WATCHDOG_SECONDS" -gt 0 ] 2>/dev/null; then (sleep "$SKYWARD_WATCHDOG_SECONDS";`,
  ` [ -e ${DEFAULT_NODE_ROOT}/worker.pid ] || [ -e ${DEFAULT_NODE_ROOT}/worker.log ] || ${SELF_DESTRUCT_COMMAND} "$SKYWARD_INSTANCE_NAME") >/dev/null 2>&1 & fi;`,
  " exec sleep infinity'",
].join("");

/**
 * `skyward-self-destruct (ID | NAME)`: deletes the instance by id, or the one of that name (the
 * watchdog's: a container does not know its id), found in the first page of `GET /gpu/instances`.
 * Tried again for a few minutes while the API refuses or cannot be reached.
 */
export function selfDestructScript(apiUrl: string): string {
  return `#!/bin/sh
api='${apiUrl.replace(/'/g, "")}'
auth="\${SKYWARD_AUTH_FILE:-${HEADER_FILE}}"
target="$1"
for attempt in 1 2 3 4 5 6 7 8 9 10 11 12; do
  id="$target"
  case "$target" in
    novita-*) id=$(curl -fsS -H @"$auth" "$api/gpu/instances?pageSize=100&pageNum=1" | tr -d '\\n' | grep -o '"id": *"[^"]*", *"name": *"'"$target"'"' | sed 's/^"id": *"\\([^"]*\\)".*/\\1/' | head -n 1) ;;
  esac
  if [ -n "$id" ] && curl -fsS -X POST -H @"$auth" -H 'Content-Type: application/json' -d '{"instanceId":"'"$id"'"}' "$api/gpu/instance/delete" >/dev/null; then
    echo "skyward: deleted instance $id"
    exit 0
  fi
  sleep "\${SKYWARD_RETRY_SECONDS:-15}"
done
exit 1
`;
}
