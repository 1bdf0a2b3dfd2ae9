/**
 * The `user_data` (a cloud-init shell script, run as root at first boot) of every Skyward VM on
 * Hyperstack. It arms the VM's self-destruct:
 *
 * - It saves the API key to a root-only file (mode 0600) and installs `skyward-self-destruct`, a
 *   Python 3 script (Ubuntu images have it) that deletes a VM through Hyperstack's API — by id, or by
 *   its own name, looked up with `GET /core/virtual-machines?search=`. The key travels in a file and a
 *   request header, never on a command line, so no process list shows it. Deleting — not shutting down —
 *   is what ends the bill: a stopped VM is still charged.
 * - A boot watchdog: if no Skyward worker has started within N seconds of boot (the client died before
 *   bootstrapping the VM), the VM deletes itself. N is the pool's `ttl + sshTimeout + bootstrapTimeout`.
 *   Once a worker has started, the worker's own TTL decides (it runs the provider's `selfDestruct`).
 */
import { shellQuote } from "@skyward/core/contract";

/** Where the self-destruct command is installed on a VM. */
export const SELF_DESTRUCT_COMMAND = "/usr/local/sbin/skyward-self-destruct";

/** What the script needs. */
export interface UserDataOptions {
  /** The API root the VM calls (`https://infrahub-api.nexgencloud.com/v1`). */
  readonly apiUrl: string;
  /** The API key the VM deletes itself with. A secret: written to a 0600 file, never to a command line. */
  readonly apiKey: string;
  /** The VM's name (unique within its cluster), for the watchdog to find its own id. */
  readonly vmName: string;
  /** Skyward's directory on the VM; a started worker leaves `worker.pid` / `worker.log` there. */
  readonly root: string;
  /** Seconds after boot by which a worker must have started; 0: no watchdog. */
  readonly watchdogSeconds: number;
  /** Where the key is kept. Default `/etc/skyward/hyperstack-api-key`. */
  readonly keyFile?: string;
  /** Where the command is installed. Default {@link SELF_DESTRUCT_COMMAND}. */
  readonly commandPath?: string;
}

/** The self-destruct program: `skyward-self-destruct API_URL KEY_FILE (ID | NAME)`. */
const SELF_DESTRUCT_PYTHON = `import json, sys, urllib.parse, urllib.request
api, key_file, target = sys.argv[1].rstrip("/"), sys.argv[2], sys.argv[3]
with open(key_file) as handle:
    key = handle.read().strip()
def call(method, path):
    request = urllib.request.Request(api + path, method=method, headers={"api_key": key, "Accept": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as answer:
        body = answer.read()
    return json.loads(body) if body else {}
if target.isdigit():
    ids = [int(target)]
else:
    found = call("GET", "/core/virtual-machines?pageSize=100&search=" + urllib.parse.quote(target))
    ids = [vm["id"] for vm in found.get("instances") or [] if vm.get("name") == target]
for vm_id in ids:
    call("DELETE", "/core/virtual-machines/%d" % vm_id)
    print("skyward: deleted virtual machine %d" % vm_id)
`;

/** Renders the user data; see the module comment. */
export function renderUserData(options: UserDataOptions): string {
  const keyFile = options.keyFile ?? "/etc/skyward/hyperstack-api-key";
  const command = options.commandPath ?? SELF_DESTRUCT_COMMAND;
  const seconds = Math.max(0, Math.ceil(options.watchdogSeconds));
  const root = shellQuote(options.root);
  const lines = [
    "#!/bin/sh",
    "# Skyward: arm this VM's self-destruct (see @skyward/provider-hyperstack's README).",
    "umask 077",
    `mkdir -p "$(dirname ${shellQuote(keyFile)})" "$(dirname ${shellQuote(command)})"`,
    `cat > ${shellQuote(keyFile)} <<'SKYWARD_KEY'`,
    options.apiKey,
    "SKYWARD_KEY",
    `cat > ${shellQuote(`${command}.py`)} <<'SKYWARD_PY'`,
    SELF_DESTRUCT_PYTHON.trimEnd(),
    "SKYWARD_PY",
    `cat > ${shellQuote(command)} <<'SKYWARD_SH'`,
    "#!/bin/sh",
    `exec python3 ${shellQuote(`${command}.py`)} ${shellQuote(options.apiUrl)} ${shellQuote(keyFile)} "$1"`,
    "SKYWARD_SH",
    `chmod 700 ${shellQuote(command)}`,
  ];
  if (seconds > 0) {
    lines.push(
      `# Boot watchdog: no Skyward worker within ${seconds} s of boot, and this VM deletes itself.`,
      "(",
      "  exec </dev/null >/dev/null 2>&1",
      "  up=$(cut -d. -f1 /proc/uptime 2>/dev/null || echo 0)",
      `  remaining=$((${seconds} - up))`,
      '  if [ "$remaining" -gt 0 ]; then sleep "$remaining"; fi',
      `  if [ ! -e ${root}/worker.pid ] && [ ! -e ${root}/worker.log ]; then ${shellQuote(command)} ${shellQuote(options.vmName)}; fi`,
      ") &",
    );
  }
  lines.push("exit 0");
  return `${lines.join("\n")}\n`;
}
