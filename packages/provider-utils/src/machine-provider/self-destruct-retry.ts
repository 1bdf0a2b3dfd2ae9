/**
 * The one rule every self-destruct follows, whatever carries it (a container's start command, Vast.ai's
 * `onstart`, a VM's boot script): the delete is tried again every 15 s (`$SKYWARD_RETRY_SECONDS`, which
 * tests set to 0) for five minutes while the API refuses (a 429, a 5xx) or cannot be reached — the boot
 * watchdog runs it once, so one refusal must not leave the machine billing — and ends as soon as the API
 * says the machine is deleted or already gone (404: the pool's teardown or the worker's TTL went first).
 *
 * The key reaches a request as header lines on its standard input (`-H @-` for curl), from a root-only
 * file or from a variable through the shell's `printf` builtin: never on a command line a process list
 * shows, never on the output.
 */

/** How often and how long a self-destruct tries: 20 tries 15 s apart, five minutes. */
export const SELF_DESTRUCT_RETRY = { attempts: 20, seconds: 15 } as const;

/** Where a request's header lines come from: a file (a shell word), or a variable and what precedes it. */
export type SelfDestructHeader =
  | { readonly file: string }
  | { readonly variable: string; readonly prefix: string };

/** One request of a self-destruct, its parts shell words expanded on the machine (`"$api/pods/$id"`). */
export interface SelfDestructRequest {
  readonly method: string;
  readonly url: string;
  readonly header: SelfDestructHeader;
  /** A JSON body, as a shell word (`'{"id":"'"$id"'"}'`). */
  readonly body?: string;
}

/**
 * `attempt` (shell statements) run until it succeeds, by {@link SELF_DESTRUCT_RETRY}, as one line that
 * a `bash -c '…'`, a script or an `if` can hold: its status is 0 once an attempt succeeded, else 1.
 */
export function retriedShell(attempt: string): string {
  const { attempts, seconds } = SELF_DESTRUCT_RETRY;
  const numbers = Array.from({ length: attempts }, (_, index) => index + 1).join(" ");
  return (
    `deleted=1; for attempt in ${numbers}; do if { ${attempt}; }; then deleted=0; break; fi; ` +
    `[ "$attempt" = ${attempts} ] || sleep "\${SKYWARD_RETRY_SECONDS:-${seconds}}"; done; [ "$deleted" = 0 ]`
  );
}

/** `statement` fed the header lines on standard input, through the shell alone (no process sees the key as an argument). */
function withHeader(header: SelfDestructHeader, statement: string): string {
  if ("file" in header) return `${statement} < ${header.file}`;
  if (header.prefix.includes("'"))
    throw new Error("a self-destruct header's prefix cannot hold a single quote");
  // `printf` is a builtin of sh, dash, bash and busybox: no process has the key among its arguments.
  return `printf '%s%s\\n' '${header.prefix}' "$${header.variable}" | ${statement}`;
}

/** One request by curl, succeeding when the API answers 2xx or 404 (gone); any other answer, or none, fails. */
export function curlDeleteRequest(request: SelfDestructRequest): string {
  const body = request.body ? ` -H 'Content-Type: application/json' -d ${request.body}` : "";
  const curl = `curl -sS -o /dev/null -w "%{http_code}" -X ${request.method} -H @-${body} ${request.url}`;
  return `case "$(${withHeader(request.header, curl)})" in 2??|404) true ;; *) false ;; esac`;
}

/**
 * The same request by Python 3 (an image without curl), as one line: a self-destruct travels in a worker's
 * arguments and one-line start commands. An opener whose error processor keeps every answer gives the
 * status without a `try`. The program is one single-quoted shell word, so it holds no single quote; what
 * it is given (method, URL, body) are its arguments, none of them secret.
 */
const PYTHON_REQUEST = [
  "import sys, urllib.request as u",
  'h = dict(line.split(": ", 1) for line in sys.stdin.read().splitlines() if ": " in line)',
  "d = sys.argv[3].encode() if len(sys.argv) > 3 else None",
  'h.update({"Content-Type": "application/json"} if d else {})',
  "keep = lambda self, request, response: response",
  'o = u.build_opener(type("Keep", (u.HTTPErrorProcessor,), {"http_response": keep, "https_response": keep}))',
  "s = o.open(u.Request(sys.argv[2], data=d, method=sys.argv[1], headers=h), timeout=60).status",
  "sys.exit(not (200 <= s < 300 or s == 404))",
].join("; ");

/** {@link curlDeleteRequest} by Python 3: succeeds on 2xx or 404. */
export function pythonDeleteRequest(request: SelfDestructRequest): string {
  const body = request.body ? ` ${request.body}` : "";
  return withHeader(request.header, `python3 -c '${PYTHON_REQUEST}' ${request.method} ${request.url}${body}`);
}

/** The request by curl where the machine has it, else by Python 3. */
export function deleteRequest(request: SelfDestructRequest): string {
  return `if command -v curl >/dev/null 2>&1; then ${curlDeleteRequest(request)}; else ${pythonDeleteRequest(request)}; fi`;
}

/**
 * The retry rule in Python, around `call` (a statement of the program, raising while the API refuses),
 * for the programs a VM's boot script installs. The program imports `os`, `sys` and `time`.
 */
export function retriedPython(call: string): string {
  const { attempts, seconds } = SELF_DESTRUCT_RETRY;
  return `for attempt in range(${attempts}):
    try:
        ${call}
        break
    except Exception as error:
        print("skyward: self-destruct failed (" + str(attempt + 1) + " of ${attempts}): " + str(error), file=sys.stderr)
        if attempt < ${attempts - 1}:
            time.sleep(float(os.environ.get("SKYWARD_RETRY_SECONDS", "${seconds}")))
else:
    sys.exit(1)
`;
}
