/**
 * Remote commands: run one to its end with live output, a kept tail, a deadline and abort (`exec`),
 * or start one and hand back its streams (`spawn`). Environment variables travel over stdin, never
 * on a command line.
 */

import { randomBytes } from "node:crypto";
import type { Readable, Writable } from "node:stream";
import { StringDecoder } from "node:string_decoder";
import { CancelledError, ConfigurationError, ConnectionError } from "@skyward/core";
import { shellQuote } from "@skyward/core/contract";
import type { ClientChannel } from "ssh2";
import {
  type CommandSession,
  killGraceMs,
  signalName,
  signalRemoteCommand,
  startRemoteCommand,
} from "./process-group.js";

/** Options of {@link SshConnection.exec}. */
export interface SshExecOptions {
  /** Aborts the command: the remote process is killed and `exec` rejects with a `CancelledError`. */
  readonly signal?: AbortSignal;
  /** Deadline in seconds: the remote process is killed and `exec` rejects with a `ConnectionError`. */
  readonly timeoutSeconds?: number;
  /** Data for the command's standard input, which is closed afterwards (it is closed at once without it). */
  readonly stdin?: string | Uint8Array;
  /** Receives standard output as it arrives (UTF-8 text, never split inside a character). */
  readonly onStdout?: (chunk: string) => void;
  /** Receives standard error as it arrives. */
  readonly onStderr?: (chunk: string) => void;
  /**
   * Environment variables for the command. They reach it over stdin, never on a command line (so
   * `ps` on the host does not show them: secrets are safe here), whatever sshd's `AcceptEnv` says.
   */
  readonly env?: Readonly<Record<string, string>>;
  /** With a callback, how many bytes of the end of that stream the result keeps. Default 65 536. */
  readonly keepOutputBytes?: number;
}

/** How a remote command ended. */
export interface SshExitStatus {
  /** The exit code; `null` when a signal ended the command. */
  readonly code: number | null;
  /** The signal that ended it (`SIGKILL`), or `null`. */
  readonly signal: string | null;
}

/** A finished remote command: its exit status and output. */
export interface SshExecResult extends SshExitStatus {
  /** Standard output (only its end when `onStdout` was given: see `keepOutputBytes`). */
  readonly stdout: string;
  /** Standard error (only its end when `onStderr` was given). */
  readonly stderr: string;
}

/** Options of {@link SshConnection.spawn}. */
export interface SshSpawnOptions {
  /** Aborts opening the session, and kills the process once started. */
  readonly signal?: AbortSignal;
  /** Environment variables for the command, passed as for {@link SshExecOptions.env}. */
  readonly env?: Readonly<Record<string, string>>;
}

/**
 * A long-running remote process. Read (or `resume()`) both `stdout` and `stderr`: unread output
 * fills the SSH window and the remote process then blocks on writing.
 */
export interface SshProcess {
  /** The process's standard output. */
  readonly stdout: Readable;
  /** The process's standard error. */
  readonly stderr: Readable;
  /** The process's standard input; `end()` it to send EOF. */
  readonly stdin: Writable;
  /**
   * Settles when the process has ended. Rejects with a `ConnectionError` when the connection is
   * lost first (already handled, so leaving it unobserved is safe).
   */
  readonly exited: Promise<SshExitStatus>;
  /**
   * Sends `signal` (default `KILL`; `TERM`, `SIGINT`… also accepted) to the remote process group;
   * closes the session if the process has not ended within 5 s.
   *
   * @throws {ConfigurationError} when `signal` is not a signal name.
   */
  kill(signal?: string): void;
}

const environmentName = /^[A-Za-z_][A-Za-z0-9_]*$/;
const defaultKeepOutputBytes = 64 * 1024;

/** A command preceded by the shell code that reads its environment from stdin, and that input. */
interface EnvironmentPrelude {
  readonly command: string;
  readonly input: Buffer | undefined;
}

/**
 * Prepares `env` for `command`. The values travel over the session's stdin, ahead of the command's
 * own input, never on a command line, where `ps` would show them to every user of the host (tokens
 * are passed this way); the remote shell reads lines up to a random end marker and `eval`s them.
 * sshd's `AcceptEnv` does not matter either.
 */
