/**
 * The SSH transport to pool nodes, on `ssh2`: connecting with retries while an instance boots, host
 * key checking (a pinned fingerprint, or trust on first use recorded in Skyward's `known_hosts`),
 * remote commands with live output, long-running processes, file upload as one tar stream, and
 * tunnels to the worker on the node's loopback.
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

import { createHash, createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { createReadStream } from "node:fs";
import { appendFile, mkdir, readFile, stat } from "node:fs/promises";
import { connect as connectSocket, type Socket } from "node:net";
import { homedir } from "node:os";
import { dirname, join } from "node:path";
import { type Duplex, type Readable, Transform, type TransformCallback, type Writable } from "node:stream";
import { StringDecoder } from "node:string_decoder";
import { CancelledError, ConfigurationError, ConnectionError, SkywardError } from "@skyward/core";
import { parseInput, shellQuote, skywardHome } from "@skyward/core/contract";
import type { Algorithms, Client, ClientChannel, ConnectConfig, ServerHostKeyAlgorithm } from "ssh2";
import { z } from "zod";
import { loadSsh2 } from "./ssh2-module.js";

// Without its native crypto binding: see ssh2-module.ts.
const { Client: SshClient, utils: sshUtils } = loadSsh2();

// ---------------------------------------------------------------------------------------------
// Public types
// ---------------------------------------------------------------------------------------------

/** Where to connect and as whom. */
export interface SshTarget {
  /** Host name or IP address. */
  readonly host: string;
  /** TCP port of sshd. */
  readonly port: number;
  /** Remote user name. */
  readonly user: string;
  /** The private key itself (OpenSSH or PEM). Takes precedence over `identityFile`. */
  readonly privateKey?: string | Uint8Array;
  /** Path to the private key file (`~/` is expanded). */
  readonly identityFile?: string;
  /** Passphrase of an encrypted private key. */
  readonly passphrase?: string;
  /**
   * The expected host key fingerprint as `ssh-keygen -l` prints it (`SHA256:…`). When given, the
   * host key must match it and `known_hosts` is not used; otherwise the key is trusted on first use.
   */
  readonly hostKeyFingerprint?: string;
  /**
   * The name the host key is recorded under in `known_hosts` for trust on first use, instead of the
   * address (like OpenSSH's `HostKeyAlias`). Cloud machines get one per instance (`aws:i-0abc…`): a
   * cloud reuses addresses, so a later machine on the same address has another key and is not
   * refused. Not used with `hostKeyFingerprint`.
   */
  readonly hostKeyAlias?: string;
}

/** Options of {@link SshConnection.connect}. */
export interface SshConnectOptions {
  /** Aborts connecting (not the connection once made: use `close()` for that). */
  readonly signal?: AbortSignal;
  /** Total deadline for connecting, across all retries, in seconds (the pool's `sshTimeout`). */
  readonly timeoutSeconds: number;
  /** Wait between attempts, in seconds (the pool's `sshRetryInterval`). */
  readonly retryIntervalSeconds: number;
  /** The `known_hosts` file for trust on first use. Default `$SKYWARD_HOME/known_hosts` (`~/.skyward/known_hosts`). */
  readonly knownHostsFile?: string;
  /** Interval of SSH keepalive requests, in milliseconds; 0 disables them. Default 15 000. */
  readonly keepaliveIntervalMs?: number;
  /** The node index, for errors. */
  readonly node?: number;
  /** Called after every failed attempt (the last one included) with its 1-based number and the error. */
  readonly onAttempt?: (attempt: number, error: ConnectionError) => void;
}

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

/** One file to upload: from a local path or from memory. */
export type SshUploadFile =
  | {
      /** A local file, streamed (never read whole into memory). */
      readonly source: string;
      /** Path inside the remote directory, `/`-separated and relative. */
      readonly target: string;
      /** Permission bits (`0o755`). Default: the local file's. */
      readonly mode?: number;
    }
  | {
      /** The file's content. */
      readonly content: string | Uint8Array;
      /** Path inside the remote directory, `/`-separated and relative. */
      readonly target: string;
      /** Permission bits. Default `0o644`. */
      readonly mode?: number;
    };

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

// ---------------------------------------------------------------------------------------------
// Validation
// ---------------------------------------------------------------------------------------------

const fingerprintPattern = /^SHA256:[A-Za-z0-9+/]{43}=?$/;
const environmentName = /^[A-Za-z_][A-Za-z0-9_]*$/;

