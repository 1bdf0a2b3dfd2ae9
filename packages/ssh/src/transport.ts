/**
 * The SSH transport to pool nodes, on `ssh2`: one connection, through which run remote commands
 * with live output, long-running processes, file upload as one tar stream, and tunnels to the worker
 * on the node's loopback. Its parts: `target.ts` (what to connect to, checked), `connect.ts` (keys,
 * attempts and retries while an instance boots), `known-hosts.ts` (host key checking),
 * `remote-command.ts` and `process-group.ts` (commands and killing them), `tar.ts` (the upload).
 *
 * ```ts
 * import { SshConnection } from "@skyward/ssh";
 *
 * declare const script: string, workerPort: number;
 * declare function progress(text: string): void;
 * const ssh = await SshConnection.connect(
 *   { host: "10.0.0.5", port: 22, user: "ubuntu", identityFile: "~/.ssh/id_ed25519" },
 *   { timeoutSeconds: 300, retryIntervalSeconds: 5, node: 0 },
 * );
 * await ssh.uploadFiles([{ content: script, target: "bootstrap.sh", mode: 0o755 }], ".skyward");
 * const { code } = await ssh.exec("sh .skyward/bootstrap.sh", { onStdout: (text) => progress(text) });
 * const tunnel = await ssh.forwardOut("127.0.0.1", workerPort);
 * ```
 */

import type { Socket } from "node:net";
import type { Duplex } from "node:stream";
import { CancelledError, ConfigurationError, ConnectionError } from "@skyward/core";
import { shellQuote } from "@skyward/core/contract";
import type { Client, ClientChannel } from "ssh2";
import { connectWithRetries, type OpenedClient } from "./connect.js";
import { type CommandSession, signalChannel } from "./process-group.js";
import {
  describeCommand,
  runRemoteCommand,
  type SshExecOptions,
  type SshExecResult,
  type SshProcess,
  type SshSpawnOptions,
  spawnRemoteProcess,
  withEnvironment,
} from "./remote-command.js";
import { prepareUpload, type SshUploadFile, tarStream } from "./tar.js";
import type { ResolvedConnect, SshConnectOptions, SshTarget } from "./target.js";

/** Options of {@link SshConnection.uploadFiles}. */
export interface SshUploadOptions {
  /** Aborts the upload (the remote `tar` is killed). */
  readonly signal?: AbortSignal;
  /** Deadline in seconds. */
  readonly timeoutSeconds?: number;
}

/** Options of {@link SshConnection.forwardOut}. */
export interface SshForwardOptions {
  /** Aborts opening the tunnel. */
  readonly signal?: AbortSignal;
  /** Deadline for opening the tunnel, in seconds. Default 30. */
  readonly timeoutSeconds?: number;
}

const closeTimeoutMs = 5_000;

/** A remote path for the shell: quoted, with a leading `~/` kept meaning the home directory. */
function quoteRemotePath(path: string): string {
  if (path === "~") return '"$HOME"';
  if (path.startsWith("~/")) return `"$HOME"/${shellQuote(path.slice(2))}`;
  return shellQuote(path);
}

/** An open SSH connection to one host. Create it with {@link SshConnection.connect}. */
export class SshConnection {
  /** The target connected to. */
  readonly target: SshTarget;
  /** `host:port`, as named in errors. */
  readonly host: string;
  /** The node index given to `connect`, if any. */
  readonly node: number | undefined;

  readonly #client: Client;
  readonly #socket: Socket;
  readonly #options: SshConnectOptions;
  readonly #label: string;
  readonly #lostListeners = new Set<(error: ConnectionError) => void>();
  readonly #sessions: CommandSession;
  readonly #closed: Promise<void>;
  #closing = false;
  #isClosed = false;
  #lastError: Error | undefined;
  #lost: ConnectionError | undefined;

