import { posix } from "node:path";
import { z } from "zod";
import { ConfigurationError } from "../errors/errors.js";
import { parseInput } from "../errors/validation.js";

/**
 * Mount points a volume may not take: system directories Skyward or the OS needs (the reference's
 * `/`, `/opt`, `/opt/skyward`, `/root`, `/tmp`, plus the OS's own). Nothing may be mounted inside
 * `/opt/skyward` either.
 */
export const FORBIDDEN_MOUNTS: readonly string[] = Object.freeze([
  "/",
  "/opt",
  "/opt/skyward",
  "/root",
  "/tmp",
  "/bin",
  "/boot",
  "/dev",
  "/etc",
  "/lib",
  "/proc",
  "/sbin",
  "/sys",
  "/usr",
  "/var",
]);

function normalizeMount(mount: string): string {
  return posix.normalize(mount).replace(/(.)\/+$/, "$1");
}

/** An S3-compatible object store a volume reads from, when it is not the provider's own. */
export interface StorageEndpoint {
  /** The endpoint URL (`https://…`). */
  readonly endpoint: string;
  /** Name of an environment variable holding the access key on the client, never the key itself. */
  readonly accessKeyEnv?: string;
  /** Name of an environment variable holding the secret key on the client. */
  readonly secretKeyEnv?: string;
  /** Path-style addressing (`endpoint/bucket/key`). Default false. */
  readonly pathStyle?: boolean;
  /** The signing region, when the store needs one (Wasabi, Backblaze). Default: the store's own answer. */
  readonly region?: string;
}

/**
 * An object-store client that hands its keys over when a node mounts a volume: a `@skyward/storage`
 * `Storage` (`storage: R2({ accountId, accessKey, secretKey })`), as the Python project's
 * `Volume(storage=…)` takes one. Its keys are resolved on this machine when each node starts.
 */
export interface VolumeStorageClient {
  /** The endpoint URL. */
  readonly endpoint: string;
  /** The signing region. */
  readonly region?: string;
  /** Path-style addressing. */
  readonly pathStyle?: boolean;
  /** The keys as strings, or undefined when the client relies on the AWS default chain. Secrets. */
  resolveCredentials(): Promise<{ accessKey: string; secretKey: string; sessionToken?: string } | undefined>;
}

/** Whether a volume's `storage` is a client (a `@skyward/storage` `Storage`) rather than endpoint settings. */
export function isVolumeStorageClient(
  storage: StorageEndpoint | VolumeStorageClient | undefined,
): storage is VolumeStorageClient {
  return typeof (storage as VolumeStorageClient | undefined)?.resolveCredentials === "function";
}

/** A bucket mounted as a filesystem on every node. */
export interface VolumeInput {
  /** The bucket's name. */
  bucket: string;
  /** Absolute mount path on the node; not `/`, `/opt`, `/opt/skyward`, `/root` or `/tmp`. */
  mount: string;
  /** A folder inside the bucket. Default `""` (the whole bucket). */
  prefix?: string;
  /** Mount read-only. Default true. */
  readOnly?: boolean;
  /** The object store (endpoint settings, or a `@skyward/storage` client); default: the provider's own (S3 on AWS). */
  storage?: StorageEndpoint | VolumeStorageClient;
}

/** A resolved volume: every field present. */
export interface Volume {
  readonly bucket: string;
  readonly mount: string;
  readonly prefix: string;
  readonly readOnly: boolean;
  readonly storage: StorageEndpoint | VolumeStorageClient | undefined;
}

const envName = z
  .string()
  .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, { message: "expected an environment variable name" });

const storageSchema = z.strictObject({
  endpoint: z.url({ message: "expected an http(s) URL", protocol: /^https?$/ }),
  accessKeyEnv: envName.optional(),
  secretKeyEnv: envName.optional(),
  pathStyle: z.boolean().optional(),
  region: z
    .string()
    .regex(/^[A-Za-z0-9-]+$/, { message: "expected a region name" })
    .optional(),
});

const storageClientSchema = z.custom<VolumeStorageClient>(
  (value) =>
    typeof value === "object" &&
    value !== null &&
    typeof (value as VolumeStorageClient).endpoint === "string" &&
    /^https?:\/\//.test((value as VolumeStorageClient).endpoint) &&
    typeof (value as VolumeStorageClient).resolveCredentials === "function",
);

