/**
 * Remote process groups. Every remote command first prints its login shell's pid, which is its
 * process group, on stderr; the filter takes that line out, and a kill reaches the whole group
 * through an SSH signal request and `kill` run in a second session.
 */

import { Transform, type TransformCallback } from "node:stream";
import { ConfigurationError, type ConnectionError } from "@skyward/core";
import type { ClientChannel } from "ssh2";

/** How long a kill waits for the process group line, the kill session and the channel to close. */
export const killGraceMs = 5_000;

/** What running commands needs of the connection they run on (see `SshConnection`). */
export interface CommandSession {
  /** `user@host:port`, as named in errors. */
  readonly label: string;
  /** `host:port`, as named in errors. */
  readonly host: string;
  readonly node: number | undefined;
  readonly isOpen: boolean;
  /** Opens a session channel running `command`; one that opens after giving up is killed. */
  openSession(
    command: string,
    what: string,
    signal: AbortSignal | undefined,
    timeoutMs: number | undefined,
  ): Promise<ClientChannel>;
  /** The error of a command that did not finish within `timeoutMs` and was killed. */
  timedOut(what: string, timeoutMs: number): ConnectionError;
  /** The error of a command that ended without an exit status. */
  lostDuring(what: string): ConnectionError;
}

/** The parts of ssh2's channel internals {@link signalChannel} uses. */
interface ChannelInternals {
  readonly outgoing?: { readonly id?: unknown; readonly state?: unknown };
  readonly _client?: { readonly _protocol?: { readonly signal?: unknown } };
}

/**
 * Sends an SSH `signal` request for the remote command. sshd delivers it to the session's process
 * group, but only for sessions of privilege-separated (non-root) users; the process-group kill in
 * {@link signalRemoteCommand} covers the rest. ssh2's `channel.signal()` sends nothing once our side has
 * sent EOF (stdin closed), although SSH allows requests after EOF (RFC 4254 §5.3), so in that state
 * the request goes through ssh2's protocol object.
 */
export function signalChannel(channel: ClientChannel, signal: string): void {
  const internals = channel as unknown as ChannelInternals;
  const protocol = internals._client?._protocol;
  try {
    if (internals.outgoing?.state === "eof" && protocol && typeof protocol.signal === "function") {
      protocol.signal.call(protocol, internals.outgoing.id, signal);
    } else {
      channel.signal(signal);
    }
  } catch {
    // The channel is closing, or the connection is gone: there is nothing left to signal.
  }
}

/** A signal name as `kill -s` and SSH take it (`KILL`, `TERM`), from `KILL`, `SIGKILL` or `sigterm`. */
export function signalName(signal: string): string {
  const name = signal.toUpperCase().replace(/^SIG/, "");
  if (!/^[A-Z][A-Z0-9]*$/.test(name)) {
    throw new ConfigurationError({
      issues: [{ path: "signal", message: `expected a signal name, received ${JSON.stringify(signal)}` }],
    });
  }
  return name;
}

const processGroupPrefix = "skyward-pgid:";
/**
 * Printed on stderr before every remote command: the login shell's pid, which is its process group
 * (sshd starts each session in a new session), so the whole command can be killed from another
 * session even where sshd refuses signal requests (root logins).
 */
const reportProcessGroup = `printf '${processGroupPrefix}%s\\n' "$$" >&2; `;
/** Output held back while looking for the process group line; past this, it is given up. */
const processGroupSearchLimit = 64 * 1024;

const searchedEvent = "skyward:process-group";

/** Passes stderr through, minus the process group line, which it records. */
class ProcessGroupFilter extends Transform {
  /** The remote command's process group, once its line has arrived. */
  processGroup: number | undefined;
  #pending: Buffer = Buffer.alloc(0);
  #searching = true;

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    callback(null, this.#filter(chunk));
  }

  override _flush(callback: TransformCallback): void {
    const rest = this.#pending;
    this.#stopSearching();
    callback(null, rest.length > 0 ? rest : undefined);
  }

  /** What of `chunk` (with what was held back) can be passed on now. */
  #filter(chunk: Buffer): Buffer | undefined {
    if (!this.#searching) return chunk;
    this.#pending = Buffer.concat([this.#pending, chunk]);
    const start = this.#pending.indexOf(processGroupPrefix);
    const end = start === -1 ? -1 : this.#pending.indexOf(10, start);
    if (end !== -1) {
      const value = this.#pending.subarray(start + processGroupPrefix.length, end).toString("latin1");
      if (/^\d+$/.test(value)) this.processGroup = Number(value);
      const rest = Buffer.concat([this.#pending.subarray(0, start), this.#pending.subarray(end + 1)]);
      this.#stopSearching();
      return rest.length > 0 ? rest : undefined;
    }
    if (this.#pending.length > processGroupSearchLimit) {
      const rest = this.#pending;
      this.#stopSearching();
      return rest;
    }
    return undefined;
  }

  /** The process group, waiting up to `timeoutMs` for its line; `undefined` if it does not come. */
  processGroupWithin(timeoutMs: number): Promise<number | undefined> {
    if (!this.#searching) return Promise.resolve(this.processGroup);
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.off(searchedEvent, done);
        this.off("close", done);
        resolve(this.processGroup);
      };
      const timer = setTimeout(done, timeoutMs);
      this.once(searchedEvent, done);
      this.once("close", done);
    });
  }

  #stopSearching(): void {
    this.#searching = false;
    this.#pending = Buffer.alloc(0);
    this.emit(searchedEvent);
  }
}

/** A remote command's session channel and its filtered stderr. */
export interface RemoteCommand {
  readonly channel: ClientChannel;
  readonly stderr: ProcessGroupFilter;
}

/** Opens a session running `command` after the line that reports its process group. */
export async function startRemoteCommand(
  session: CommandSession,
  command: string,
  what: string,
  signal: AbortSignal | undefined,
  timeoutMs: number | undefined,
): Promise<RemoteCommand> {
  const channel = await session.openSession(`${reportProcessGroup}${command}`, what, signal, timeoutMs);
  const stderr = new ProcessGroupFilter();
  channel.stderr.pipe(stderr);
  return { channel, stderr };
}

/**
 * Sends `signal` to a remote command's whole process group: an SSH signal request, and `kill`
 * run in a second session (which also works where sshd refuses signal requests). Never rejects;
 * gives up after a few seconds.
 */
export async function signalRemoteCommand(
  session: CommandSession,
  remote: RemoteCommand,
  signal: string,
): Promise<void> {
  signalChannel(remote.channel, signal);
  // Killed right after starting, the command may not have reported its process group yet.
  const group = await remote.stderr.processGroupWithin(killGraceMs);
  if (group === undefined || !session.isOpen) return;
  let channel: ClientChannel | undefined;
  try {
    channel = await session.openSession(`kill -s ${signal} -- -${group}`, "kill", undefined, killGraceMs);
    const opened = channel;
    opened.stderr.resume();
    opened.resume();
    opened.end();
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, killGraceMs);
      opened.once("close", () => {
        clearTimeout(timer);
        resolve();
      });
    });
  } catch {
    // The connection is gone or the session could not open: nothing more can be done from here.
  } finally {
    channel?.close();
  }
}
