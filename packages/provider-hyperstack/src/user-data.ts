/**
 * The `user_data` (a cloud-init shell script, run as root at first boot) of every Skyward VM on
 * Hyperstack: `@skyward/provider-utils`'s self-destruct boot script with Hyperstack's program. It arms
 * the VM's self-destruct:
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
import { renderSelfDestructScript } from "@skyward/provider-utils";

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
  return renderSelfDestructScript({
    secret: options.apiKey,
    secretFile: options.keyFile ?? "/etc/skyward/hyperstack-api-key",
    program: SELF_DESTRUCT_PYTHON,
    programArguments: [options.apiUrl],
    commandPath: options.commandPath ?? SELF_DESTRUCT_COMMAND,
    watchdog: { seconds: options.watchdogSeconds, root: options.root, target: options.vmName },
  });
}
