/**
 * The state of detached pools on disk: one JSON file per pool, `$SKYWARD_HOME/pools/<id>.json`,
 * mode 0600 in a 0700 directory. What another process needs to reach the workers again: the
 * provider, its nodes (instance ids, where their workers listen, their pids), the tasks that were
 * on the workers when the pool was detached, and the workers' token — encrypted (AES-256-GCM) with a
 * key of this user's (`$SKYWARD_HOME/keys/pools.key`, 0600), so the file holds no secret in clear.
 * Provider credentials are never written: they are read again (environment, config) on attach.
 */

import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
import { chmod, mkdir, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { skywardHome } from "../config/home.js";
import type { Cluster, Instance, Offer } from "../contract/types.js";
import type { PoolSettingsKept } from "../pool/detach.js";
import type { RecordedRef } from "../pool/remote-refs.js";
import type { Worker } from "../spec/options.js";

/** One node of a detached pool. */
export interface DetachedNode {
  readonly index: number;
  readonly instanceId: string;
  /** Where its worker listens (loopback for `Local`; the SSH address, for display, on other providers). */
  readonly host: string;
  /** Its port (on its node's loopback, reached through a tunnel, on other providers). */
  readonly port: number;
  /** The worker's process id on its node. */
  readonly pid: number;
  /** USD per hour, when known. */
  readonly hourlyPrice: number | null;
  /**
   * Its worker's token, sealed as the pool's is, when it is not the pool's: a worker of an earlier
   * pool that this one picked up (released, same code and settings) keeps that pool's token.
   */
  readonly token?: string;
}

/** A task that was on a worker when its pool was detached. */
export interface DetachedTask {
  readonly taskId: string;
  /** The callable's `module:qualname` (or a command's label). */
  readonly name: string;
  readonly node: number;
}

/** A detached pool's cost when it was detached, carried over to the pool that attaches it. */
export interface DetachedCost {
  /** USD spent up to the detach. */
  readonly total: number;
  /** USD per hour of its nodes then (they keep running while detached). */
  readonly hourlyRate: number;
}

/**
 * The cluster of a detached pool on a provider other than `Local`, with no secret: no `spec`, no
 * `ssh.privateKey`, and in `specific` no field named like a key, password, secret or token
 * ({@link withoutSecrets}).
 */
export interface RecordedCluster {
  readonly id: string;
  readonly provider: string;
  readonly poolId: string;
  readonly region: string;
  readonly offer: Offer;
  readonly ssh: Cluster["ssh"];
  readonly specific: unknown;
}

/** A detached pool's state file. */
export interface DetachedPoolState {
  readonly version: 1;
  readonly id: string;
  /** The provider's name (`local`, …). */
  readonly provider: string;
  /**
   * Reserved for provider settings with no secret in them; written empty today: attach takes the
   * provider given (`attach(id, { provider })`), else the `skyward.toml` entry of the pool's type.
   */
  readonly providerSettings: Readonly<Record<string, string>>;
  readonly clusterId: string;
  /** `Local`: the pool's root and work directory on this machine. */
  readonly root: string | null;
  readonly workdir: string | null;
  readonly instanceType: string;
  readonly region: string;
  readonly spot: boolean;
  readonly nodes: readonly DetachedNode[];
  readonly tasks: readonly DetachedTask[];
  /** The worker's TTL, seconds: how long they wait for a client. */
  readonly ttl: number;
  /** When it was detached, and by which process. */
  readonly detachedAt: number;
  readonly pid: number;
  /** The token, AES-256-GCM with the user's pools key: `iv.tag.ciphertext`, base64url each. */
  readonly token: string;
  /**
   * The distributed collections' contents, sealed like the token, as versions that kept them in the
   * client wrote them (today the head node holds them: never written, not read).
   */
  readonly collections?: string;
  /**
   * Outcomes of tasks an earlier attach picked up that reached it but not its user (it was detached
   * again before `collected()` settled), sealed like the token: the next `collected()` hands them over.
   */
  readonly outcomes?: string;
  /** Providers other than `Local`: the cluster and instances, without secrets. */
  readonly cluster?: RecordedCluster;
  readonly instances?: readonly Instance[];
  /** The remote references its nodes held when it was detached (`AttachedPool.keptRefs()`); absent: none. */
  readonly refs?: readonly RecordedRef[];
  /** Its workers' settings (they run with them): the attached pool's. Absent in files of older versions. */
  readonly worker?: Worker;
  /** Its node bounds (`nodes.min`, `nodes.max`), kept after attach. Absent in older files. */
  readonly nodeBounds?: { readonly min: number; readonly max: number };
  /**
   * Its image, sealed as the token is (its `env` may carry credentials): a node an attached pool
   * starts is made with it. Absent in older files.
   */
  readonly image?: string;
  /** Its plugins' names: an attached pool cannot start a node with plugins (they are code). */
  readonly plugins?: readonly string[];
  /** Its healing, autoscaling and health-check settings, kept after attach. Absent in older files. */
  readonly settings?: PoolSettingsKept;
  /** Its `options.cluster` (distributed collections on or off). Absent in files of older versions. */
  readonly collectionsEnabled?: boolean;
  /**
   * The names of its secrets, never their values: an attach reads them again (`attach(id, { secrets })`,
   * else each from the attaching process's environment variable of that name). Absent: none.
   */
  readonly secretNames?: readonly string[];
  /** What it had cost when it was detached; absent in files of older versions. */
  readonly cost?: DetachedCost;
  /** Its `options.budget`, which keeps applying after attach; null when it had none. */
  readonly budget?: { readonly max: number; readonly warnAt: number } | null;
  /**
   * When its budget runs out at its hourly rate, milliseconds since the epoch: the workers stop
   * themselves then (self-destruct) unless a client attached. Null without a budget.
   */
  readonly budgetDeadline?: number | null;
}

/** Field names that hold credentials, left out of what a state file records. */
const SECRET_FIELD = /private.?key|secret|password|passphrase|token|api.?key|credential|authori[sz]ation/i;

/**
 * A deep copy of `value` (plain data) without the fields named like credentials: what a state file
 * may record of a provider's cluster and instances.
 */
export function withoutSecrets<T>(value: T): T {
  if (Array.isArray(value)) return value.map((entry) => withoutSecrets(entry)) as T;
  if (typeof value !== "object" || value === null) return value;
  return Object.fromEntries(
    Object.entries(value)
      .filter(([key, entry]) => !SECRET_FIELD.test(key) && typeof entry !== "function")
      .map(([key, entry]) => [key, withoutSecrets(entry)]),
  ) as T;
}

function poolsDirectory(): string {
  return join(skywardHome(), "pools");
}

/** The state file of pool `id`. */
export function statePath(id: string): string {
  if (!/^[\w-]+$/.test(id)) throw new Error(`not a pool id: ${JSON.stringify(id)}`);
  return join(poolsDirectory(), `${id}.json`);
}

async function poolsKey(): Promise<Buffer> {
  const directory = join(skywardHome(), "keys");
  const path = join(directory, "pools.key");
  try {
    const key = Buffer.from((await readFile(path, "utf8")).trim(), "base64");
    if (key.length === 32) return key;
  } catch {
    // made below
  }
  await mkdir(directory, { recursive: true, mode: 0o700 });
  const key = randomBytes(32);
  await writeFile(path, `${key.toString("base64")}\n`, { mode: 0o600, flag: "w" });
  await chmod(path, 0o600);
  return key;
}

/** Encrypts a token for a state file. */
export async function sealToken(token: string): Promise<string> {
  const key = await poolsKey();
  const iv = randomBytes(12);
  const cipher = createCipheriv("aes-256-gcm", key, iv);
  const body = Buffer.concat([cipher.update(token, "utf8"), cipher.final()]);
  return [iv, cipher.getAuthTag(), body].map((part) => part.toString("base64url")).join(".");
}

/** Decrypts a state file's token; throws when the key is not the one it was sealed with. */
export async function openToken(sealed: string): Promise<string> {
  const [iv, tag, body] = sealed.split(".").map((part) => Buffer.from(part, "base64url"));
  if (!iv || !tag || !body) throw new Error("the state file's token is malformed");
  const decipher = createDecipheriv("aes-256-gcm", await poolsKey(), iv);
  decipher.setAuthTag(tag);
  return Buffer.concat([decipher.update(body), decipher.final()]).toString("utf8");
}

/**
 * The tokens of a detached pool's workers, opened: the pool's, and each node's (its own when the state
 * file records one, else the pool's).
 */
export async function openTokens(
  state: DetachedPoolState,
): Promise<{ readonly pool: string; readonly of: (node: DetachedNode) => string }> {
  const pool = await openToken(state.token);
  const own = new Map<number, string>();
  for (const node of state.nodes) if (node.token) own.set(node.index, await openToken(node.token));
  return { pool, of: (node) => own.get(node.index) ?? pool };
}

/** Writes (replaces) a detached pool's state file, readable by its owner only. */
export async function writePoolState(state: DetachedPoolState): Promise<string> {
  await mkdir(poolsDirectory(), { recursive: true, mode: 0o700 });
  const path = statePath(state.id);
  const temporary = `${path}.${process.pid}.tmp`;
  await writeFile(temporary, `${JSON.stringify(state, null, 2)}\n`, { mode: 0o600 });
  await chmod(temporary, 0o600);
  const { rename } = await import("node:fs/promises");
  await rename(temporary, path);
  return path;
}

/** Reads pool `id`'s state file, or undefined when there is none. */
export async function readPoolState(id: string): Promise<DetachedPoolState | undefined> {
  let text: string;
  try {
    text = await readFile(statePath(id), "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
  const state = JSON.parse(text) as DetachedPoolState;
  if (state.version !== 1 || state.id !== id) throw new Error(`${statePath(id)} is not a pool state file`);
  return state;
}

/** Every detached pool's state, newest first. */
export async function listPoolStates(): Promise<DetachedPoolState[]> {
  const names = await readdir(poolsDirectory()).catch(() => [] as string[]);
  const states = await Promise.all(
    names
      .filter((name) => name.endsWith(".json"))
      .map((name) => readPoolState(name.slice(0, -".json".length)).catch(() => undefined)),
  );
  return states
    .filter((state): state is DetachedPoolState => state !== undefined)
    .sort((a, b) => b.detachedAt - a.detachedAt);
}

/** Removes pool `id`'s state file (gone, or attached again and closed). */
export async function removePoolState(id: string): Promise<void> {
  await rm(statePath(id), { force: true });
}
