/**
 * The volume phase of an SSH node: every `volumes` entry of the spec mounted with s3fs-fuse before
 * the worker starts, and unmounted when the worker exits (released past its TTL, stopped, or
 * replaced).
 *
 * Why s3fs: measured here against moto's S3 (a 64 MiB object, 200 objects of 1 kB; see
 * `docs/volumes.md`), s3fs (Debian's `s3fs` 1.90) read the large object cold in 1.35 s against
 * rclone mount's (1.60) 4.24 s, and a file written through it is in the bucket when `close()`
 * returns (2.6 s for 64 MiB), where rclone's write cache (needed for ordinary writes) uploads it
 * seconds later, after the task may have returned. Both are packaged by the distributions; s3fs
 * reads its keys from a 0600 passwd file, so they are never in a process list.
 *
 * - Each volume is `s3fs BUCKET[:/PREFIX] MOUNT`, with `ro` for read-only ones, the store's URL and
 *   path-style addressing when asked; a write to a read-only volume fails with EROFS ("Read-only
 *   file system").
 * - Keys come from the client's environment (`storage.accessKeyEnv`/`secretKeyEnv`) and travel in
 *   `ROOT/volumes/N.passwd` (0600, uploaded with the token, outside anything hashed or logged); a
 *   volume on AWS without keys uses the instance's role: the script asks the instance metadata
 *   service for the role's name itself, with an IMDSv2 token (s3fs 1.90's `iam_role=auto` asks
 *   without one, which an instance requiring IMDSv2 answers 401), and gives s3fs `iam_role=NAME`;
 *   s3fs then fetches and renews the role's credentials in memory (with a token).
 * - s3fs is installed with apt-get when missing.
 */
import { ConfigurationError, isVolumeStorageClient, type Volume } from "@skyward/core";
import { shellQuote, volumeClientKeysProblem } from "@skyward/core/contract";

/** One volume, resolved for mounting on a node: where the store is and how to sign for it. */
export interface VolumeMount {
  /** The volume. */
  readonly volume: Volume;
  /** The store's URL. */
  readonly url: string;
  /** Path-style addressing. */
  readonly pathStyle: boolean;
  /** `ACCESS:SECRET` for the passwd file, or undefined to use the instance's role. A secret. */
  readonly passwd: string | undefined;
  /** The signing region, when known (s3fs's `endpoint` option). */
  readonly region?: string | undefined;
}

/** Where {@link resolveVolumeMounts} looks things up. */
export interface ResolveVolumesOptions {
  /** The provider's name (`aws` gives volumes without a `storage` the instance's role). */
  readonly provider: string;
  /** The cluster's region (AWS's S3 endpoint). */
  readonly region: string;
  /** The node's Skyward root: no volume may be mounted inside it (its self-destruct removes it). */
  readonly root: string;
  /** The client's environment, where `accessKeyEnv`/`secretKeyEnv` are read. Default `process.env`. */
  readonly env?: NodeJS.ProcessEnv;
}

function refuse(index: number, field: string, message: string): ConfigurationError {
  return new ConfigurationError({ issues: [{ path: `volumes[${index}].${field}`, message }] });
}

/**
 * Resolves the spec's volumes for one node: endpoints and credentials.
 *
 * @throws {ConfigurationError} naming the volume's field when a key's environment variable is unset,
 *   a volume has no store on a provider without one of its own, or its mount is inside the root.
 */