  private constructor(opened: OpenedClient, resolved: ResolvedConnect) {
    this.target = resolved.target;
    this.#options = resolved.options;
    this.host = resolved.hostPort;
    this.node = resolved.options.node;
    this.#label = resolved.label;
    this.#client = opened.client;
    this.#socket = opened.socket;
    const connection = this;
    this.#sessions = {
      label: this.#label,
      host: this.host,
      node: this.node,
      get isOpen() {
        return connection.isOpen;
      },
      openSession: (command, what, signal, timeoutMs) => this.#openSession(command, what, signal, timeoutMs),
      timedOut: (what, timeoutMs) => this.#timedOut(what, timeoutMs),
      lostDuring: (what) => this.#lostDuring(what),
    };
    this.#client.on("error", (error: Error) => {
      this.#lastError = error;
    });
    this.#closed = new Promise((resolve) => {
      this.#client.once("close", () => {
        this.#isClosed = true;
        resolve();
        if (!this.#closing) this.#onLost();
      });
    });
  }

  /**
   * Connects, retrying refused, unreachable and timed-out attempts every `retryIntervalSeconds`
   * until `timeoutSeconds` have passed (instances take a while to boot). Authentication failures
   * and host key mismatches are not retried.
   *
   * @throws {ConfigurationError} for bad target or options, or an unusable private key.
   * @throws {ConnectionError} when no connection could be made, saying why.
   * @throws {CancelledError} when `options.signal` aborts.
   */
  static async connect(target: SshTarget, options: SshConnectOptions): Promise<SshConnection> {
    const { opened, resolved } = await connectWithRetries(target, options);
    return new SshConnection(opened, resolved);
  }

  /** True until the connection is closed or lost. */
  get isOpen(): boolean {
    return !this.#isClosed && !this.#closing;
  }

  /**
   * Calls `listener` once if the connection drops without `close()` (server gone, network down,
   * keepalives unanswered); at once if it already has. Returns a function that removes the listener.
   */
  onLost(listener: (error: ConnectionError) => void): () => void {
    if (this.#lost !== undefined) {
      const lost = this.#lost;
      queueMicrotask(() => listener(lost));
      return () => {};
    }
    this.#lostListeners.add(listener);
    return () => this.#lostListeners.delete(listener);
  }

  /** Closes this connection (if still open) and connects again with the same target and options. */
  async reconnect(
    options: Partial<Pick<SshConnectOptions, "signal" | "timeoutSeconds">> = {},
  ): Promise<SshConnection> {
    await this.close();
    return SshConnection.connect(this.target, { ...this.#options, ...options });
  }

  /**
   * Runs `command` through the remote user's shell and waits for it to end. Output arrives live
   * through `onStdout`/`onStderr`; a non-zero exit code is returned, not thrown.
   *
   * @throws {CancelledError} when `signal` aborts (the remote command is killed).
   * @throws {ConnectionError} on timeout (the remote command is killed) or when the connection is lost.
   */
  async exec(command: string, options: SshExecOptions = {}): Promise<SshExecResult> {
    const prepared = withEnvironment(command, options.env);
    return runRemoteCommand(this.#sessions, prepared.command, describeCommand(command), {
      ...options,
      prelude: prepared.input,
    });
  }

  /**
   * Starts a long-running `command` (a worker) and returns its streams at once.
   *
   * @throws {ConnectionError} when the session cannot be opened.
   */
  spawn(command: string, options: SshSpawnOptions = {}): Promise<SshProcess> {
    return spawnRemoteProcess(this.#sessions, command, options);
  }

  /**
   * Uploads `files` into `remoteDir` (created if missing; relative to the login directory unless
   * absolute; a leading `~/` is the home directory) as ONE tar stream extracted by the remote `tar`.
   *
   * @throws {ConfigurationError} for a bad target path or mode, or a source that cannot be read.
   * @throws {ConnectionError} when the remote `tar` fails, or on timeout or a lost connection.
   * @throws {CancelledError} when `signal` aborts.
   */
  async uploadFiles(
    files: readonly SshUploadFile[],
    remoteDir: string,
    options: SshUploadOptions = {},
  ): Promise<void> {
    if (remoteDir === "" || remoteDir.includes("\0")) {
      throw new ConfigurationError({ issues: [{ path: "remoteDir", message: "expected a directory path" }] });
    }
    const prepared = await prepareUpload(files);
    const directory = quoteRemotePath(remoteDir);
    const result = await runRemoteCommand(
      this.#sessions,
      `mkdir -p ${directory} && tar -x -m -C ${directory} -f -`,
      `uploading ${prepared.length} file${prepared.length === 1 ? "" : "s"} to ${remoteDir}`,
      { signal: options.signal, timeoutSeconds: options.timeoutSeconds, stdin: tarStream(prepared) },
    );
    if (result.code !== 0) {
      throw new ConnectionError({
        host: this.host,
        node: this.node,
        message:
          `uploading ${prepared.length} file${prepared.length === 1 ? "" : "s"} to ${remoteDir} on ${this.#label} failed: ` +
          `${result.code === null ? `killed by ${result.signal ?? "a signal"}` : `exit code ${result.code}`}` +
          `${result.stderr.trim() ? `: ${result.stderr.trim().slice(-2000)}` : ""}`,
      });
    }
  }

  /**
   * Runs `command` with `files` on its standard input as ONE tar stream (the stream
   * {@link uploadFiles} sends), for a command that extracts it (`tar -x -m -C DIR -f -`) and goes
   * on: an upload and what follows it in one session. Each session is a round trip and starts the
   * remote user's shell (which can take a while: a `.bashrc` that runs `pyenv` or `conda` init), so
   * one session where `uploadFiles` then `exec` take two saves both. The command must read its input
   * to the end, also on the paths that do not extract it (`cat >/dev/null`). Output, exit code,
   * timeout and abort are as for {@link exec}.
   *
   * @throws {ConfigurationError} for a bad target path or mode, or a source that cannot be read
   *   (before anything runs), or when `stdin` or `env` is given (the input is the tar stream).
   * @throws {CancelledError} when `signal` aborts (the remote command is killed).
   * @throws {ConnectionError} on timeout (the remote command is killed) or when the connection is lost.
   */
  async execWithFiles(
    command: string,
    files: readonly SshUploadFile[],
    options: Omit<SshExecOptions, "stdin" | "env"> = {},
  ): Promise<SshExecResult> {
    const given = options as SshExecOptions;
    const issues = (["stdin", "env"] as const)
      .filter((field) => given[field] !== undefined)
      .map((field) => ({ path: field, message: "not accepted here: the command's input is the tar stream" }));
    if (issues.length > 0) throw new ConfigurationError({ issues });
    const prepared = await prepareUpload(files);
    return runRemoteCommand(this.#sessions, command, describeCommand(command), {
      ...options,
      stdin: tarStream(prepared),
    });
  }

  /**
   * Opens a tunnel to `remoteHost:remotePort` as seen from the remote host (ssh2's `forwardOut`,
   * a `direct-tcpip` channel): the returned stream carries bytes to and from that address. The
   * worker listens on the node's loopback, so this is how the client reaches it.
   *
   * @throws {ConnectionError} when the remote side refuses (nothing listening, forwarding disabled).
   */
  forwardOut(remoteHost: string, remotePort: number, options: SshForwardOptions = {}): Promise<Duplex> {
    const target = `${remoteHost}:${remotePort}`;
    const timeoutMs = (options.timeoutSeconds ?? 30) * 1000;
    return new Promise<Duplex>((resolve, reject) => {
      let settled = false;
      const finish = () => {
        settled = true;
        clearTimeout(timer);
        options.signal?.removeEventListener("abort", onAbort);
      };
      const onAbort = () => {
        if (settled) return;
        finish();
        reject(
          new CancelledError({
            message: `opening a tunnel to ${target} via ${this.#label} was aborted`,
            cause: options.signal?.reason,
          }),
        );
      };
      const timer = setTimeout(() => {
        if (settled) return;
        finish();
        reject(
          new ConnectionError({
            host: this.host,
            node: this.node,
            message: `opening a tunnel to ${target} via ${this.#label} did not finish within ${timeoutMs / 1000} s`,
          }),
        );
      }, timeoutMs);
      if (options.signal?.aborted) return onAbort();
      options.signal?.addEventListener("abort", onAbort, { once: true });
      try {
        this.#ensureOpen(`open a tunnel to ${target}`);
        this.#client.forwardOut("127.0.0.1", 0, remoteHost, remotePort, (error, channel) => {
          if (settled) {
            channel?.close();
            return;
          }
          finish();
          if (error) {
            reject(
              new ConnectionError({
                host: this.host,
                node: this.node,
                message: `cannot open a tunnel to ${target} via ${this.#label}: ${error.message} (is anything listening there, and is TCP forwarding allowed?)`,
                cause: error,
              }),
            );
          } else resolve(channel);
        });
      } catch (error) {
        finish();
        reject(error);
      }
    });
  }

  /** Closes the connection (every session and tunnel with it). Safe to call more than once. */
  async close(): Promise<void> {
    if (this.#isClosed) return;
    this.#closing = true;
    this.#client.end();
    const timer = setTimeout(() => this.#socket.destroy(), closeTimeoutMs);
    await this.#closed;
    clearTimeout(timer);
  }

  /** Same as {@link SshConnection.close}, for `await using`. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  #onLost(): void {
    const cause = this.#lastError;
    this.#lost = new ConnectionError({
      host: this.host,
      node: this.node,
      message: `SSH connection to ${this.#label} was lost: ${cause ? cause.message : "the server closed it"}`,
      cause,
    });
    for (const listener of this.#lostListeners) {
      try {
        listener(this.#lost);
      } catch (error) {
        queueMicrotask(() => {
          throw error;
        });
      }
    }
    this.#lostListeners.clear();
  }

  #ensureOpen(action: string): void {
    if (this.#isClosed || this.#closing) {
      throw new ConnectionError({
        host: this.host,
        node: this.node,
        message: `cannot ${action}: the SSH connection to ${this.#label} is ${this.#lost ? "lost" : "closed"}`,
        cause: this.#lost,
      });
    }
  }

  #lostDuring(what: string): ConnectionError {
    return new ConnectionError({
      host: this.host,
      node: this.node,
      message: `${what} on ${this.#label} ended without an exit status: the SSH connection ${this.#closing ? "was closed" : "was lost"}`,
      cause: this.#lost ?? this.#lastError,
    });
  }

  /** Opens a session channel running `command`; one that opens after giving up is killed. */
  #openSession(
    command: string,
    what: string,
    signal: AbortSignal | undefined,
    timeoutMs: number | undefined,
  ): Promise<ClientChannel> {
    return new Promise<ClientChannel>((resolve, reject) => {
      let settled = false;
      const finish = () => {
        settled = true;
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
      };
      const onAbort = () => {
        if (settled) return;
        finish();
        reject(
          new CancelledError({ message: `${what} on ${this.#label} was aborted`, cause: signal?.reason }),
        );
      };
      const timer =
        timeoutMs === undefined
          ? undefined
          : setTimeout(() => {
              if (settled) return;
              finish();
              reject(this.#timedOut(what, timeoutMs));
            }, timeoutMs);
      if (signal?.aborted) return onAbort();
      signal?.addEventListener("abort", onAbort, { once: true });
      try {
        this.#ensureOpen(`run ${what}`);
        this.#client.exec(command, (error, channel) => {
          if (settled) {
            if (channel) {
              signalChannel(channel, "KILL");
              channel.close();
            }
            return;
          }
          finish();
          if (error) {
            reject(
              new ConnectionError({
                host: this.host,
                node: this.node,
                message: `cannot start ${what} on ${this.#label}: ${error.message}`,
                cause: error,
              }),
            );
          } else resolve(channel);
        });
      } catch (error) {
        finish();
        reject(error);
      }
    });
  }

  #timedOut(what: string, timeoutMs: number): ConnectionError {
    return new ConnectionError({
      host: this.host,
      node: this.node,
      message: `${what} on ${this.#label} did not finish within ${timeoutMs / 1000} s and was killed`,
    });
  }
}