/** Validates a volume: bucket name, an absolute mount outside the forbidden paths. */
export const volumeSchema = z
  .strictObject({
    bucket: z.string({ error: "expected a bucket name" }).regex(/^[a-z0-9][a-z0-9.\-_]{1,254}$/, {
      message: "expected a bucket name (lowercase letters, digits, '.', '-', '_'; 2 to 255 characters)",
    }),
    mount: z
      .string({ error: "expected an absolute path" })
      .refine((value) => value.startsWith("/"), { message: "expected an absolute path (starting with /)" })
      .refine((value) => !value.split("/").includes(".."), { message: "must not contain '..'" })
      // /proc/mounts escapes them (a space as \040), where the node looks for its mounts.
      .refine((value) => !/[\s\\]/.test(value), {
        message: "must not contain whitespace or a backslash",
      })
      .refine((value) => !FORBIDDEN_MOUNTS.includes(normalizeMount(value)), {
        message: `must not be one of ${FORBIDDEN_MOUNTS.join(", ")}`,
      })
      .refine((value) => !normalizeMount(value).startsWith("/opt/skyward/"), {
        message: "must not be inside /opt/skyward (Skyward's own directory)",
      }),
    prefix: z.string().default(""),
    readOnly: z.boolean().default(true),
    storage: z
      .union([storageClientSchema, storageSchema], {
        error:
          "expected { endpoint, accessKeyEnv?, secretKeyEnv?, pathStyle?, region? } or a @skyward/storage Storage",
      })
      .optional(),
  })
  .transform(
    (value): Volume =>
      Object.freeze({
        bucket: value.bucket,
        mount: normalizeMount(value.mount),
        prefix: value.prefix,
        readOnly: value.readOnly,
        storage: value.storage
          ? isVolumeStorageClient(value.storage)
            ? value.storage
            : Object.freeze(value.storage)
          : undefined,
      }),
  );

/** Validates a volume: `sky.volume({ bucket: "data", mount: "/data" })`. */
export function volume(input: VolumeInput): Volume {
  return parseInput(volumeSchema, input, "volume");
}

/**
 * Checks, before any machine starts, that each volume can be mounted by `provider`'s nodes: a
 * volume without a `storage` needs a provider with a store of its own (AWS: S3 with the instance's
 * role), and the key variables a `storage` names must be set here, both or neither. The `Local`
 * provider refuses volumes itself.
 *
 * @throws {ConfigurationError} naming each volume's field, under `path` (`volumes`, `specs[1].volumes`).
 */
export function checkVolumeSources(
  provider: string | undefined,
  volumes: readonly Volume[],
  path = "volumes",
  env: NodeJS.ProcessEnv = process.env,
): void {
  if (provider === undefined || provider === "local") return;
  const issues: { path: string; message: string }[] = [];
  volumes.forEach((volume, index) => {
    const at = `${path}[${index}]`;
    const storage = volume.storage;
    if (isVolumeStorageClient(storage)) return;
    if (!storage) {
      if (provider !== "aws")
        issues.push({
          path: `${at}.storage`,
          message: `the ${provider} provider has no object store of its own: give storage: { endpoint, accessKeyEnv, secretKeyEnv }`,
        });
      return;
    }
    if ((storage.accessKeyEnv === undefined) !== (storage.secretKeyEnv === undefined))
      issues.push({
        path: `${at}.storage.${storage.accessKeyEnv === undefined ? "accessKeyEnv" : "secretKeyEnv"}`,
        message: "expected accessKeyEnv and secretKeyEnv together",
      });
    for (const field of ["accessKeyEnv", "secretKeyEnv"] as const) {
      const name = storage[field];
      if (name !== undefined && !env[name])
        issues.push({
          path: `${at}.storage.${field}`,
          message: `the environment variable ${name} is not set on this machine`,
        });
    }
  });
  if (issues.length > 0) throw new ConfigurationError({ issues });
}

/**
 * Why s3fs could not mount a volume with a client's keys (resolved), or undefined when it can: it
 * signs with a key pair only, reads them from a `ACCESS:SECRET` line, and a node without keys signs
 * with its instance's role (AWS's only). The message names no key.
 */
export function volumeClientKeysProblem(
  keys: { accessKey: string; secretKey: string; sessionToken?: string } | undefined,
  provider: string,
): string | undefined {
  if (keys?.sessionToken)
    return "temporary credentials (a session token) cannot be used by s3fs: give a key pair";
  if (keys && (/[:\n\r\0]/.test(keys.accessKey) || /[\n\r\0]/.test(keys.secretKey)))
    return "a key holds a character s3fs's passwd file cannot carry";
  if (!keys && provider !== "aws")
    return `the client has no keys and ${provider} nodes have no AWS role: give accessKey and secretKey`;
  return undefined;
}

/**
 * Checks, before any machine starts, the keys of each volume whose `storage` is a client (a
 * `@skyward/storage` `Storage`): resolved once here (each node resolves them again when it mounts),
 * so that keys s3fs cannot use refuse the pool rather than every node after it is paid for.
 *
 * @throws {ConfigurationError} naming each such volume's `storage`, under `path`.
 */
export async function checkVolumeClients(
  provider: string | undefined,
  volumes: readonly Volume[],
  path = "volumes",
): Promise<void> {
  if (provider === undefined || provider === "local") return;
  const issues: { path: string; message: string }[] = [];
  for (const [index, volume] of volumes.entries()) {
    if (!isVolumeStorageClient(volume.storage)) continue;
    const problem = volumeClientKeysProblem(await volume.storage.resolveCredentials(), provider);
    if (problem) issues.push({ path: `${path}[${index}].storage`, message: problem });
  }
  if (issues.length > 0) throw new ConfigurationError({ issues });
}