const targetSchema = z.strictObject({
  host: z.string({ error: "expected a host name or address" }).min(1, "expected a host name or address"),
  port: z
    .number({ error: "expected a TCP port number" })
    .int("expected an integer port")
    .min(1, "expected a port from 1 to 65535")
    .max(65535, "expected a port from 1 to 65535"),
  user: z.string({ error: "expected a user name" }).min(1, "expected a user name"),
  privateKey: z
    .union([z.string(), z.custom<Uint8Array>((value) => value instanceof Uint8Array)], {
      error: "expected the private key as a string or bytes",
    })
    .optional(),
  identityFile: z.string({ error: "expected a path" }).min(1, "expected a path").optional(),
  passphrase: z.string({ error: "expected a string" }).optional(),
  hostKeyFingerprint: z
    .string({ error: "expected a fingerprint" })
    .regex(fingerprintPattern, 'expected a fingerprint as ssh-keygen -l prints it ("SHA256:…")')
    .optional(),
  hostKeyAlias: z
    .string({ error: "expected a name" })
    .regex(/^[^\s,#@|[\]]+$/, "expected a name without spaces, commas or any of # @ | [ ]")
    .optional(),
});

const connectOptionsSchema = z.strictObject({
  signal: z
    .custom<AbortSignal>((value) => value instanceof AbortSignal, "expected an AbortSignal")
    .optional(),
  timeoutSeconds: z
    .number({ error: "expected a number of seconds" })
    .positive("expected a positive number of seconds"),
  retryIntervalSeconds: z
    .number({ error: "expected a number of seconds" })
    .positive("expected a positive number of seconds"),
  knownHostsFile: z.string({ error: "expected a path" }).min(1, "expected a path").optional(),
  keepaliveIntervalMs: z
    .number({ error: "expected milliseconds" })
    .int("expected whole milliseconds")
    .min(0, "expected 0 or more milliseconds")
    .optional(),
  node: z.number({ error: "expected a node index" }).int().min(0).optional(),
  onAttempt: z
    .custom<(attempt: number, error: ConnectionError) => void>(
      (value) => typeof value === "function",
      "expected a function",
    )
    .optional(),
});

function expandHome(path: string): string {
  return path === "~" ? homedir() : path.startsWith("~/") ? join(homedir(), path.slice(2)) : path;
}

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
function withEnvironment(
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

/** A remote path for the shell: quoted, with a leading `~/` kept meaning the home directory. */
function quoteRemotePath(path: string): string {
  if (path === "~") return '"$HOME"';
  if (path.startsWith("~/")) return `"$HOME"/${shellQuote(path.slice(2))}`;
  return shellQuote(path);
}

/** How a command is named in errors: its first word only, since the rest may carry secrets. */
function describeCommand(command: string): string {
  const first = command.trim().split(/\s+/, 1)[0] ?? "";
  return `remote command \`${first.length > 40 ? `${first.slice(0, 40)}…` : first}${command.trim() === first ? "" : " …"}\``;
}

// ---------------------------------------------------------------------------------------------
// Host keys
// ---------------------------------------------------------------------------------------------

/** The SHA-256 fingerprint of a host key (its SSH wire encoding), as `ssh-keygen -l` prints it. */
export function sshKeyFingerprint(key: Uint8Array): string {
  return `SHA256:${createHash("sha256").update(key).digest("base64").replace(/=+$/, "")}`;
}

/** The key type (`ssh-ed25519`, `ecdsa-sha2-nistp256`, `ssh-rsa`) named at the start of a key's wire encoding. */
function keyType(key: Buffer): string {
  if (key.length < 4) return "unknown";
  const length = key.readUInt32BE(0);
  return key.subarray(4, 4 + length).toString("latin1");
}

/**
 * The name a host has in `known_hosts`: its alias when it has one, else `host` on port 22 and
 * `[host]:port` otherwise (as OpenSSH writes it).
 */
function knownHostsName(target: Pick<SshTarget, "host" | "port" | "hostKeyAlias">): string {
  if (target.hostKeyAlias !== undefined) return target.hostKeyAlias;
  return target.port === 22 ? target.host : `[${target.host}]:${target.port}`;
}

interface KnownHostEntry {
  readonly line: number;
  readonly type: string;
  readonly key: Buffer;
}

function hostPatternMatches(pattern: string, name: string): boolean {
  if (pattern.startsWith("|1|")) {
    const [salt, hash] = pattern.slice(3).split("|");
    if (!salt || !hash) return false;
    const expected = Buffer.from(hash, "base64");
    const actual = createHmac("sha1", Buffer.from(salt, "base64")).update(name).digest();
    return expected.length === actual.length && timingSafeEqual(expected, actual);
  }
  return pattern === name;
}

/** The entries of a `known_hosts` text for `name` (plain or hashed host names; markers and wildcards are skipped). */
function findKnownHosts(text: string, name: string): KnownHostEntry[] {
  const entries: KnownHostEntry[] = [];
  const lines = text.split("\n");
  for (const [index, raw] of lines.entries()) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#") || line.startsWith("@")) continue;
    const [hosts, type, key] = line.split(/\s+/);
    if (!hosts || !type || !key) continue;
    if (!hosts.split(",").some((pattern) => hostPatternMatches(pattern, name))) continue;
    entries.push({ line: index + 1, type, key: Buffer.from(key, "base64") });
  }
  return entries;
}

/** Host key algorithms that produce keys of a `known_hosts` key type. */
function algorithmsForKeyType(type: string): string[] {
  return type === "ssh-rsa" ? ["rsa-sha2-512", "rsa-sha2-256", "ssh-rsa"] : [type];
}

const supportedHostKeyAlgorithms = new Set<string>([
  "ssh-ed25519",
  "ecdsa-sha2-nistp256",
  "ecdsa-sha2-nistp384",
  "ecdsa-sha2-nistp521",
  "rsa-sha2-512",
  "rsa-sha2-256",
  "ssh-rsa",
]);

// Appends to one known_hosts file are serialised, so that concurrent first connections to the same
// host record it once.
const knownHostsWrites = new Map<string, Promise<unknown>>();

function serialised<T>(file: string, action: () => Promise<T>): Promise<T> {
  const previous = knownHostsWrites.get(file) ?? Promise.resolve();
  const next = previous.then(action, action);
  const settled = next.catch(() => undefined);
  knownHostsWrites.set(file, settled);
  void settled.then(() => {
    if (knownHostsWrites.get(file) === settled) knownHostsWrites.delete(file);
  });
  return next;
}

async function readKnownHosts(file: string): Promise<string> {
  try {
    return await readFile(file, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return "";
    throw error;
  }
}

// ---------------------------------------------------------------------------------------------
// Connecting
// ---------------------------------------------------------------------------------------------

const defaultKeepaliveIntervalMs = 15_000;
/** The longest one attempt waits for TCP and the SSH handshake before the next attempt. */
const attemptTimeoutCapMs = 30_000;
const closeTimeoutMs = 5_000;
const killGraceMs = 5_000;
const defaultKeepOutputBytes = 64 * 1024;

interface ResolvedConnect {
  readonly target: SshTarget;
  readonly options: SshConnectOptions;
  readonly auth: Pick<ConnectConfig, "privateKey" | "passphrase" | "agent">;
  readonly knownHostsFile: string;
  readonly label: string;
  readonly hostPort: string;
}

/** An attempt's failure: `fatal` ones (authentication, host key, bad key) are not retried. */
class AttemptError extends Error {
  readonly fatal: boolean;
  readonly connectionError: ConnectionError;
  constructor(connectionError: ConnectionError, fatal: boolean) {
    super(connectionError.message);
    this.connectionError = connectionError;
    this.fatal = fatal;
  }
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

async function loadPrivateKey(target: SshTarget): Promise<ResolvedConnect["auth"]> {
  const parseOrFail = (key: Buffer, path: string) => {
    const parsed = sshUtils.parseKey(key, target.passphrase);
    if (parsed instanceof Error) {
      throw new ConfigurationError({
        issues: [{ path, message: `cannot use the private key: ${parsed.message}` }],
      });
    }
  };
  if (target.privateKey !== undefined) {
    const key = Buffer.from(target.privateKey);
    parseOrFail(key, "privateKey");
    return { privateKey: key, passphrase: target.passphrase };
  }
  if (target.identityFile !== undefined) {
    const file = expandHome(target.identityFile);
    let key: Buffer;
    try {
      key = await readFile(file);
    } catch (error) {
      throw new ConfigurationError({
        issues: [{ path: "identityFile", message: `cannot read ${file}: ${errorMessage(error)}` }],
        cause: error,
      });
    }
    parseOrFail(key, "identityFile");
    return { privateKey: key, passphrase: target.passphrase };
  }
  // Neither given: what `ssh` itself would use, the agent and the first usable default key.
  const agent = process.env.SSH_AUTH_SOCK || undefined;
  for (const name of ["id_ed25519", "id_ecdsa", "id_rsa"]) {
    const key = await readFile(join(homedir(), ".ssh", name)).catch(() => undefined);
    if (key !== undefined && !(sshUtils.parseKey(key, target.passphrase) instanceof Error)) {
      return { privateKey: key, passphrase: target.passphrase, agent };
    }
  }
  if (agent !== undefined) return { agent };
  throw new ConfigurationError({
    issues: [
      {
        path: "privateKey",
        message: "no SSH key: give privateKey or identityFile, or run an ssh-agent (SSH_AUTH_SOCK)",
      },
    ],
  });
}

function delay(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    if (signal?.aborted) return onAbort();
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** Checks a host key against the pinned fingerprint or `known_hosts`; records it on first use. */
async function checkHostKey(resolved: ResolvedConnect, key: Buffer): Promise<ConnectionError | undefined> {
  const { target, options, hostPort } = resolved;
  const fingerprint = sshKeyFingerprint(key);
  const type = keyType(key);
  if (target.hostKeyFingerprint !== undefined) {
    if (fingerprint === target.hostKeyFingerprint.replace(/=$/, "")) return undefined;
    return new ConnectionError({
      host: hostPort,
      node: options.node,
      message:
        `host key of ${hostPort} is ${type} ${fingerprint}, but ${target.hostKeyFingerprint} was expected; ` +
        "refusing to connect (someone may be intercepting the connection, or the expected fingerprint is stale)",
    });
  }
  const file = resolved.knownHostsFile;
  const name = knownHostsName(target);
  return serialised(file, async () => {
    const known = findKnownHosts(await readKnownHosts(file), name);
    if (known.some((entry) => entry.key.equals(key))) return undefined;
    if (known.length > 0) {
      const lines = known.map((entry) => entry.line).join(", ");
      const previous = known.map((entry) => `${entry.type} ${sshKeyFingerprint(entry.key)}`).join(", ");
      return new ConnectionError({
        host: hostPort,
        node: options.node,
        message:
          `host key for ${hostPort}${target.hostKeyAlias !== undefined ? ` (recorded as ${target.hostKeyAlias})` : ""} changed: ` +
          `it was ${previous}, the server now offers ${type} ${fingerprint}; ` +
          "someone may be intercepting the connection, or the host was reinstalled — refusing to connect. " +
          `Remove the line (line ${lines}) from ${file} if the change is expected.`,
      });
    }
    await mkdir(dirname(file), { recursive: true, mode: 0o700 });
    await appendFile(file, `${name} ${type} ${key.toString("base64")}\n`, { mode: 0o600 });
    return undefined;
  });
}

/** Host key algorithms with those of the already known keys first, so that the same key type is negotiated. */
async function hostKeyAlgorithms(resolved: ResolvedConnect): Promise<Algorithms | undefined> {
  if (resolved.target.hostKeyFingerprint !== undefined) return undefined;
  const text = await readKnownHosts(resolved.knownHostsFile);
  const known = findKnownHosts(text, knownHostsName(resolved.target));
  const preferred = [...new Set(known.flatMap((entry) => algorithmsForKeyType(entry.type)))].filter(
    (algorithm): algorithm is ServerHostKeyAlgorithm => supportedHostKeyAlgorithms.has(algorithm),
  );
  if (preferred.length === 0) return undefined;
  // ssh2 applies these in key order and skips a `prepend` entry already in the list, so they are
  // removed first; `prepend` puts each entry in front in turn, hence the reversal.
  return { serverHostKey: { remove: preferred, prepend: [...preferred].reverse(), append: [] } };
}

interface OpenedClient {
  readonly client: Client;
  readonly socket: Socket;
}

/** One attempt: TCP connect, SSH handshake with host key check, authentication. */
async function attemptConnect(resolved: ResolvedConnect, timeoutMs: number): Promise<OpenedClient> {
  const { target, options, hostPort, label } = resolved;
  const algorithms = await hostKeyAlgorithms(resolved).catch((error: unknown) => {
    throw new AttemptError(
      new ConnectionError({
        host: hostPort,
        node: options.node,
        message: `cannot read ${resolved.knownHostsFile}: ${errorMessage(error)}`,
        cause: error,
      }),
      true,
    );
  });
  return new Promise<OpenedClient>((resolve, reject) => {
    const signal = options.signal;
    const socket = connectSocket({ host: target.host, port: target.port });
    const client = new SshClient();
    let settled = false;
    let hostKeyProblem: ConnectionError | undefined;

    const cleanup = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
      socket.off("connect", onConnect);
      socket.off("error", onSocketError);
      client.off("ready", onReady);
      client.off("error", onClientError);
      client.off("close", onClientClose);
    };
    const fail = (error: Error) => {
      if (settled) return;
      settled = true;
      cleanup();
      // Keep a listener so that late errors of the discarded client are not thrown.
      client.on("error", () => {});
      socket.on("error", () => {});
      client.end();
      socket.destroy();
      reject(error);
    };
    const retryable = (message: string, cause?: unknown) =>
      new AttemptError(new ConnectionError({ host: hostPort, node: options.node, message, cause }), false);
    const onAbort = () =>
      fail(new CancelledError({ message: `connecting to ${label} was aborted`, cause: signal?.reason }));
    const onSocketError = (error: Error) => fail(retryable(errorMessage(error), error));
    const onClientError = (error: Error & { level?: string }) => {
      if (hostKeyProblem !== undefined) return fail(new AttemptError(hostKeyProblem, true));
      if (error.level === "client-authentication") {
        return fail(
          new AttemptError(
            new ConnectionError({
              host: hostPort,
              node: options.node,
              message: `SSH authentication failed for ${target.user}@${target.host} (port ${target.port}): the server accepted none of the offered keys`,
              cause: error,
            }),
            true,
          ),
        );
      }
      fail(retryable(errorMessage(error), error));
    };
    const onClientClose = () => {
      if (hostKeyProblem !== undefined) return fail(new AttemptError(hostKeyProblem, true));
      fail(retryable("the server closed the connection before SSH was ready"));
    };
    const onReady = () => {
      if (settled) return;
      settled = true;
      cleanup();
      resolve({ client, socket });
    };
    const onConnect = () => {
      socket.setNoDelay(true);
      const config: ConnectConfig = {
        sock: socket,
        username: target.user,
        ...resolved.auth,
        readyTimeout: Math.max(1, timeoutMs - (performance.now() - started)),
        keepaliveInterval: options.keepaliveIntervalMs ?? defaultKeepaliveIntervalMs,
        keepaliveCountMax: 3,
        hostVerifier: (key: Buffer, verify: (valid: boolean) => void) => {
          checkHostKey(resolved, key).then(
            (problem) => {
              hostKeyProblem = problem;
              verify(problem === undefined);
            },
            (error: unknown) => {
              hostKeyProblem = new ConnectionError({
                host: hostPort,
                node: options.node,
                message: `cannot check the host key of ${hostPort} against ${resolved.knownHostsFile}: ${errorMessage(error)}`,
                cause: error,
              });
              verify(false);
            },
          );
        },
      };
      if (algorithms !== undefined) config.algorithms = algorithms;
      try {
        client.connect(config);
      } catch (error) {
        fail(
          new AttemptError(
            new ConnectionError({
              host: hostPort,
              node: options.node,
              message: `cannot start SSH to ${label}: ${errorMessage(error)}`,
              cause: error,
            }),
            true,
          ),
        );
      }
    };

    const started = performance.now();
    const timer = setTimeout(
      () => fail(retryable(`no SSH connection within ${(timeoutMs / 1000).toFixed(1)} s`)),
      timeoutMs,
    );
    socket.once("connect", onConnect);
    socket.on("error", onSocketError);
    client.once("ready", onReady);
    client.on("error", onClientError);
    client.once("close", onClientClose);
    if (signal?.aborted) onAbort();
    else signal?.addEventListener("abort", onAbort, { once: true });
  });
}

// ---------------------------------------------------------------------------------------------
// Output and tar
// ---------------------------------------------------------------------------------------------

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

const blockSize = 512;
/** The largest size the 11 octal digits of a ustar header hold. */
const ustarMaxSize = 0o77777777777;

function writeOctal(header: Buffer, offset: number, length: number, value: number): void {
  header.write(`${value.toString(8).padStart(length - 1, "0")}\0`, offset, length, "latin1");
}

/** One 512-byte ustar header. */
function ustarHeader(fields: {
  name: Buffer;
  prefix: Buffer;
  mode: number;
  size: number;
  type: string;
}): Buffer {
  const header = Buffer.alloc(blockSize);
  fields.name.copy(header, 0);
  writeOctal(header, 100, 8, fields.mode);
  writeOctal(header, 108, 8, 0); // uid
  writeOctal(header, 116, 8, 0); // gid
  writeOctal(header, 124, 12, fields.size);
  writeOctal(header, 136, 12, Math.floor(Date.now() / 1000));
  header.write(fields.type, 156, 1, "latin1");
  header.write("ustar\0", 257, 6, "latin1");
  header.write("00", 263, 2, "latin1");
  fields.prefix.copy(header, 345);
  // The checksum is computed with its own field as spaces.
  header.fill(0x20, 148, 156);
  let sum = 0;
  for (const byte of header) sum += byte;
  header.write(`${sum.toString(8).padStart(6, "0")}\0 `, 148, 8, "latin1");
  return header;
}

/** Splits a path into ustar `prefix` (≤ 155 bytes) and `name` (≤ 100 bytes) at a `/`, when it can. */
function splitUstarPath(path: string): { name: Buffer; prefix: Buffer } | undefined {
  const whole = Buffer.from(path, "utf8");
  if (whole.length <= 100) return { name: whole, prefix: Buffer.alloc(0) };
  for (let index = path.indexOf("/"); index !== -1; index = path.indexOf("/", index + 1)) {
    const prefix = Buffer.from(path.slice(0, index), "utf8");
    const name = Buffer.from(path.slice(index + 1), "utf8");
    if (prefix.length <= 155 && name.length <= 100 && name.length > 0) return { name, prefix };
  }
  return undefined;
}

/** A pax extended header record: `LENGTH key=value\n`, the length counting itself. */
function paxRecord(key: string, value: string): string {
  const body = ` ${key}=${value}\n`;
  const bodyLength = Buffer.byteLength(body, "utf8");
  let length = bodyLength + String(bodyLength).length;
  if (String(length).length + bodyLength !== length) length = bodyLength + String(length).length;
  return `${length}${body}`;
}

function padding(size: number): Buffer {
  const rest = size % blockSize;
  return Buffer.alloc(rest === 0 ? 0 : blockSize - rest);
}

/** The headers of one file: a pax header first when its path or size does not fit ustar. */
function fileHeaders(path: string, size: number, mode: number): Buffer[] {
  const split = splitUstarPath(path);
  const records = [
    ...(split === undefined ? [paxRecord("path", path)] : []),
    ...(size > ustarMaxSize ? [paxRecord("size", String(size))] : []),
  ];
  const headers: Buffer[] = [];
  if (records.length > 0) {
    const pax = Buffer.from(records.join(""), "utf8");
    headers.push(
      ustarHeader({
        name: Buffer.from("../@PaxHeader"),
        prefix: Buffer.alloc(0),
        mode: 0o644,
        size: pax.length,
        type: "x",
      }),
      pax,
      padding(pax.length),
    );
  }
  const fallbackName = Buffer.from(path, "utf8").subarray(0, 100);
  headers.push(
    ustarHeader({
      name: split?.name ?? fallbackName,
      prefix: split?.prefix ?? Buffer.alloc(0),
      mode: mode & 0o7777,
      size: size > ustarMaxSize ? 0 : size,
      type: "0",
    }),
  );
  return headers;
}

interface PreparedFile {
  readonly target: string;
  readonly mode: number;
  readonly size: number;
  readonly source?: string;
  readonly content?: Buffer;
}

/** A POSIX tar stream of `files`, local files streamed in chunks. */
async function* tarStream(files: readonly PreparedFile[]): AsyncGenerator<Buffer> {
  for (const file of files) {
    yield* fileHeaders(file.target, file.size, file.mode);
    if (file.content !== undefined) {
      yield file.content;
    } else if (file.source !== undefined && file.size > 0) {
      let read = 0;
      for await (const chunk of createReadStream(file.source, {
        start: 0,
        end: file.size - 1,
        highWaterMark: 256 * 1024,
      })) {
        read += (chunk as Buffer).length;
        yield chunk as Buffer;
      }
      if (read !== file.size) {
        throw new SkywardError({
          message: `${file.source} changed while it was being uploaded (expected ${file.size} bytes, read ${read})`,
        });
      }
    }
    const tail = padding(file.size);
    if (tail.length > 0) yield tail;
  }
  yield Buffer.alloc(2 * blockSize);
}

function validateUploadTarget(target: string): string | undefined {
  if (target === "" || target.startsWith("/")) return "expected a relative path";
  if (target.includes("\0")) return "must not contain a NUL character";
  const parts = target.split("/");
  if (parts.some((part) => part === "..")) return "must not contain `..`";
  if (parts.at(-1) === "" || parts.at(-1) === ".") return "expected a file path, not a directory";
  return undefined;
}

async function prepareUpload(files: readonly SshUploadFile[]): Promise<PreparedFile[]> {
  const issues: { path: string; message: string }[] = [];
  const prepared: PreparedFile[] = [];
  for (const [index, file] of files.entries()) {
    const problem = validateUploadTarget(file.target);
    if (problem !== undefined) {
      issues.push({ path: `files[${index}].target`, message: problem });
      continue;
    }
    const target = file.target
      .split("/")
      .filter((part) => part !== "" && part !== ".")
      .join("/");
    if (file.mode !== undefined && (!Number.isInteger(file.mode) || file.mode < 0 || file.mode > 0o7777)) {
      issues.push({ path: `files[${index}].mode`, message: "expected permission bits from 0 to 0o7777" });
      continue;
    }
    if ("content" in file) {
      const content =
        typeof file.content === "string" ? Buffer.from(file.content, "utf8") : Buffer.from(file.content);
      prepared.push({ target, mode: file.mode ?? 0o644, size: content.length, content });
      continue;
    }
    try {
      const info = await stat(file.source);
      if (!info.isFile()) {
        issues.push({ path: `files[${index}].source`, message: `${file.source} is not a regular file` });
        continue;
      }
      prepared.push({ target, mode: file.mode ?? info.mode & 0o7777, size: info.size, source: file.source });
    } catch (error) {
      issues.push({
        path: `files[${index}].source`,
        message: `cannot read ${file.source}: ${errorMessage(error)}`,
      });
    }
  }
  if (issues.length > 0) throw new ConfigurationError({ issues });
  return prepared;
}

// ---------------------------------------------------------------------------------------------
// The connection
// ---------------------------------------------------------------------------------------------

interface RunOptions {
  /** Written to stdin before `stdin` (the environment). */
  readonly prelude?: Buffer;
  readonly signal?: AbortSignal;
  readonly timeoutSeconds?: number;
  readonly stdin?: string | Uint8Array | AsyncIterable<Buffer>;
  readonly onStdout?: (chunk: string) => void;
  readonly onStderr?: (chunk: string) => void;
  readonly keepOutputBytes?: number;
}

/** The parts of ssh2's channel internals {@link signalChannel} uses. */
interface ChannelInternals {
  readonly outgoing?: { readonly id?: unknown; readonly state?: unknown };
  readonly _client?: { readonly _protocol?: { readonly signal?: unknown } };
}

/**
 * Sends an SSH `signal` request for the remote command. sshd delivers it to the session's process
 * group, but only for sessions of privilege-separated (non-root) users; the process-group kill in
 * {@link SshConnection} covers the rest. ssh2's `channel.signal()` sends nothing once our side has
 * sent EOF (stdin closed), although SSH allows requests after EOF (RFC 4254 §5.3), so in that state
 * the request goes through ssh2's protocol object.
 */
function signalChannel(channel: ClientChannel, signal: string): void {
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
function signalName(signal: string): string {
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
interface RemoteCommand {
  readonly channel: ClientChannel;
  readonly stderr: ProcessGroupFilter;
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
    const checkedTarget = parseInput(targetSchema, target) as SshTarget;
    const checkedOptions = parseInput(connectOptionsSchema, options) as SshConnectOptions;
    const hostPort = checkedTarget.host.includes(":")
      ? `[${checkedTarget.host}]:${checkedTarget.port}`
      : `${checkedTarget.host}:${checkedTarget.port}`;
    const resolved: ResolvedConnect = {
      target: checkedTarget,
      options: checkedOptions,
      auth: await loadPrivateKey(checkedTarget),
      knownHostsFile: checkedOptions.knownHostsFile ?? join(skywardHome(), "known_hosts"),
      label: `${checkedTarget.user}@${hostPort}`,
      hostPort,
    };
    const { signal } = checkedOptions;
    const timeoutMs = checkedOptions.timeoutSeconds * 1000;
    const intervalMs = checkedOptions.retryIntervalSeconds * 1000;
    const deadline = performance.now() + timeoutMs;
    for (let attempt = 1; ; attempt++) {
      if (signal?.aborted) {
        throw new CancelledError({
          message: `connecting to ${resolved.label} was aborted`,
          cause: signal.reason,
        });
      }
      const remaining = deadline - performance.now();
      try {
        const opened = await attemptConnect(resolved, Math.min(Math.max(remaining, 1), attemptTimeoutCapMs));
        return new SshConnection(opened, resolved);
      } catch (error) {
        if (!(error instanceof AttemptError)) throw error;
        checkedOptions.onAttempt?.(attempt, error.connectionError);
        if (error.fatal) throw error.connectionError;
        if (performance.now() + intervalMs >= deadline) {
          throw new ConnectionError({
            host: hostPort,
            node: checkedOptions.node,
            message:
              `could not connect to ${resolved.label} within ${checkedOptions.timeoutSeconds} s ` +
              `(${attempt} attempt${attempt === 1 ? "" : "s"}, every ${checkedOptions.retryIntervalSeconds} s); ` +
              `last error: ${error.connectionError.message}`,
            cause: error.connectionError,
          });
        }
        try {
          await delay(intervalMs, signal);
        } catch (reason) {
          throw new CancelledError({ message: `connecting to ${resolved.label} was aborted`, cause: reason });
        }
      }
    }
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
    return this.#run(prepared.command, describeCommand(command), { ...options, prelude: prepared.input });
  }

  /**
   * Starts a long-running `command` (a worker) and returns its streams at once.
   *
   * @throws {ConnectionError} when the session cannot be opened.
   */
  async spawn(command: string, options: SshSpawnOptions = {}): Promise<SshProcess> {
    const what = describeCommand(command);
    const prepared = withEnvironment(command, options.env);
    const remote = await this.#start(prepared.command, what, options.signal, undefined);
    const { channel } = remote;
    if (prepared.input !== undefined) channel.write(prepared.input);
    let status: SshExitStatus | undefined;
    let killedByUs = false;
    let killTimer: ReturnType<typeof setTimeout> | undefined;
    const kill = (signal = "KILL") => {
      const name = signalName(signal);
      if (channel.destroyed || killedByUs) return;
      killedByUs = true;
      void this.#signalRemote(remote, name);
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
        else reject(this.#lostDuring(what));
      });
    });
    exited.catch(() => {});
    return { stdout: channel, stderr: remote.stderr, stdin: channel, exited, kill };
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
    const result = await this.#run(
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
    return this.#run(command, describeCommand(command), { ...options, stdin: tarStream(prepared) });
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

  async #run(command: string, what: string, options: RunOptions): Promise<SshExecResult> {
    const started = performance.now();
    const timeoutMs = options.timeoutSeconds === undefined ? undefined : options.timeoutSeconds * 1000;
    const remote = await this.#start(command, what, options.signal, timeoutMs);
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
        void this.#signalRemote(remote, "KILL").finally(() => {
          channel.close();
          reject(error);
        });
      };
      const onAbort = () =>
        stop(
          new CancelledError({
            message: `${what} on ${this.#label} was aborted`,
            cause: options.signal?.reason,
          }),
        );
      const timer =
        timeoutMs === undefined
          ? undefined
          : setTimeout(
              () => stop(this.#timedOut(what, timeoutMs)),
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
        if (status === undefined) reject(this.#lostDuring(what));
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
            host: this.host,
            node: this.node,
            message: `${what} on ${this.#label} failed: ${error.message}`,
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
        this.#pump(input, channel, () => settled).then(
          () => channel.end(),
          (error: unknown) => stop(error),
        );
      }
    });
  }

  /** Opens a session running `command` after the line that reports its process group. */
  async #start(
    command: string,
    what: string,
    signal: AbortSignal | undefined,
    timeoutMs: number | undefined,
  ): Promise<RemoteCommand> {
    const channel = await this.#openSession(`${reportProcessGroup}${command}`, what, signal, timeoutMs);
    const stderr = new ProcessGroupFilter();
    channel.stderr.pipe(stderr);
    return { channel, stderr };
  }

  /**
   * Sends `signal` to a remote command's whole process group: an SSH signal request, and `kill`
   * run in a second session (which also works where sshd refuses signal requests). Never rejects;
   * gives up after a few seconds.
   */
  async #signalRemote(remote: RemoteCommand, signal: string): Promise<void> {
    signalChannel(remote.channel, signal);
    // Killed right after starting, the command may not have reported its process group yet.
    const group = await remote.stderr.processGroupWithin(killGraceMs);
    if (group === undefined || !this.isOpen) return;
    let channel: ClientChannel | undefined;
    try {
      channel = await this.#openSession(`kill -s ${signal} -- -${group}`, "kill", undefined, killGraceMs);
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

  /** Writes `input` into `channel`, waiting for `drain` whenever the SSH window is full. */
  async #pump(input: AsyncIterable<Buffer>, channel: ClientChannel, isSettled: () => boolean): Promise<void> {
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
}
