/**
 * Connecting: the private key to offer (given, read from a file, or what `ssh` itself would use),
 * one attempt (TCP, handshake with the host key check, authentication), and the retries while an
 * instance boots. Authentication failures and host key mismatches are not retried.
 */

import { readFile } from "node:fs/promises";
import { connect as connectSocket, type Socket } from "node:net";
import { homedir } from "node:os";
import { join } from "node:path";
import { CancelledError, ConfigurationError, ConnectionError } from "@skyward/core";
import { parseInput, skywardHome } from "@skyward/core/contract";
import type { Client, ConnectConfig } from "ssh2";
import { checkHostKey, hostKeyAlgorithms } from "./known-hosts.js";
import { loadSsh2 } from "./ssh2-module.js";
import {
  connectOptionsSchema,
  expandHome,
  type ResolvedConnect,
  type SshConnectOptions,
  type SshTarget,
  targetSchema,
} from "./target.js";

// Without its native crypto binding: see ssh2-module.ts.
const { Client: SshClient, utils: sshUtils } = loadSsh2();

const defaultKeepaliveIntervalMs = 15_000;
/** The longest one attempt waits for TCP and the SSH handshake before the next attempt. */
const attemptTimeoutCapMs = 30_000;

/**
 * An attempt's failure: `fatal` ones (authentication, host key, bad key) are not retried; `refused`
 * ones (the host answered, nothing listens on the port) only for `refusedRetrySeconds`.
 */
class AttemptError extends Error {
  readonly fatal: boolean;
  readonly refused: boolean;
  readonly connectionError: ConnectionError;
  constructor(connectionError: ConnectionError, fatal: boolean, refused = false) {
    super(connectionError.message);
    this.connectionError = connectionError;
    this.fatal = fatal;
    this.refused = refused;
  }
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

async function loadPrivateKey(target: SshTarget): Promise<ResolvedConnect["auth"]> {
  const agent = process.env.SSH_AUTH_SOCK || undefined;
  /**
   * The key to offer: the key itself, or, for an encrypted key given no passphrase, the agent (as
   * `ssh` does: the key is in the agent, unlocked, once `ssh-add` was given its passphrase).
   */
  const usable = (key: Buffer, path: string): ResolvedConnect["auth"] => {
    const parsed = sshUtils.parseKey(key, target.passphrase);
    if (!(parsed instanceof Error)) return { privateKey: key, passphrase: target.passphrase };
    const encrypted = target.passphrase === undefined && /encrypted/i.test(parsed.message);
    if (encrypted && agent !== undefined) return { agent };
    throw new ConfigurationError({
      issues: [
        {
          path,
          message: encrypted
            ? "the private key is encrypted: give its passphrase, or add it to an ssh-agent (ssh-add) and set SSH_AUTH_SOCK"
            : `cannot use the private key: ${parsed.message}`,
        },
      ],
    });
  };
  if (target.privateKey !== undefined) return usable(Buffer.from(target.privateKey), "privateKey");
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
    return usable(key, "identityFile");
  }
  // Neither given: what `ssh` itself would use, the agent and the first usable default key.
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

export interface OpenedClient {
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
    const onSocketError = (error: Error & { code?: string }) =>
      fail(
        new AttemptError(
          new ConnectionError({
            host: hostPort,
            node: options.node,
            message: errorMessage(error),
            cause: error,
          }),
          false,
          error.code === "ECONNREFUSED",
        ),
      );
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

/**
 * Connects, retrying refused, unreachable and timed-out attempts every `retryIntervalSeconds`
 * until `timeoutSeconds` have passed; refused ones only for `refusedRetrySeconds` when given (a
 * machine that does not boot, whose port stays refused, fails at once naming host and port).
 *
 * @throws {ConfigurationError} for bad target or options, or an unusable private key.
 * @throws {ConnectionError} when no connection could be made, saying why.
 * @throws {CancelledError} when `options.signal` aborts.
 */
export async function connectWithRetries(
  target: SshTarget,
  options: SshConnectOptions,
): Promise<{ opened: OpenedClient; resolved: ResolvedConnect }> {
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
  const refusedLimitMs =
    checkedOptions.refusedRetrySeconds === undefined ? undefined : checkedOptions.refusedRetrySeconds * 1000;
  // When the port was first refused, of the refusals since the last other failure.
  let refusedSince: number | undefined;
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
      return { opened, resolved };
    } catch (error) {
      if (!(error instanceof AttemptError)) throw error;
      checkedOptions.onAttempt?.(attempt, error.connectionError);
      if (error.fatal) throw error.connectionError;
      refusedSince = error.refused ? (refusedSince ?? performance.now()) : undefined;
      if (
        refusedSince !== undefined &&
        refusedLimitMs !== undefined &&
        performance.now() + intervalMs - refusedSince > refusedLimitMs
      ) {
        const { host, port } = checkedTarget;
        throw new ConnectionError({
          host: hostPort,
          node: checkedOptions.node,
          message:
            `connection to ${resolved.label} refused for ${checkedOptions.refusedRetrySeconds} s ` +
            `(${attempt} attempt${attempt === 1 ? "" : "s"}): nothing listens on port ${port} of ${host}; ` +
            "is sshd running there, and is the port right?",
          cause: error.connectionError,
        });
      }
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
