/**
 * Where to connect and as whom (`SshTarget`), how (`SshConnectOptions`), and the schemas both are
 * checked against before anything is opened.
 */

import { homedir } from "node:os";
import { join } from "node:path";
import type { ConnectionError } from "@skyward/core";
import type { ConnectConfig } from "ssh2";
import { z } from "zod";

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
  /**
   * Passphrase of an encrypted private key. Without it an encrypted key is used through the
   * ssh-agent (`SSH_AUTH_SOCK`, the key added with `ssh-add`), as `ssh` does.
   */
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
  /**
   * How long a refused port (the host answers, nothing listens on it) is retried, in seconds, from
   * its first refusal; then connecting fails naming host and port. Default: until `timeoutSeconds`,
   * as for a cloud machine still booting; a machine of your own that is up does not start sshd later.
   */
  readonly refusedRetrySeconds?: number;
  /** The `known_hosts` file for trust on first use. Default `$SKYWARD_HOME/known_hosts` (`~/.skyward/known_hosts`). */
  readonly knownHostsFile?: string;
  /** Interval of SSH keepalive requests, in milliseconds; 0 disables them. Default 15 000. */
  readonly keepaliveIntervalMs?: number;
  /** The node index, for errors. */
  readonly node?: number;
  /** Called after every failed attempt (the last one included) with its 1-based number and the error. */
  readonly onAttempt?: (attempt: number, error: ConnectionError) => void;
}

const fingerprintPattern = /^SHA256:[A-Za-z0-9+/]{43}=?$/;

export const targetSchema = z.strictObject({
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

export const connectOptionsSchema = z.strictObject({
  signal: z
    .custom<AbortSignal>((value) => value instanceof AbortSignal, "expected an AbortSignal")
    .optional(),
  timeoutSeconds: z
    .number({ error: "expected a number of seconds" })
    .positive("expected a positive number of seconds"),
  retryIntervalSeconds: z
    .number({ error: "expected a number of seconds" })
    .positive("expected a positive number of seconds"),
  refusedRetrySeconds: z
    .number({ error: "expected a number of seconds" })
    .min(0, "expected 0 or more seconds")
    .optional(),
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

/** A target and options once checked, with the key to offer and the names errors use. */
export interface ResolvedConnect {
  readonly target: SshTarget;
  readonly options: SshConnectOptions;
  readonly auth: Pick<ConnectConfig, "privateKey" | "passphrase" | "agent">;
  readonly knownHostsFile: string;
  /** `user@host:port`. */
  readonly label: string;
  /** `host:port` (`[host]:port` for an IPv6 address). */
  readonly hostPort: string;
}

/** A local path with a leading `~` or `~/` read as the home directory. */
export function expandHome(path: string): string {
  return path === "~" ? homedir() : path.startsWith("~/") ? join(homedir(), path.slice(2)) : path;
}
