/**
 * One template for how a rented machine starts when its API lets it run one command (a container's
 * start command, PID 1, no cloud-init): keep the secret the self-destruct needs in a root-only file and
 * drop it from the environment, prepare what the provider needs (authorise a key, start sshd), install
 * the self-destruct command, arm the boot watchdog, then hand over to what the image runs. Providers
 * give the variables; the order and the safeguards are written here once. A VM with cloud-init uses
 * `renderSelfDestructScript` with `pythonSelfDestructProgram`: cloud-init can write files with heredocs.
 *
 * A start command is one `bash -c '…'` line: what it needs per machine comes in the machine's
 * environment (a program as base64, the watchdog's seconds), so the command is the same for every
 * machine and stays short (Novita takes 2,047 characters).
 */
import { processRunsTest } from "@skyward/ssh";
import { SELF_DESTRUCT_COMMAND } from "./api-self-destruct.js";
import { curlDeleteRequest, retriedShell } from "./self-destruct-retry.js";

/** What a machine's start command does, in this order; see the module comment. */
export interface ContainerBoot {
  /** A secret in the environment, written to `file` (0600) with `printf format` and then unset: never on a command line. */
  readonly secret?: { readonly variable: string; readonly file: string; readonly format: string };
  /** Shell statements run next (authorise a key, install and start sshd), each ending in `;`. */
  readonly prepare: readonly string[];
  /** The environment variable holding the self-destruct program (base64), installed as `commandPath`; default {@link CONTAINER_BOOT_VARIABLES}'. */
  readonly programVariable?: string;
  /** Where the self-destruct command goes; default {@link SELF_DESTRUCT_COMMAND}. */
  readonly commandPath?: string;
  /**
   * The boot watchdog, counted from the container's start: no Skyward worker started since (`worker.pid`
   * or `worker.log` under `root`, those of an earlier start cleared) within `$secondsVariable` seconds, and the self-destruct runs with
   * `$targetVariable` (the machine's name: a container does not know its id). 0 seconds: none. The
   * variables default to {@link CONTAINER_BOOT_VARIABLES}', which {@link containerBootEnvironment} sets.
   */
  readonly watchdog: {
    readonly secondsVariable?: string;
    readonly root: string;
    readonly targetVariable?: string;
  };
  /** What the container runs last, as PID 1 (`sleep infinity`, the image's `/start.sh`). */
  readonly handOver: string;
}

/**
 * Start statements for an image that may lack sshd: authorise the public key in `$variable` for root,
 * install OpenSSH and curl with apt-get when missing, start sshd.
 */
export function rootSshdStatements(variable: string): readonly string[] {
  return [
    `mkdir -p /root/.ssh && chmod 700 /root/.ssh; printf "%s\\n" "$${variable}" >> /root/.ssh/authorized_keys && chmod 600 /root/.ssh/authorized_keys;`,
    "if ! command -v curl >/dev/null || { ! command -v sshd >/dev/null && [ ! -x /usr/sbin/sshd ]; }; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssh-server curl ca-certificates; fi;",
    "mkdir -p /run/sshd && ssh-keygen -A && /usr/sbin/sshd;",
  ];
}

/**
 * Shell statements for a container's start, before its watchdog is armed: what a worker left under
 * `root` before this start — a container restarted with its disk kept (a pod volume, Vast.ai's and
 * Novita's disks) — is of a worker that died with the old container, and would count as a worker
 * started since (the watchdog then never ends an idle machine that bills). `worker.pid` and
 * `worker.json` go (their pid may be another process's now); `worker.log` is kept as `worker.log.old`.
 * `root` is a shell word, double-quoted here (`$VAR` in it expands).
 */
export function earlierWorkerMarkersCleared(root: string): string {
  return `rm -f "${root}/worker.pid" "${root}/worker.json"; if [ -e "${root}/worker.log" ]; then mv -f "${root}/worker.log" "${root}/worker.log.old"; fi;`;
}