export async function resolveVolumeMounts(
  volumes: readonly Volume[],
  options: ResolveVolumesOptions,
): Promise<VolumeMount[]> {
  const env = options.env ?? process.env;
  const root = options.root.replace(/\/+$/, "");
  const mounts: VolumeMount[] = [];
  for (const [index, volume] of volumes.entries()) mounts.push(await resolveOne(volume, index));
  return mounts;

  async function resolveOne(volume: Volume, index: number): Promise<VolumeMount> {
    if (volume.mount === root || volume.mount.startsWith(`${root}/`) || root.startsWith(`${volume.mount}/`))
      throw refuse(index, "mount", `must not be inside or above the node's Skyward root ${root}`);
    const storage = volume.storage;
    if (isVolumeStorageClient(storage)) {
      // A @skyward/storage client: its keys, resolved now (strings or functions), for the passwd file.
      // Checked before the pool started too; resolved again here, since functions may answer anew.
      const keys = await storage.resolveCredentials();
      const problem = volumeClientKeysProblem(keys, options.provider);
      if (problem) throw refuse(index, "storage", problem);
      return {
        volume,
        url: storage.endpoint.replace(/\/+$/, ""),
        pathStyle: storage.pathStyle ?? false,
        passwd: keys ? `${keys.accessKey}:${keys.secretKey}` : undefined,
        region: storage.region,
      };
    }
    if (!storage) {
      if (options.provider !== "aws")
        throw refuse(
          index,
          "storage",
          `the ${options.provider} provider has no object store of its own: give storage: { endpoint, accessKeyEnv, secretKeyEnv }`,
        );
      return {
        volume,
        url: `https://s3.${options.region}.amazonaws.com`,
        pathStyle: false,
        passwd: undefined,
        region: options.region,
      };
    }
    const read = (field: "accessKeyEnv" | "secretKeyEnv"): string | undefined => {
      const name = storage[field];
      if (name === undefined) return undefined;
      const value = env[name];
      if (value === undefined || value === "")
        throw refuse(
          index,
          `storage.${field}`,
          `the environment variable ${name} is not set on this machine`,
        );
      if (/[:\n\r\0]/.test(value) && field === "accessKeyEnv")
        throw refuse(index, `storage.${field}`, `${name} holds a character an access key cannot have`);
      if (/[\n\r\0]/.test(value))
        throw refuse(index, `storage.${field}`, `${name} holds a line break or NUL`);
      return value;
    };
    const accessKey = read("accessKeyEnv");
    const secretKey = read("secretKeyEnv");
    if ((accessKey === undefined) !== (secretKey === undefined))
      throw refuse(
        index,
        accessKey === undefined ? "storage.accessKeyEnv" : "storage.secretKeyEnv",
        "expected accessKeyEnv and secretKeyEnv together",
      );
    return {
      volume,
      url: storage.endpoint.replace(/\/+$/, ""),
      pathStyle: storage.pathStyle ?? false,
      passwd:
        accessKey === undefined ? (options.provider === "aws" ? undefined : "") : `${accessKey}:${secretKey}`,
      region: storage.region,
    };
  }
}

/** The passwd files to upload (0600) beside the script, relative to the root. Secrets. */
export function volumePasswdFiles(
  mounts: readonly VolumeMount[],
): { target: string; content: string; mode: number }[] {
  return mounts.flatMap((mount, index) =>
    mount.passwd ? [{ target: `volumes/${index}.passwd`, content: `${mount.passwd}\n`, mode: 0o600 }] : [],
  );
}

/**
 * The shell command that unmounts the given mount points (lazily, so a busy one goes as soon as it
 * is free). Self-contained: it runs after the worker, when the root may be gone already.
 */
export function unmountVolumesCommand(mountPoints: readonly string[], sudo: boolean): string {
  if (mountPoints.length === 0) return ":";
  const prefix = sudo ? 'S=""; [ "$(id -u)" -eq 0 ] || S="sudo -n"; ' : 'S=""; ';
  return `${prefix}for m in ${mountPoints.map(shellQuote).join(" ")}; do if grep -qs " $m fuse" /proc/mounts; then $S fusermount -u -z "$m" 2>/dev/null || $S umount -l "$m" 2>/dev/null || true; fi; done`;
}

/**
 * Prints the instance's IAM role name, read from the instance metadata service with an IMDSv2 token
 * (IMDSv1 only where the token request is refused with an HTTP error), or why there is none and exits 1.
 * Run with the node's Python (the bootstrap's venv); never through a proxy.
 */
const IAM_ROLE_PROGRAM = `
import re, sys, urllib.error, urllib.request
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
base = "http://169.254.169.254/latest"
def fail(message):
    print(message)
    sys.exit(1)
def call(path, method="GET", headers=None):
    request = urllib.request.Request(base + path, method=method, headers=headers or {})
    return opener.open(request, timeout=5).read().decode()
try:
    headers = {"X-aws-ec2-metadata-token": call("/api/token", "PUT", {"X-aws-ec2-metadata-token-ttl-seconds": "300"})}
except urllib.error.HTTPError:
    headers = {}
except OSError as error:
    fail(f"the instance metadata service (169.254.169.254) cannot be reached ({error}): a volume without keys uses the instance's role")
try:
    names = call("/meta-data/iam/security-credentials/", headers=headers).split()
except urllib.error.HTTPError as error:
    if error.code != 404:
        fail(f"the instance metadata service answered HTTP {error.code} when asked for the instance's role")
    names = []
except OSError as error:
    fail(f"the instance metadata service (169.254.169.254) cannot be reached ({error})")
if not names:
    fail("this instance has no IAM role (it was launched without an instance profile): a volume without keys needs one (AWS({ instanceProfile }))")
if not re.fullmatch(r"[A-Za-z0-9+=.@_-]+", names[0]):
    fail(f"the instance's role name {names[0]!r} holds a character s3fs's options cannot carry")
print(names[0])
`;

/**
 * The volume phase's script (no secrets: it reads the passwd files): installs s3fs when missing,
 * then mounts every volume and checks it is mounted, printing why when it is not.
 */
