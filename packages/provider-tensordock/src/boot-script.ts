/**
 * The boot script of every Skyward VM on TensorDock, run as root by cloud-init at first boot (one
 * `runcmd` entry: `echo <base64> | base64 -d | sh`, so nothing of it is on a command line):
 * `@skyward/provider-utils`'s self-destruct boot script with TensorDock's program. It arms the VM's
 * self-destruct:
 *
 * - It saves the API token to a root-only file (mode 0600) and installs `skyward-self-destruct`, a
 *   Python 3 script that deletes a VM through TensorDock's API — by id, or by its own name, looked up
 *   with `GET /instances`. The token travels in a file and a request header, never on a command line.
 *   Deleting — not stopping — is what ends the bill: a stopped VM still pays for its storage.
 * - A boot watchdog: if no Skyward worker has started within N seconds of boot (the client died before
 *   bootstrapping the VM), the VM deletes itself. N is the pool's `ttl + sshTimeout + bootstrapTimeout`.
 *   Once a worker has started, the worker's own TTL decides (it runs the provider's `selfDestruct`).
 */
import { renderSelfDestructScript } from "@skyward/provider-utils";

/** Where the self-destruct command is installed on a VM. */
export const SELF_DESTRUCT_COMMAND = "/usr/local/sbin/skyward-self-destruct";

/** What the script needs. */
export interface BootScriptOptions {
  /** The API root the VM calls (`https://dashboard.tensordock.com/api/v2`). */
  readonly apiUrl: string;
  /** The API token the VM deletes itself with. A secret: written to a 0600 file, never to a command line. */
  readonly apiToken: string;
  /** The VM's name (unique within its cluster), for the watchdog to find its own id. */
  readonly vmName: string;
  /** Skyward's directory on the VM; a started worker leaves `worker.pid` / `worker.log` there. */
  readonly root: string;
  /** Seconds after boot by which a worker must have started; 0: no watchdog. */
  readonly watchdogSeconds: number;
  /** Where the token is kept. Default `/etc/skyward/tensordock-api-token`. */
  readonly tokenFile?: string;
  /** Where the command is installed. Default {@link SELF_DESTRUCT_COMMAND}. */
  readonly commandPath?: string;
}

/** The self-destruct program: `skyward-self-destruct API_URL TOKEN_FILE (ID | NAME)`. */
const SELF_DESTRUCT_PYTHON = `import json, re, sys, urllib.request
api, token_file, target = sys.argv[1].rstrip("/"), sys.argv[2], sys.argv[3]
with open(token_file) as handle:
    token = handle.read().strip()
def call(method, path):
    request = urllib.request.Request(api + path, method=method, headers={"Authorization": "Bearer " + token, "Accept": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as answer:
        body = answer.read()
    return json.loads(body) if body else {}
def name_of(entry):
    return (entry.get("attributes") or entry).get("name")
if re.fullmatch(r"[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}", target):
    ids = [target]
else:
    found = (call("GET", "/instances").get("data") or {}).get("instances") or []
    ids = [entry["id"] for entry in found if name_of(entry) == target]
for instance_id in ids:
    call("DELETE", "/instances/" + instance_id)
    print("skyward: deleted instance " + instance_id)
`;

/** Renders the boot script; see the module comment. */
export function renderBootScript(options: BootScriptOptions): string {
  return renderSelfDestructScript({
    secret: options.apiToken,
    secretFile: options.tokenFile ?? "/etc/skyward/tensordock-api-token",
    program: SELF_DESTRUCT_PYTHON,
    programArguments: [options.apiUrl],
    commandPath: options.commandPath ?? SELF_DESTRUCT_COMMAND,
    watchdog: { seconds: options.watchdogSeconds, root: options.root, target: options.vmName },
  });
}

/** The `cloud_init` of the create request: one `runcmd` entry piping the script, base64-encoded, to `sh`. */
export function bootCloudInit(script: string): { runcmd: string[] } {
  return { runcmd: [`echo ${Buffer.from(script, "utf8").toString("base64")} | base64 -d | sh`] };
}