/** The variables a container's start command reads by default: the self-destruct program, the watchdog's seconds, the machine's name. */
export const CONTAINER_BOOT_VARIABLES = Object.freeze({
  program: "SKYWARD_SELF_DESTRUCT",
  seconds: "SKYWARD_WATCHDOG_SECONDS",
  target: "SKYWARD_INSTANCE_NAME",
});

/** The environment of one machine whose start command reads {@link CONTAINER_BOOT_VARIABLES}: its name, the watchdog's seconds, the program (base64). */
export function containerBootEnvironment(boot: {
  readonly program: string;
  readonly seconds: number;
  readonly target: string;
}): Record<string, string> {
  return {
    [CONTAINER_BOOT_VARIABLES.target]: boot.target,
    [CONTAINER_BOOT_VARIABLES.seconds]: String(boot.seconds),
    [CONTAINER_BOOT_VARIABLES.program]: Buffer.from(boot.program).toString("base64"),
  };
}

/** The start command `bash -c '…'` of {@link ContainerBoot}; a single quote in a part is refused (it would end the command). */
export function containerStartCommand(boot: ContainerBoot): string {
  const command = boot.commandPath ?? SELF_DESTRUCT_COMMAND;
  const { secret } = boot;
  const watchdog = {
    root: boot.watchdog.root,
    secondsVariable: boot.watchdog.secondsVariable ?? CONTAINER_BOOT_VARIABLES.seconds,
    targetVariable: boot.watchdog.targetVariable ?? CONTAINER_BOOT_VARIABLES.target,
  };
  const programVariable = boot.programVariable ?? CONTAINER_BOOT_VARIABLES.program;
  const directories = ["/etc/skyward", ...(secret ? [secret.file.replace(/\/[^/]+$/, "")] : [])];
  const parts = [
    `umask 077; mkdir -p ${[...new Set(directories)].join(" ")};`,
    secret
      ? ` printf "${secret.format}" "$${secret.variable}" > ${secret.file}; unset ${secret.variable};`
      : "",
    ...boot.prepare.map((statement) => ` ${statement}`),
    ` printf "%s" "$${programVariable}" | base64 -d > ${command} && chmod 700 ${command};`,
    ` ${earlierWorkerMarkersCleared(watchdog.root)}`,
    ` if [ "$${watchdog.secondsVariable}" -gt 0 ] 2>/dev/null; then (sleep "$${watchdog.secondsVariable}";`,
    ` [ -e ${watchdog.root}/worker.pid ] || [ -e ${watchdog.root}/worker.log ] || ${command} "$${watchdog.targetVariable}") >/dev/null 2>&1 & fi;`,
    ` exec ${boot.handOver}`,
  ];
  const inner = parts.join("");
  if (inner.includes("'")) throw new Error("a container start command cannot hold a single quote");
  return `bash -c '${inner}'`;
}

/** What {@link workerWatchdogScript} watches, and what it runs when no worker is there. */
export interface WorkerWatchdog {
  /** Seconds without a worker before `command` runs; 0: no watchdog (an empty script). */
  readonly seconds: number;
  /** Skyward's directory on the machine, as a shell word (`$VAR` in it expands on the machine). */
  readonly root: string;
  /** The shell command ending the machine's billing through the API. */
  readonly command: string;
  /**
   * `once`: looked at `seconds` after boot, a worker started since the container started (`worker.pid`
   * or `worker.log`; those of an earlier start are cleared, {@link earlierWorkerMarkersCleared}) keeps
   * the machine. `every-minute`: looked at each minute, `seconds` in all without a live worker
   * (the process in `worker.pid`) fire it, so a worker that died later ends the machine too.
   */
  readonly check: "once" | "every-minute";
  /** The file its output goes to. */
  readonly log: string;
}

/**
 * The boot watchdog as shell lines run in the background from a machine's start script (a container's
 * start command, Vast.ai's `onstart`): the client died before its worker started — during a 30-minute
 * image pull, say — and the machine deletes itself rather than bill until `skyward down`.
 */