export function renderVolumesScript(mounts: readonly VolumeMount[], root: string, sudo: boolean): string {
  const lines = [
    "#!/usr/bin/env bash",
    "# Skyward volumes: mounts the pool's buckets with s3fs before the worker starts.",
    "set -uo pipefail",
    `SKYWARD_ROOT=${shellQuote(root.replace(/\/+$/, ""))}`,
    'S=""',
    ...(sudo ? ['if [ "$(id -u)" -ne 0 ]; then S="sudo -n"; fi'] : []),
    "if ! command -v s3fs >/dev/null 2>&1; then",
    '  echo "installing s3fs (s3fs-fuse) with apt-get"',
    "  if ! command -v apt-get >/dev/null 2>&1; then",
    '    echo "s3fs is not installed and there is no apt-get to install it with: install s3fs-fuse on the image"; exit 1',
    "  fi",
    "  $S env DEBIAN_FRONTEND=noninteractive apt-get -q update >/dev/null && $S env DEBIAN_FRONTEND=noninteractive apt-get -q install -y s3fs >/dev/null ||",
    '    { echo "could not install s3fs with apt-get"; exit 1; }',
    "fi",
    'if [ ! -e /dev/fuse ]; then echo "/dev/fuse is missing: this machine (or container) cannot mount FUSE filesystems"; exit 1; fi',
    "skyward_mount() {",
    '  local index=$1 source=$2 mountpoint=$3 options=$4 log="$SKYWARD_ROOT/volumes/$1.log" i',
    '  if grep -qs " $mountpoint fuse" /proc/mounts; then $S fusermount -u -z "$mountpoint" 2>/dev/null || $S umount -l "$mountpoint" 2>/dev/null; fi',
    '  $S mkdir -p "$mountpoint" || { echo "cannot create the mount point $mountpoint"; return 1; }',
    '  if ! $S s3fs "$source" "$mountpoint" -o "$options" -o logfile="$log" -o dbglevel=warn 2>"$log.err"; then',
    '    echo "s3fs could not mount $source on $mountpoint:"; cat "$log.err" "$log" 2>/dev/null | tail -n 20; return 1',
    "  fi",
    "  for i in $(seq 1 100); do",
    '    if grep -qs " $mountpoint fuse" /proc/mounts && ls "$mountpoint" >/dev/null 2>&1; then',
    '      echo "mounted $source on $mountpoint ($options)" | sed -e "s/passwd_file=[^,]*/passwd_file=…/"; return 0',
    "    fi",
    "    sleep 0.1",
    "  done",
    '  echo "s3fs did not mount $source on $mountpoint:"; cat "$log.err" "$log" 2>/dev/null | tail -n 20; return 1',
    "}",
    'mkdir -p "$SKYWARD_ROOT/volumes"',
  ];
  if (mounts.some((mount) => mount.passwd === undefined))
    lines.push(
      "# The instance's role, asked for with an IMDSv2 token (the bootstrap's Python).",
      `if ! SKYWARD_IAM_ROLE=$("$SKYWARD_ROOT/venv/bin/python" -c ${shellQuote(IAM_ROLE_PROGRAM.trim())} 2>"$SKYWARD_ROOT/volumes/role.err"); then echo "$SKYWARD_IAM_ROLE"; tail -n 20 "$SKYWARD_ROOT/volumes/role.err"; exit 1; fi`,
    );
  mounts.forEach((mount, index) => {
    const { volume } = mount;
    const prefix = volume.prefix.replace(/^\/+|\/+$/g, "");
    const source = prefix === "" ? volume.bucket : `${volume.bucket}:/${prefix}`;
    const options = [
      `url=${mount.url}`,
      ...(mount.pathStyle ? ["use_path_request_style"] : []),
      // s3fs's `endpoint` option is the signing region.
      ...(mount.region && mount.region !== "auto" ? [`endpoint=${mount.region}`] : []),
      ...(volume.readOnly ? ["ro"] : []),
      ...(mount.passwd
        ? [`passwd_file=${root}/volumes/${index}.passwd`]
        : mount.passwd === ""
          ? ["public_bucket=1"]
          : []),
      ...(sudo ? ["allow_other"] : []),
      "mp_umask=022",
    ];
    // The worker's user owns the files (s3fs runs as root with sudo); the role's name is the node's.
    const suffix = `${mount.passwd === undefined ? ",iam_role=$SKYWARD_IAM_ROLE" : ""}${sudo ? ",uid=$(id -u),gid=$(id -g)" : ""}`;
    lines.push(
      `skyward_mount ${index} ${shellQuote(source)} ${shellQuote(volume.mount)} ${shellQuote(options.join(","))}"${suffix}" || exit 1`,
    );
  });
  lines.push('echo "skyward: volumes mounted"');
  return `${lines.join("\n")}\n`;
}
