import { spawn, spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";

/** What a finished command printed and how it ended. */
export interface CommandResult {
  /** The exit code; `null` when a signal ended the process. */
  exitCode: number | null;
  /** Everything written to standard output, decoded as UTF-8. */
  stdout: string;
  /** Everything written to standard error, decoded as UTF-8. */
  stderr: string;
}

/** How a command is run by {@link runCommand}. */
export interface RunCommandOptions {
  /** Aborting kills the command (SIGKILL) and rejects. */
  signal?: AbortSignal;
  /** Deadline in milliseconds; past it the command is killed and the call rejects. Default 15 s. */
  timeoutMs?: number;
}

const DEFAULT_COMMAND_TIMEOUT_MS = 15_000;

function describeCommand(file: string, args: readonly string[]): string {
  return [file, ...args].join(" ");
}

/** Runs a program (no shell) to completion; resolves with its output whatever its exit code. */
export function runCommand(
  file: string,
  args: readonly string[],
  options: RunCommandOptions = {},
): Promise<CommandResult> {
  const timeoutMs = options.timeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS;
  const deadline = AbortSignal.timeout(timeoutMs);
  const signal = options.signal ? AbortSignal.any([options.signal, deadline]) : deadline;
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(abortReason(signal, file, args, timeoutMs));
      return;
    }
    const child = spawn(file, args, { stdio: ["ignore", "pipe", "pipe"] });
    const stdout: Buffer[] = [];
    const stderr: Buffer[] = [];
    child.stdout.on("data", (chunk: Buffer) => stdout.push(chunk));
    child.stderr.on("data", (chunk: Buffer) => stderr.push(chunk));
    const onAbort = (): void => {
      child.kill("SIGKILL");
    };
    signal.addEventListener("abort", onAbort, { once: true });
    child.once("error", (error) => {
      signal.removeEventListener("abort", onAbort);
      reject(new Error(`could not run ${describeCommand(file, args)}: ${error.message}`, { cause: error }));
    });
    child.once("close", (exitCode) => {
      signal.removeEventListener("abort", onAbort);
      if (signal.aborted) {
        reject(abortReason(signal, file, args, timeoutMs));
        return;
      }
      resolve({
        exitCode,
        stdout: Buffer.concat(stdout).toString("utf8"),
        stderr: Buffer.concat(stderr).toString("utf8"),
      });
    });
  });
}

function abortReason(signal: AbortSignal, file: string, args: readonly string[], timeoutMs: number): Error {
  const reason: unknown = signal.reason;
  if (reason instanceof DOMException && reason.name === "TimeoutError") {
    return new Error(`${describeCommand(file, args)} did not finish within ${timeoutMs} ms`, {
      cause: reason,
    });
  }
  return new Error(`${describeCommand(file, args)} was aborted`, { cause: reason });
}

/** Runs a program and rejects unless it exits with code 0; the error carries its standard error. */
export async function runChecked(
  file: string,
  args: readonly string[],
  options: RunCommandOptions = {},
): Promise<CommandResult> {
  const result = await runCommand(file, args, options);
  if (result.exitCode !== 0) {
    const detail = result.stderr.trim() || result.stdout.trim() || "no output";
    throw new Error(`${describeCommand(file, args)} failed (exit ${String(result.exitCode)}): ${detail}`);
  }
  return result;
}

/** Synchronous {@link runCommand} for `process.on("exit")`, where nothing asynchronous runs. */
export function runCommandSync(file: string, args: readonly string[], timeoutMs = 5_000): CommandResult {
  const result = spawnSync(file, args, {
    stdio: ["ignore", "pipe", "pipe"],
    timeout: timeoutMs,
    killSignal: "SIGKILL",
  });
  return {
    exitCode: result.status,
    stdout: result.stdout?.toString("utf8") ?? "",
    stderr: result.stderr?.toString("utf8") ?? "",
  };
}

/**
 * The kernel's start time of a process (field 22 of /proc/PID/stat, in clock ticks since boot), or
 * undefined when there is no such process. Together with the pid it names one process for good:
 * a pid can be reused, a (pid, start time) pair cannot.
 */
export function processStartTime(pid: number): string | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return undefined;
  }
  // The command name (field 2) is parenthesised and may contain spaces: split after its ")".
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  // fields[0] is field 3 (state): a zombie has finished, whatever its pid says.
  if (fields[0] === "Z" || fields[0] === "X") return undefined;
  return fields[19];
}

/** Whether a process is running (a zombie counts as gone). */
export function isProcessRunning(pid: number): boolean {
  return processStartTime(pid) !== undefined;
}

/** The command line of a process, arguments joined by spaces, or undefined when it is gone. */
export function processCommandLine(pid: number): string | undefined {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ").trim();
  } catch {
    return undefined;
  }
}

/** Sends a signal, ignoring a process that is already gone. */
export function signalProcess(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    // Already gone: that is what the caller wanted.
  }
}

/**
 * Ends processes: SIGTERM, then SIGKILL for any still running after `graceMs`; resolves once all
 * are gone or `deadlineMs` has passed. Returns the pids still running at the end.
 */
export async function terminateProcesses(
  pids: readonly number[],
  graceMs = 1_000,
  deadlineMs = 5_000,
): Promise<number[]> {
  for (const pid of pids) signalProcess(pid, "SIGTERM");
  const started = Date.now();
  let killed = false;
  for (;;) {
    const running = pids.filter(isProcessRunning);
    if (running.length === 0) return [];
    const elapsed = Date.now() - started;
    if (elapsed >= deadlineMs) return running;
    if (!killed && elapsed >= graceMs) {
      for (const pid of running) signalProcess(pid, "SIGKILL");
      killed = true;
    }
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}
