/**
 * A VM's self-destruct, for a VM whose boot script (cloud-init) can write files: one Python 3 program,
 * told by a small JSON description how its provider's API is called (a key in a header or an OAuth
 * token, the list to find a machine in, the delete), installed by {@link renderSelfDestructScript} as
 * `skyward-self-destruct (ID | NAME | --self)`: it deletes the VM by id, or by its name (the boot
 * watchdog's: a VM does not know its id), or this VM by its host name. The secret travels in a root-only
 * file and a request header, never on a command line. Deleting — not shutting down — is what ends the
 * bill: a stopped VM still pays for its disk. {@link renderApiBootScript} is the boot script of a VM
 * whose API deletes a machine with `DELETE <path>/<id>` (TensorDock, Hyperstack); Verda's describes its
 * own delete. The boot watchdog runs it when no worker started within N seconds of boot (the client
 * died before bootstrapping the VM); once a worker has started, the worker's own TTL decides.
 */
import { renderSelfDestructScript } from "../self-destruct-script.js";
import { retriedPython } from "./self-destruct-retry.js";

/** Where the self-destruct command is installed on a VM. */
export const SELF_DESTRUCT_COMMAND = "/usr/local/sbin/skyward-self-destruct";

/** How the program calls a provider's API. */
export interface SelfDestructApi {
  /** The request header carrying the key, and what precedes the key in it (`Bearer `). */
  readonly header: string;
  readonly headerPrefix?: string;
  /** A regular expression every machine id matches (and no name). */
  readonly idPattern: string;
  /** The list to find a machine by name in; `{name}` is replaced by the URL-quoted name. */
  readonly listPath: string;
  /** The keys leading from the list's answer to its array (`["data", "instances"]`). */
  readonly listItems: readonly string[];
  /** The delete path; `{id}` is replaced by the id. */
  readonly deletePath: string;
}

/** What one VM's boot script needs. */
export interface ApiBootScriptOptions {
  /** The API root the VM calls. */
  readonly apiUrl: string;
  /** The API key the VM deletes itself with. A secret: written to a 0600 file, never to a command line. */
  readonly apiKey: string;
  /** The VM's name (unique within its cluster), for the watchdog to find its own id. */
  readonly vmName: string;
  /** Skyward's directory on the VM; a started worker leaves `worker.pid` / `worker.log` there. */
  readonly root: string;
  /** Seconds after boot by which a worker must have started; 0: no watchdog. */
  readonly watchdogSeconds: number;
  /** Where the key is kept; default `/etc/skyward/api-key`. */
  readonly keyFile?: string;
  /** Where the command is installed; default {@link SELF_DESTRUCT_COMMAND}. */
  readonly commandPath?: string;
  /** Where the watchdog is put to run at every later boot; default cloud-init's per-boot scripts. */
  readonly perBootDirectory?: string;
}

/** Renders a VM's boot script for the API `api`; see the module comment. */
export function renderApiBootScript(api: SelfDestructApi, options: ApiBootScriptOptions): string {
  return renderSelfDestructScript({
    secret: options.apiKey,
    secretFile: options.keyFile ?? "/etc/skyward/api-key",
    program: pythonSelfDestructProgram({
      header: api.header,
      headerPrefix: api.headerPrefix ?? "",
      idPattern: api.idPattern,
      listPath: api.listPath,
      listItems: api.listItems,
      nameField: "name",
      delete: { method: "DELETE", path: api.deletePath },
    }),
    programArguments: [options.apiUrl],
    commandPath: options.commandPath ?? SELF_DESTRUCT_COMMAND,
    watchdog: {
      seconds: options.watchdogSeconds,
      root: options.root,
      target: options.vmName,
      ...(options.perBootDirectory !== undefined ? { perBootDirectory: options.perBootDirectory } : {}),
    },
  });
}