export function withEnvironment(
  command: string,
  env: Readonly<Record<string, string>> | undefined,
): EnvironmentPrelude {
  const entries = Object.entries(env ?? {});
  if (entries.length === 0) return { command, input: undefined };
  const issues = entries
    .filter(([name]) => !environmentName.test(name))
    .map(([name]) => ({
      path: `env[${JSON.stringify(name)}]`,
      message: "expected a variable name ([A-Za-z_][A-Za-z0-9_]*)",
    }));
  if (issues.length > 0) throw new ConfigurationError({ issues });
  const end = `skyward-env-end-${randomBytes(8).toString("hex")}`;
  const exports = entries.map(([name, value]) => `export ${name}=${shellQuote(value)}\n`).join("");
  // `read` takes one byte at a time from a pipe, so the command's own input is left untouched.
  const reader =
    `__skyward_env=; while IFS= read -r __skyward_line && [ "$__skyward_line" != ${end} ]; ` +
    `do __skyward_env="$__skyward_env$__skyward_line\n"; done; eval "$__skyward_env"; unset __skyward_env __skyward_line; `;
  return { command: `${reader}${command}`, input: Buffer.from(`${exports}${end}\n`, "utf8") };
}

/** How a command is named in errors: its first word only, since the rest may carry secrets. */
export function describeCommand(command: string): string {
  const first = command.trim().split(/\s+/, 1)[0] ?? "";
  return `remote command \`${first.length > 40 ? `${first.slice(0, 40)}…` : first}${command.trim() === first ? "" : " …"}\``;
}

/** Collects one output stream: everything, or its last `limit` bytes while a callback sees it all. */
class OutputCollector {
  readonly #chunks: Buffer[] = [];
  #size = 0;
  readonly #limit: number | undefined;
  readonly #decoder = new StringDecoder("utf8");
  readonly #callback: ((chunk: string) => void) | undefined;

  constructor(callback: ((chunk: string) => void) | undefined, limit: number) {
    this.#callback = callback;
    this.#limit = callback === undefined ? undefined : limit;
  }

  push(chunk: Buffer): void {
    this.#chunks.push(chunk);
    this.#size += chunk.length;
    if (this.#limit !== undefined) {
      while (this.#size > this.#limit && this.#chunks.length > 0) {
        const first = this.#chunks[0]!;
        const excess = this.#size - this.#limit;
        if (first.length <= excess) {
          this.#chunks.shift();
          this.#size -= first.length;
        } else {
          this.#chunks[0] = first.subarray(excess);
          this.#size -= excess;
        }
      }
    }
    if (this.#callback !== undefined) {
      const text = this.#decoder.write(chunk);
      if (text !== "") this.#callback(text);
    }
  }

