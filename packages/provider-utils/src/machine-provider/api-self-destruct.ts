/**
 * The boot script of a VM whose API deletes a machine with `DELETE <path>/<id>` and finds one by name
 * in a list (TensorDock, Hyperstack): {@link renderSelfDestructScript} with one Python 3 program for
 * all of them, told by a small JSON description how the API is called. The script saves the API key
 * to a root-only file and installs `skyward-self-destruct (ID | NAME)`, which deletes the VM by id, or
 * by its own name (the boot watchdog's: a VM does not know its id). The key travels in that file and a
 * request header, never on a command line. Deleting — not shutting down — is what ends the bill: a
 * stopped VM still pays for its disk. The boot watchdog runs it when no worker started within N
 * seconds of boot (the client died before bootstrapping the VM); once a worker has started, the
 * worker's own TTL decides.
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
}

/**
 * `skyward-self-destruct API_URL API_JSON KEY_FILE (ID | NAME)`, by the retry rule every self-destruct
 * shares ({@link retriedPython}): the boot watchdog runs it once. A machine the API no longer knows (404)
 * counts as deleted; a list answer without the array where `listItems` leads is an error, never "nothing
 * to delete".
 */
const PROGRAM = `import json, os, re, sys, time, urllib.error, urllib.parse, urllib.request
api, spec, key_file, target = sys.argv[1].rstrip("/"), json.loads(sys.argv[2]), sys.argv[3], sys.argv[4]
with open(key_file) as handle:
    key = handle.read().strip()
def call(method, path):
    headers = {spec["header"]: spec.get("headerPrefix", "") + key, "Accept": "application/json"}
    request = urllib.request.Request(api + path, method=method, headers=headers)
    with urllib.request.urlopen(request, timeout=60) as answer:
        body = answer.read()
    return json.loads(body) if body else {}
def delete():
    if re.fullmatch(spec["idPattern"], target):
        ids = [target]
    else:
        found = call("GET", spec["listPath"].replace("{name}", urllib.parse.quote(target)))
        for field in spec["listItems"]:
            found = found.get(field) if isinstance(found, dict) else None
        if not isinstance(found, list):
            raise ValueError("the list answer holds no " + ".".join(spec["listItems"]) + " list")
        ids = [str(entry["id"]) for entry in found if (entry.get("attributes") or entry).get("name") == target]
    for machine_id in ids:
        try:
            call("DELETE", spec["deletePath"].replace("{id}", machine_id))
        except urllib.error.HTTPError as error:
            if error.code != 404:
                raise
        print("skyward: deleted " + machine_id)
${retriedPython("delete()")}`;

/** Renders a VM's boot script for the API `api`; see the module comment. */
export function renderApiBootScript(api: SelfDestructApi, options: ApiBootScriptOptions): string {
  return renderSelfDestructScript({
    secret: options.apiKey,
    secretFile: options.keyFile ?? "/etc/skyward/api-key",
    program: PROGRAM,
    programArguments: [options.apiUrl, JSON.stringify(api)],
    commandPath: options.commandPath ?? SELF_DESTRUCT_COMMAND,
    watchdog: { seconds: options.watchdogSeconds, root: options.root, target: options.vmName },
  });
}