export function workerWatchdogScript(watchdog: WorkerWatchdog): string {
  const seconds = Math.max(0, Math.ceil(watchdog.seconds));
  if (seconds === 0) return "";
  const { root, command } = watchdog;
  const lines =
    watchdog.check === "once"
      ? [
          "(",
          `  sleep ${seconds}`,
          `  if ! [ -e "${root}/worker.pid" ] && ! [ -e "${root}/worker.log" ]; then`,
          `    ${command}`,
          "  fi",
          `) </dev/null >${watchdog.log} 2>&1 &`,
        ]
      : [
          "nohup sh -c '",
          "  idle=0",
          "  while sleep 60; do",
          // A worker that ended but was never reaped (a container whose PID 1 does not reap) is a
          // zombie: it answers kill -0 yet runs nothing, so it does not count as running.
          `    if [ -f ${root}/worker.pid ] && ${processRunsTest(`"$(cat ${root}/worker.pid)"`).replaceAll("'", "'\\''")}; then idle=0; else idle=$((idle + 60)); fi`,
          `    if [ "$idle" -ge ${seconds} ]; then ${command}; idle=0; fi`,
          "  done",
          `' >> ${watchdog.log} 2>&1 &`,
        ];
  return [
    `# Skyward boot watchdog: the machine deletes itself after ${seconds} s without a running Skyward worker.`,
    "# A worker of an earlier start of this container died with it: its markers do not count.",
    earlierWorkerMarkersCleared(root),
    ...lines,
  ].join("\n");
}

/** How {@link curlSelfDestructProgram} finds and deletes a machine with `curl`. */
export interface CurlSelfDestruct {
  /** The API root. */
  readonly apiUrl: string;
  /** The file of request headers (the key) written at start; `$SKYWARD_AUTH_FILE` overrides it (tests). */
  readonly headerFile: string;
  /** A shell `case` pattern every machine name matches and no id (`novita-*`): a name is looked up first. */
  readonly namePattern: string;
  /**
   * The path listing machines as JSON objects whose `"id"` comes right before their `"name"`; `$target`
   * in it is the name looked for (a filter the API takes, so that the first page holds the machine).
   */
  readonly listPath: string;
  /** The delete: method, path and JSON body, `$id` standing for the machine's id. */
  readonly delete: { readonly method: string; readonly path: string; readonly body?: string };
}

/**
 * `skyward-self-destruct (ID | NAME)` as a POSIX shell program with `curl` (an image without Python):
 * deletes the machine by id, or the one of that name, found in the first page of the list, by the retry
 * rule every self-destruct shares ({@link retriedShell}). A name the list does not hold is tried again
 * too: the list is read with `grep`, which cannot tell an empty answer from one it does not understand.
 */
export function curlSelfDestructProgram(api: CurlSelfDestruct): string {
  const quoted = (text: string) => `'${text.replace(/'/g, "")}'`;
  const request = curlDeleteRequest({
    method: api.delete.method,
    url: `"$api${api.delete.path.replaceAll("$id", '"$id"')}"`,
    header: { file: '"$auth"' },
    ...(api.delete.body ? { body: `'${api.delete.body.replaceAll("$id", `'"$id"'`)}'` } : {}),
  });
  return `#!/bin/sh
api=${quoted(api.apiUrl)}
auth="\${SKYWARD_AUTH_FILE:-${api.headerFile}}"
target="$1"
delete_once() {
  id="$target"
  case "$target" in
    ${api.namePattern}) id=$(curl -fsS -H @"$auth" "$api${api.listPath}" | tr -d '\\n' | grep -o '"id": *"[^"]*", *"name": *"'"$target"'"' | sed 's/^"id": *"\\([^"]*\\)".*/\\1/' | head -n 1) ;;
  esac
  [ -n "$id" ] && ${request} && echo "skyward: deleted instance $id"
}
${retriedShell("delete_once")}
`;
}
