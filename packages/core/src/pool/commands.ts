/**
 * Commands and scripts as tasks. `sky.shell("nvidia-smi")` and `sky.script("train.py", args)` are
 * ordinary {@link PendingTask}s calling the runtime's `skyward.commands` functions, so they work
 * with every dispatch shape; their output streams back as task output.
 */
import { CommandFailedError, ConfigurationError, type ConfigurationIssue } from "../errors/errors.js";
import { kwargs, type PendingTask, python } from "./python-function.js";

/** What a command or script that exited with status 0 returns. */
export interface CommandResult {
  /** The exit status: 0 (any other ends the task with a {@link CommandFailedError}). */
  readonly exitCode: number;
  /** The signal that ended it; null when it exited by itself. */
  readonly signal: string | null;
  /** Its standard output: the last 64 KiB (all of it streams as task output while it runs). */
  readonly stdout: string;
  /** Its standard error: the last 64 KiB (all of it streams as task output while it runs). */
  readonly stderr: string;
}

/** Options of {@link shell} and {@link script}. */
export interface CommandOptions {
  /** Variables added to the worker's environment for this command. */
  env?: Readonly<Record<string, string>>;
  /** The directory it runs in, on the worker; default: the worker's working directory (where `includes` land). */
  cwd?: string;
  /** Timeout in seconds; on expiry the command and everything it started are killed. Default: the pool's. */
  timeout?: number;
}

const runShell = python<[command: string], CommandResult>("skyward.commands:run_shell");
const runScript = python<[path: string, args: readonly string[]], CommandResult>(
  "skyward.commands:run_script",
);

function checkString(value: unknown, path: string, issues: ConfigurationIssue[]): void {
  if (typeof value !== "string" || value.trim() === "") {
    issues.push({
      path,
      message: `expected a non-empty string, received ${JSON.stringify(value) ?? String(value)}`,
    });
  } else if (value.includes("\0")) {
    issues.push({ path, message: "must not contain a NUL character" });
  }
}

function checkOptions(options: CommandOptions, issues: ConfigurationIssue[]): Record<string, unknown> {
  const settings: Record<string, unknown> = {};
  if (typeof options !== "object" || options === null) {
    issues.push({ path: "options", message: "expected an object" });
    return settings;
  }
  for (const key of Object.keys(options)) {
    if (key !== "env" && key !== "cwd" && key !== "timeout") {
      issues.push({ path: `options.${key}`, message: "unknown option (expected env, cwd or timeout)" });
    }
  }
  if (options.env !== undefined) {
    if (typeof options.env !== "object" || options.env === null || Array.isArray(options.env)) {
      issues.push({ path: "env", message: "expected an object of string values" });
    } else {
      for (const [name, value] of Object.entries(options.env)) {
        if (name === "" || name.includes("=") || name.includes("\0")) {
          issues.push({ path: `env.${name}`, message: "not a valid variable name" });
        }
        if (typeof value !== "string" || value.includes("\0")) {
          issues.push({ path: `env.${name}`, message: "expected a string without NUL characters" });
        }
      }
      settings.env = { ...options.env };
    }
  }
  if (options.cwd !== undefined) {
    checkString(options.cwd, "cwd", issues);
    settings.cwd = options.cwd;
  }
  return settings;
}

function withTimeout(
  pending: PendingTask<CommandResult>,
  options: CommandOptions,
): PendingTask<CommandResult> {
  return options.timeout === undefined ? pending : pending.withTimeout(options.timeout);
}

/**
 * A shell command as a task, run with `sh -c` on the worker. Dispatch it like any task:
 * `await pool.broadcast(sky.shell("nvidia-smi"))` runs it on every node. Its output streams as
 * task output, the result holds its exit status and output tail, and a non-zero exit rejects with a
 * {@link CommandFailedError}. The string is shell code: put untrusted values in `env` and refer to
 * them as `"$NAME"`, or use {@link script}, which takes its arguments as a list.
 */
export function shell(command: string, options: CommandOptions = {}): PendingTask<CommandResult> {
  const issues: ConfigurationIssue[] = [];
  checkString(command, "command", issues);
  const settings = checkOptions(options, issues);
  if (issues.length > 0) throw new ConfigurationError({ issues });
  return withTimeout(runShell(command, kwargs(settings)), options);
}

/**
 * A script as a task: `sky.script("train.py", ["--lr", "0.1"])`. `path` is relative to the worker's
 * working directory, where the image's `includes` land; a `.py` file runs with the worker's Python,
 * any other file is executed directly (it needs its execute bit). Each argument reaches the script
 * as one argv entry, exactly as given — no shell, no quoting. Result and errors as for {@link shell}.
 */
export function script(
  path: string,
  args: readonly string[] = [],
  options: CommandOptions = {},
): PendingTask<CommandResult> {
  const issues: ConfigurationIssue[] = [];
  checkString(path, "path", issues);
  if (!Array.isArray(args)) {
    issues.push({ path: "args", message: "expected an array of strings" });
  } else {
    args.forEach((arg, index) => {
      if (typeof arg !== "string") {
        issues.push({ path: `args[${index}]`, message: `expected a string, received ${typeof arg}` });
      } else if (arg.includes("\0")) {
        issues.push({ path: `args[${index}]`, message: "must not contain a NUL character" });
      }
    });
  }
  const settings = checkOptions(options, issues);
  if (issues.length > 0) throw new ConfigurationError({ issues });
  return withTimeout(runScript(path, [...args], kwargs(settings)), options);
}

const COMMAND_FAILED_TYPE = "skyward.commands.CommandFailedError";
const OUTPUT_MARKER = "\n--- output (tail) ---\n";
const SUMMARY = /(?:exited with code (\d+)|was killed by (\S+) \(exit code (\d+)\))$/;

/**
 * The typed error for a worker's `skyward.commands.CommandFailedError`, read from the message the
 * runtime formats (`… exited with code N` or `… was killed by SIGNAME (exit code N)`, then the
 * output tail); undefined for any other error.
 */
export function commandFailedError(failure: {
  taskId: string;
  node: number;
  type: string;
  message: string;
  traceback: string;
}): CommandFailedError | undefined {
  if (failure.type !== COMMAND_FAILED_TYPE) return undefined;
  const cut = failure.message.indexOf(OUTPUT_MARKER);
  const summary = cut === -1 ? failure.message : failure.message.slice(0, cut);
  const match = SUMMARY.exec(summary);
  if (!match) return undefined;
  return new CommandFailedError({
    taskId: failure.taskId,
    node: failure.node,
    exitCode: Number(match[1] ?? match[3]),
    signal: match[2] ?? null,
    outputTail: cut === -1 ? "" : failure.message.slice(cut + OUTPUT_MARKER.length),
    summary,
    remoteTraceback: failure.traceback,
  });
}
