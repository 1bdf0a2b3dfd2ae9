/**
 * The login node: the one SSH connection a provider keeps to the cluster, through which every Slurm
 * command runs. Connected on first use and again after it is lost.
 */
import { ProvisionError, shellQuote } from "@skyward/core/contract";
import { SshConnection, type SshExecResult, type SshTarget } from "@skyward/ssh";
import type { SlurmDeclared } from "./slurm-settings.js";

/** How long a login-node connection may take, and how often it is retried meanwhile. */
const CONNECT_TIMEOUT_SECONDS = 30;
const CONNECT_RETRY_SECONDS = 2;
/** Slurm's commands answer in a second or two; a stuck controller must not hang a pool. */
const COMMAND_TIMEOUT_SECONDS = 60;

/** The login node's SSH address, as `@skyward/ssh` connects to it. */
export function loginTarget(declared: SlurmDeclared): SshTarget {
  const { login } = declared;
  return {
    host: login.host,
    port: login.port,
    user: login.user,
    ...(login.privateKey !== undefined ? { privateKey: login.privateKey } : {}),
    ...(login.identityFile !== undefined ? { identityFile: login.identityFile } : {}),
    ...(login.hostKeyFingerprint !== undefined ? { hostKeyFingerprint: login.hostKeyFingerprint } : {}),
  };
}

/** `user@host:port` of the login node, for messages. */
export function loginLabel(declared: SlurmDeclared): string {
  return `${declared.login.user}@${declared.login.host}:${declared.login.port}`;
}

/** Opens an SSH connection to the login node. */
export function connectLogin(
  declared: SlurmDeclared,
  signal?: AbortSignal,
  node?: number,
): Promise<SshConnection> {
  return SshConnection.connect(loginTarget(declared), {
    ...(signal ? { signal } : {}),
    ...(node !== undefined ? { node } : {}),
    timeoutSeconds: CONNECT_TIMEOUT_SECONDS,
    retryIntervalSeconds: CONNECT_RETRY_SECONDS,
  });
}

/** Runs Slurm's commands on the login node over one kept connection. */
export class SlurmLogin {
  readonly #declared: SlurmDeclared;
  #connection: Promise<SshConnection> | undefined;

  constructor(declared: SlurmDeclared) {
    this.#declared = declared;
  }

  /** Runs `command` (a shell line) and returns how it ended, whatever its exit code. */
  async run(command: string, signal?: AbortSignal): Promise<SshExecResult> {
    const ssh = await this.#connect(signal);
    return ssh.exec(command, { ...(signal ? { signal } : {}), timeoutSeconds: COMMAND_TIMEOUT_SECONDS });
  }

  /** Runs a program with its arguments, each quoted; rejects with a `ProvisionError` when it fails. */
  async checked(argv: readonly string[], signal?: AbortSignal): Promise<string> {
    const result = await this.run(argv.map((word) => shellQuote(word)).join(" "), signal);
    if (result.code !== 0) {
      throw new ProvisionError({
        provider: "slurm",
        isRetryable: true,
        message: `\`${argv.join(" ")}\` failed on the login node ${loginLabel(this.#declared)} (exit code ${result.code}): ${(result.stderr.trim() || result.stdout.trim()).slice(-500)}`,
      });
    }
    return result.stdout;
  }

  /** Closes the connection; a later command opens a new one. */
  close(): void {
    const connection = this.#connection;
    this.#connection = undefined;
    connection?.then((ssh) => ssh.close()).catch(() => undefined);
  }

  async #connect(signal?: AbortSignal): Promise<SshConnection> {
    const current = this.#connection;
    if (current) {
      const ssh = await current.catch(() => undefined);
      if (ssh?.isOpen) return ssh;
      if (this.#connection === current) this.#connection = undefined;
    }
    this.#connection ??= connectLogin(this.#declared, signal);
    return this.#connection;
  }
}