/** How {@link pythonSelfDestructProgram} finds and deletes a machine. */
export interface PythonSelfDestruct {
  /**
   * Where an OAuth 2.0 client-credentials token is asked for (`/oauth2/token`), the secret file holding
   * the client id and secret on two lines; without it, the file holds the key itself.
   */
  readonly tokenPath?: string;
  /** The request header carrying the key or token, and what precedes it there; default `Authorization: Bearer …`. */
  readonly header?: string;
  readonly headerPrefix?: string;
  /** A regular expression every machine id matches and no name: such a target is deleted without a list. */
  readonly idPattern?: string;
  /** The path listing machines; `{name}` in it becomes the URL-quoted target (a filter the API takes). */
  readonly listPath: string;
  /** The keys leading from the list's answer to its array (`["data", "instances"]`); none: the answer is the array. An answer without it is an error. */
  readonly listItems?: readonly string[];
  /** The field of a listed machine (or of its `attributes`) holding its name: a target finds the machine of that name, `--self` the one named as this host. */
  readonly nameField: string;
  /** The delete: method, path and JSON body; a string `"{field}"` in it becomes the machine's field (left out when it has none). */
  readonly delete: { readonly method: string; readonly path: string; readonly body?: unknown };
}

/**
 * `skyward-self-destruct API_URL SECRET_FILE (ID | NAME | --self)` as a Python 3 program, for
 * {@link renderSelfDestructScript}, by the retry rule every self-destruct shares ({@link retriedPython}).
 * A machine the list no longer holds, or one the delete answers 404, is gone: nothing to delete; a list
 * answer of a shape it does not know is an error, never "nothing".
 */
export function pythonSelfDestructProgram(api: PythonSelfDestruct): string {
  return `import json, os, re, socket, sys, time, urllib.error, urllib.parse, urllib.request
SPEC = json.loads(r"""${JSON.stringify(api)}""")
api, secret_file, target = sys.argv[1].rstrip("/"), sys.argv[2], sys.argv[3]
with open(secret_file) as handle:
    secret = handle.read().split("\\n")
def call(method, path, body=None, token=None):
    headers = {"Accept": "application/json"}
    if token:
        headers[SPEC.get("header", "Authorization")] = SPEC.get("headerPrefix", "Bearer ") + token
    data = None if body is None else json.dumps(body).encode()
    if data is not None:
        headers["Content-Type"] = "application/json"
    request = urllib.request.Request(api + path, data=data, method=method, headers=headers)
    with urllib.request.urlopen(request, timeout=60) as answer:
        text = answer.read()
    try:
        return json.loads(text) if text else None
    except ValueError:
        return text.decode()
def fill(value, entry):
    if isinstance(value, list):
        return [item for item in (fill(each, entry) for each in value) if item is not None]
    if isinstance(value, dict):
        return {key: fill(each, entry) for key, each in value.items()}
    if not isinstance(value, str):
        return value
    whole = re.fullmatch(r"\\{(\\w+)\\}", value)
    if whole:
        return entry.get(whole.group(1)) or None
    return re.sub(r"\\{(\\w+)\\}", lambda found: str(entry.get(found.group(1), "")), value)
def listed(token):
    if SPEC.get("idPattern") and re.fullmatch(SPEC["idPattern"], target):
        return [{"id": target}]
    found = call("GET", SPEC["listPath"].replace("{name}", urllib.parse.quote(target)), token=token)
    for key in SPEC.get("listItems", []):
        found = found.get(key) if isinstance(found, dict) else None
    if not isinstance(found, list):
        raise ValueError("the list answer is of an unknown shape (no list at ." + ".".join(SPEC.get("listItems", [])) + ")")
    return found
def delete():
    token = secret[0].strip()
    if SPEC.get("tokenPath"):
        grant = {"grant_type": "client_credentials", "client_id": secret[0], "client_secret": secret[1]}
        token = call("POST", SPEC["tokenPath"], grant)["access_token"]
    name = socket.gethostname() if target == "--self" else target
    for entry in listed(token):
        named = entry.get(SPEC["nameField"]) or (entry.get("attributes") or {}).get(SPEC["nameField"])
        if str(entry["id"]) == target or named == name:
            method, path, body = SPEC["delete"]["method"], SPEC["delete"]["path"], SPEC["delete"].get("body")
            try:
                call(method, fill(path, entry), fill(body, entry), token)
            except urllib.error.HTTPError as error:
                if error.code != 404:
                    raise
            print("skyward: deleted instance " + str(entry["id"]))
${retriedPython("delete()")}`;
}
