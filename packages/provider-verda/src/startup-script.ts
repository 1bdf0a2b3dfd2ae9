/**
 * The startup script of every Skyward instance on Verda (registered once per cluster with `POST
 * /scripts`, run as root at first boot): `@skyward/provider-utils`' self-destruct boot script with
 * Verda's program. It saves the client id and secret to a root-only file and installs
 * `skyward-self-destruct`, which gets a token and deletes an instance — by id, or itself, found by its
 * hostname — with its OS volume, past the trash (`PUT /instances`, `delete`, `volume_ids`,
 * `delete_permanently`). Deleting, not shutting down, is what ends the bill: a stopped Verda instance
 * still pays for its volume. The boot watchdog runs it when no worker started in time.
 */
import { renderSelfDestructScript, SELF_DESTRUCT_COMMAND } from "@skyward/provider-utils";

/** What the watchdog passes for "this instance": the program finds it by its hostname. */
const SELF = "--self";

/** `skyward-self-destruct API_URL CREDENTIALS_FILE (ID | --self)`; retried while Verda refuses for now. */
const SELF_DESTRUCT_PYTHON = `import json, socket, sys, time, urllib.request
api, credentials_file, target = sys.argv[1].rstrip("/"), sys.argv[2], sys.argv[3]
with open(credentials_file) as handle:
    client_id, client_secret = handle.read().split("\\n")[:2]
def call(method, path, body=None, token=None):
    headers = {"Accept": "application/json", "Content-Type": "application/json"}
    if token:
        headers["Authorization"] = "Bearer " + token
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(api + path, data=data, method=method, headers=headers)
    with urllib.request.urlopen(request, timeout=60) as answer:
        text = answer.read()
    try:
        return json.loads(text) if text else None
    except ValueError:
        return text.decode()
for attempt in range(20):
    try:
        token = call("POST", "/oauth2/token", {"grant_type": "client_credentials", "client_id": client_id, "client_secret": client_secret})["access_token"]
        name = socket.gethostname() if target == "${SELF}" else None
        found = [entry for entry in call("GET", "/instances", token=token) or [] if entry["id"] == target or (name and entry.get("hostname") == name)]
        for entry in found:
            volumes = [entry["os_volume_id"]] if entry.get("os_volume_id") else []
            call("PUT", "/instances", {"action": "delete", "id": [entry["id"]], "volume_ids": volumes, "delete_permanently": True}, token)
            print("skyward: deleted instance " + entry["id"])
        break
    except Exception as error:
        print("skyward: self-destruct failed, trying again: " + str(error), file=sys.stderr)
        time.sleep(15)
`;

/** Renders the startup script of a cluster; see the module comment. */
export function renderStartupScript(options: {
  readonly apiUrl: string;
  readonly clientId: string;
  readonly clientSecret: string;
  /** Skyward's directory on the instance; a started worker leaves `worker.pid` / `worker.log` there. */
  readonly root: string;
  /** Seconds after boot by which a worker must have started; 0: no watchdog. */
  readonly watchdogSeconds: number;
}): string {
  return renderSelfDestructScript({
    secret: `${options.clientId}\n${options.clientSecret}`,
    secretFile: "/etc/skyward/verda-credentials",
    program: SELF_DESTRUCT_PYTHON,
    programArguments: [options.apiUrl],
    commandPath: SELF_DESTRUCT_COMMAND,
    watchdog: { seconds: options.watchdogSeconds, root: options.root, target: SELF },
  });
}