  finish(): string {
    if (this.#callback !== undefined) {
      const rest = this.#decoder.end();
      if (rest !== "") this.#callback(rest);
    }
    return Buffer.concat(this.#chunks).toString("utf8");
  }
}

export interface RunOptions {
  /** Written to stdin before `stdin` (the environment). */
  readonly prelude?: Buffer;
  readonly signal?: AbortSignal;
  readonly timeoutSeconds?: number;
  readonly stdin?: string | Uint8Array | AsyncIterable<Buffer>;
  readonly onStdout?: (chunk: string) => void;
  readonly onStderr?: (chunk: string) => void;
  readonly keepOutputBytes?: number;
}

export async function runRemoteCommand(
  session: CommandSession,
  command: string,
  what: string,
  options: RunOptions,
): Promise<SshExecResult> {
  const started = performance.now();
  const timeoutMs = options.timeoutSeconds === undefined ? undefined : options.timeoutSeconds * 1000;
  const remote = await startRemoteCommand(session, command, what, options.signal, timeoutMs);
  const { channel } = remote;
  const keep = options.keepOutputBytes ?? defaultKeepOutputBytes;
  const stdout = new OutputCollector(options.onStdout, keep);
  const stderr = new OutputCollector(options.onStderr, keep);
  return new Promise<SshExecResult>((resolve, reject) => {
    let settled = false;
    let status: SshExitStatus | undefined;
    let closed = false;
    let stderrEnded = false;
    const finish = () => {
      settled = true;
      clearTimeout(timer);
      options.signal?.removeEventListener("abort", onAbort);
    };
    const stop = (error: unknown) => {
      if (settled) return;
      finish();
      // Reject once the kill has been delivered (or given up on), so the command is gone by then.
      void signalRemoteCommand(session, remote, "KILL").finally(() => {
        channel.close();
        reject(error);
      });
    };
    const onAbort = () =>
      stop(
        new CancelledError({
          message: `${what} on ${session.label} was aborted`,
          cause: options.signal?.reason,
        }),
      );
    const timer =
      timeoutMs === undefined
        ? undefined
        : setTimeout(
            () => stop(session.timedOut(what, timeoutMs)),
            Math.max(0, timeoutMs - (performance.now() - started)),
          );
    if (options.signal?.aborted) return onAbort();
    options.signal?.addEventListener("abort", onAbort, { once: true });

    const receive = (collector: OutputCollector) => (chunk: Buffer) => {
      if (settled) return;
      try {
        collector.push(chunk);
      } catch (error) {
        stop(error);
      }
    };
    // Settles once the session is closed and all of stderr (which passes the filter) has been read.
    const maybeDone = () => {
      if (settled || !closed || !stderrEnded) return;
      let out: string;
      let err: string;
      try {
        out = stdout.finish();
        err = stderr.finish();
      } catch (error) {
        return stop(error);
      }
      finish();
      if (status === undefined) reject(session.lostDuring(what));
      else resolve({ ...status, stdout: out, stderr: err });
    };
    channel.on("data", receive(stdout));
    remote.stderr.on("data", receive(stderr));
    remote.stderr.once("end", () => {
      stderrEnded = true;
      maybeDone();
    });
    channel.on("exit", (code: number | null, signal?: string) => {
      status = { code: code ?? null, signal: signal ?? null };
    });
    channel.on("error", (error: Error) =>
      stop(
        new ConnectionError({
          host: session.host,
          node: session.node,
          message: `${what} on ${session.label} failed: ${error.message}`,
          cause: error,
        }),
      ),
    );
    channel.once("close", () => {
      closed = true;
      maybeDone();
    });

    if (options.prelude !== undefined) channel.write(options.prelude);
    const input = options.stdin;
    if (input === undefined) channel.end();
    else if (typeof input === "string" || input instanceof Uint8Array) channel.end(input);
    else {
      pumpInto(input, channel, () => settled).then(
        () => channel.end(),
        (error: unknown) => stop(error),
      );
    }
  });
}

/** Starts a long-running `command` (a worker) and returns its streams at once. */
export async function spawnRemoteProcess(
  session: CommandSession,
  command: string,
  options: SshSpawnOptions,
): Promise<SshProcess> {
  const what = describeCommand(command);
  const prepared = withEnvironment(command, options.env);
  const remote = await startRemoteCommand(session, prepared.command, what, options.signal, undefined);
  const { channel } = remote;
  if (prepared.input !== undefined) channel.write(prepared.input);
  let status: SshExitStatus | undefined;
  let killedByUs = false;
  let killTimer: ReturnType<typeof setTimeout> | undefined;
  const kill = (signal = "KILL") => {
    const name = signalName(signal);
    if (channel.destroyed || killedByUs) return;
    killedByUs = true;
    void signalRemoteCommand(session, remote, name);
    killTimer = setTimeout(() => channel.close(), killGraceMs);
    killTimer.unref();
  };
  const onAbort = () => kill();
  options.signal?.addEventListener("abort", onAbort, { once: true });
  channel.on("exit", (code: number | null, signal?: string) => {
    status = { code: code ?? null, signal: signal ?? null };
  });
  const exited = new Promise<SshExitStatus>((resolve, reject) => {
    channel.once("close", () => {
      clearTimeout(killTimer);
      options.signal?.removeEventListener("abort", onAbort);
      if (status !== undefined) resolve(status);
      else if (killedByUs) resolve({ code: null, signal: null });
      else reject(session.lostDuring(what));
    });
  });
  exited.catch(() => {});
  return { stdout: channel, stderr: remote.stderr, stdin: channel, exited, kill };
}

/** Writes `input` into `channel`, waiting for `drain` whenever the SSH window is full. */
async function pumpInto(
  input: AsyncIterable<Buffer>,
  channel: ClientChannel,
  isSettled: () => boolean,
): Promise<void> {
  for await (const chunk of input) {
    if (isSettled()) return;
    if (!channel.write(chunk)) {
      await new Promise<void>((resolve) => {
        const done = () => {
          channel.off("drain", done);
          channel.off("close", done);
          resolve();
        };
        channel.on("drain", done);
        channel.on("close", done);
      });
    }
  }
}
