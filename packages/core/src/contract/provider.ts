/**
 * The provider contract, version `v1`: plain object types a provider package implements (AWS,
 * RunPod, Vast.ai, SSH hosts, this machine…), plus the runtime check spec validation uses. No
 * provider lives here.
 *
 * The pool drives a provider in this order: `offers` → `prepare` → `provision` (then `getInstance`
 * until each instance runs) → … → `terminate` → `teardown`. The CLI uses `listInstances`, `terminate`
 * and `cleanup` without a pool. Every call that can hang receives an
 * `AbortSignal` and must give up promptly when it aborts.
 */
import type { Duplex } from "node:stream";
import { z } from "zod";
import type { Image } from "../spec/image.js";
import type { AllocationStrategy, Architecture, PoolSpec } from "../spec/spec.js";
import type { LaunchCommand } from "./launch-command.js";
import type { PluginBootstrapOp } from "./plugin.js";

/**
 * One shell operation run on a node by `sh` (a command line, or a short script). Used for plugin
 * bootstrap ops and a provider's self-destruct command.
 */
export type ShellOp = string;

/** The version of the provider contract this package implements. */
export const PROVIDER_SPECIFICATION_VERSION = "v1";

/** Options passed to every provider call that may wait. */
export interface ProviderCallOptions {
  /** Aborted when the pool gives up (deadline, user abort, shutdown); the call must then reject promptly. */
  readonly signal: AbortSignal;
  /** The pool the call serves (for `prepare`: to tag what it creates and fill `Cluster.poolId`). */
  readonly poolId?: string;
  /** Reports progress of a long step (`upload`, `venv`, `pip`, …) so the pool can show it; optional to call. */
  readonly progress?: (report: ProgressReport) => void;
}

/** One step of a long provider call (a bootstrap phase), as {@link ProviderCallOptions.progress} reports it. */
export interface ProgressReport {
  /** The step's name (`upload`, `apt`, `python`, `venv`, `pip`, `plugins`, `worker`…). */
  readonly phase: string;
  /** Where it is. */
  readonly status: "started" | "finished" | "failed";
  /** How long it took, milliseconds, when finished or failed (else the pool measures it). */
  readonly durationMs?: number;
  /** A short detail to show (never a secret). */
  readonly detail?: string;
}

/** Where the worker's Python lives on a node, known once the environment is set up there. */
export interface WorkerEnvironment {
  /** The Python that runs the worker (inside the virtual environment, when there is one). */
  readonly pythonBin: string;
  /** The virtual environment, or undefined when the system interpreter is used as it is. */
  readonly venvDir: string | undefined;
  /** The worker's entry script (`…/skyward_worker.py`). */
  readonly workerScript: string;
  /** The node's private address. */
  readonly privateIp: string;
  /**
   * The node's Skyward root directory, where its bootstrap ran and plugins' bootstrap ops saw
   * `$SKYWARD_ROOT` (files such as accelerate's config live there). Optional: when missing, the
   * venv's parent directory.
   */
  readonly root?: string;
}

/** What the pool asks {@link ProviderV1.launchWorker} to start. */
export interface WorkerLaunchRequest {
  /** The node index (0 is the head). */
  readonly nodeId: number;
  /** The image after the plugins' transforms: what the node's environment must provide. */
  readonly image: Image;
  /** Builds the launch command once the provider knows the node's environment; plugins' launchers applied. */
  readonly command: (environment: WorkerEnvironment) => LaunchCommand;
  /** Environment variables for the worker (the image's env); may hold secrets: never logged. */
  readonly env: Readonly<Record<string, string>>;
  /** The pool's secret token the worker demands in the handshake (`SKYWARD_TOKEN`); never logged or put in a command line. */
  readonly token: string;
  /** Seconds allowed until the worker listens (bootstrap included). */
  readonly timeoutSeconds: number;
  /** Seconds allowed to reach the node (an SSH connection, retried until then). */
  readonly connectTimeoutSeconds: number;
  /** Seconds between attempts to reach the node. */
  readonly connectRetryIntervalSeconds: number;
  /**
   * The plugins' bootstrap ops, in plugin order: run once the Python environment is ready and before
   * the worker starts, as the SSH bootstrap's `plugins` phase runs them (`renderPluginOpsScript`).
   */
  readonly pluginOps?: readonly PluginBootstrapOp[];
  /** The worker process's own output lines (not task output), for the pool's log. */
  readonly onOutput?: (stream: "stdout" | "stderr", line: string) => void;
  /** Called once if the worker process exits after it was started. */
  readonly onExit?: (code: number | null, signal: string | null) => void;
}

/** How the pool reaches a started worker from this machine. */
export interface WorkerEndpoint {
  /** The host to connect to (loopback for `Local`), or, with `openStream`, where the worker is, for messages. */
  readonly host: string;
  /** The port it listens on (on its node's loopback when reached through `openStream`). */
  readonly port: number;
  /** The worker's process id on its node. */
  readonly pid: number;
  /** Opens a byte stream to the worker when it is not reached by TCP at `host:port` (an SSH tunnel). */
  readonly openStream?: () => Promise<Duplex>;
  /**
   * The token the worker demands, when it is not the pool's: a released worker of an earlier pool,
   * started from the same code and settings, that was picked up again. A secret: never logged.
   */
  readonly token?: string;
  /** The node's environment was already set up (its bootstrap was skipped). */
  readonly warm?: boolean;
  /** Lets go of what the provider holds to reach the worker (an SSH connection); called once, when the pool is done with the node. */
  readonly close?: () => void;
}

/** What the pool asks a provider for: the per-node requirements of one spec. */
export interface OfferQuery {
  /** The accelerator per node, or null for CPU-only nodes. */
  readonly accelerator: {
    /** Canonical accelerator name (`A100`, `H100`, `T4`, …). */
    readonly name: string;
    /** Accelerators per node (>= 1). */
    readonly count: number;
    /** Minimum memory per accelerator, GB; undefined when any variant will do. */
    readonly memoryGb?: number;
  } | null;
  /** Minimum vCPUs per node. */
  readonly vcpus?: number;
  /** Minimum memory per node, GB. */
  readonly memoryGb?: number;
  /** Minimum disk per node, GB. */
  readonly diskGb?: number;
  /** Required CPU architecture; undefined when either will do. */
  readonly architecture?: Architecture;
  /**
   * How nodes are bought. A provider returns offers usable under it: with `"spot"` only offers with a
   * spot price, with `"on-demand"` only offers with an on-demand price, otherwise both kinds.
   */
  readonly allocation: AllocationStrategy;
  /** The region to look in; undefined means the provider's default. */
  readonly region?: string;
  /** Price cap, USD per node per hour; offers above it (under the allocation) are left out. */
  readonly maxHourlyCost?: number;
}

/** One kind of node a provider can supply, at a price. Plain data: it may be shown, logged and cached. */
export interface Offer {
  /** Identifies the offer within its provider; stable enough to pass back to `prepare`. */
  readonly id: string;
  /** The provider's name (`aws`, `runpod`, …). */
  readonly provider: string;
  /** The provider's own name for the machine type (`p4d.24xlarge`, `NVIDIA A100 80GB PCIe`). */
  readonly instanceType: string;
  /** The accelerators on one node, or null for CPU-only. */
  readonly accelerator: {
    /** Canonical accelerator name. */
    readonly name: string;
    /** Accelerators per node. */
    readonly count: number;
    /** Memory per accelerator, GB. */
    readonly memoryGb: number;
  } | null;
  /** vCPUs per node. */
  readonly vcpus: number;
  /** Memory per node, GB. */
  readonly memoryGb: number;
  /** Disk per node, GB, when the offer fixes it. */
  readonly diskGb?: number;
  /** CPU architecture. */
  readonly architecture: Architecture;
  /** The region (or zone, or datacenter) the offer is in. */
  readonly region: string;
  /** Spot (interruptible) price, USD per node per hour; null when there is no spot option. */
  readonly spotPrice: number | null;
  /** On-demand price, USD per node per hour; null when there is no on-demand option. */
  readonly onDemandPrice: number | null;
  /** The unit the provider bills in; prices are still quoted per hour. */
  readonly billingUnit?: "second" | "minute" | "hour";
  /** When the prices were current, as an ISO 8601 date or date-time. */
  readonly pricesAsOf: string;
  /** The provider's own data about the offer (image ids, machine ids…), passed back to it untouched. */
  readonly specific: Readonly<Record<string, unknown>>;
}

/** How the pool reaches nodes over SSH, as far as the cluster fixes it. */
export interface ClusterSsh {
  /** The login user on every node. */
  readonly user: string;
  /** The SSH port, when the same on every node (instances may override it). */
  readonly port?: number;
  /** The private key's path on this machine. Never logged. */
  readonly identityFile?: string;
  /** The private key itself, PEM/OpenSSH format, when it is not in a file. A secret: never logged. */
  readonly privateKey?: string;
  /** Whether bootstrap needs `sudo` for system changes (apt, mounts) because the user is not root. */
  readonly sudo: boolean;
}

/**
 * What `prepare` returns: everything set up once per pool at a provider (network, keys, security
 * group…), handed back to every later call and to plugins. `Specific` is the provider's own part.
 */
export interface Cluster<Specific = unknown> {
  /** Identifies the cluster within its provider; also tagged on its instances. */
  readonly id: string;
  /** The provider's name. */
  readonly provider: string;
  /** The pool this cluster serves. */
  readonly poolId: string;
  /** The region the instances are created in. */
  readonly region: string;
  /** The resolved pool spec it was prepared for. */
  readonly spec: PoolSpec;
  /** The offer it was prepared for; every instance is of this kind. */
  readonly offer: Offer;
  /** SSH defaults for its nodes; null when nodes are not reached over SSH (the `Local` provider). */
  readonly ssh: ClusterSsh | null;
  /** The provider's own data (VPC and security-group ids, key names…). */
  readonly specific: Specific;
}

/** The states an instance moves through. */
export type InstanceStatus = "pending" | "running" | "stopping" | "terminated";

/** SSH coordinates of one instance. */
export interface InstanceSsh {
  /** Host name or address to connect to. */
  readonly host: string;
  /** Port to connect to. */
  readonly port: number;
  /** The login user. */
  readonly user: string;
  /** The private key itself, when not given by `identityFile` or the cluster. A secret: never logged. */
  readonly privateKey?: string;
  /** The private key's path on this machine. */
  readonly identityFile?: string;
  /**
   * The host key's fingerprint (`SHA256:…`, as `ssh-keygen -l` prints it) when the provider knows
   * it; the connection is refused when the server presents another key.
   */
  readonly hostKeyFingerprint?: string;
  /**
   * What its host key is recorded under for trust on first use: `"instance"` (default: the provider
   * and instance id, for cloud machines, whose addresses are handed to new machines with new keys)
   * or `"address"` (host and port, as OpenSSH does, for machines that keep their address, like the
   * SSH provider's hosts).
   */
  readonly hostKeyScope?: "instance" | "address";
  /** Skyward's directory on the node (environment, runtime, code). Default `/opt/skyward`. */
  readonly root?: string;
}

/** One machine a provider created for a cluster. */
export interface Instance {
  /** The provider's id for the instance. */
  readonly id: string;
  /** Its current state. */
  readonly status: InstanceStatus;
  /** Public address, or null when it has none (yet). */
  readonly publicIp: string | null;
  /** Private address other nodes reach it on, or null until known. */
  readonly privateIp: string | null;
  /** How to reach it over SSH; null while pending, or when nodes are not reached over SSH. */
  readonly ssh: InstanceSsh | null;
  /** True for spot (interruptible) capacity. */
  readonly spot: boolean;
  /** What it costs, USD per hour; null when unknown. */
  readonly hourlyPrice: number | null;
  /** The {@link Offer.id} it was created from. */
  readonly offerId: string;
  /** When it was created, milliseconds since the epoch. */
  readonly createdAt: number;
  /** Tags/labels on it; Skyward's own include the cluster and pool ids. */
  readonly tags: Readonly<Record<string, string>>;
}

/** One resource a pool shares at a provider (a security group, a key pair, a key file…), as {@link ProviderV1.cleanup} reports it. */
export interface PoolResource {
  /** The pool it belongs to (its `skyward:pool` tag, else its cluster id). */
  readonly poolId: string;
  /** What it is, in words: `security group`, `key pair`, `key file`. */
  readonly kind: string;
  /** Its id or name at the provider, or its path on this machine. Never a secret. */
  readonly id: string;
}

/** A resource {@link ProviderV1.cleanup} had to leave, and why. */
export interface LeftPoolResource extends PoolResource {
  /** Why it is still there, in one line (e.g. `instance i-… is still shutting down`). */
  readonly reason: string;
}

/** What to clean up, and how long to wait for instances that are still ending. */
export interface CleanupOptions extends ProviderCallOptions {
  /**
   * The pools whose shared resources go: pool ids (as `skyward instances` shows them: the
   * `skyward:pool` tag, else the cluster id), or `"all"` for every pool Skyward created at this provider.
   */
  readonly pools: readonly string[] | "all";
  /**
   * How long to wait, seconds, for a pool's instances that are still shutting down (and for what they
   * hold to be let go) before its resources are reported as left. Default 0: no waiting.
   */
  readonly waitSeconds?: number;
}

/** What {@link ProviderV1.cleanup} did. */
export interface CleanupResult {
  /** The resources it removed. */
  readonly removed: readonly PoolResource[];
  /** The resources it found but left, each with its reason. */
  readonly left: readonly LeftPoolResource[];
}

/**
 * What a provider can do itself. Where a flag is false the core does without, or does it another way
 * (e.g. volumes mounted by the bootstrap script instead of the provider).
 */
export interface ProviderCapabilities {
  /** It can create spot (interruptible) instances. */
  readonly spot: boolean;
  /** It can attach the spec's volumes itself; otherwise the bootstrap mounts them. */
  readonly volumes: boolean;
  /** It accepts custom base images (AMIs, container images). */
  readonly images: boolean;
  /** It can stop instances and resume them later. */
  readonly stopResume?: boolean;
  /** The most instances it supports in one cluster, when limited (a fixed set of SSH hosts, this machine). */
  readonly maxInstances?: number;
  /**
   * How long the core may cache its offers on disk: `"marketplace"` (an hour: prices move),
   * `"catalogue"` (a day), or nothing (not cached).
   */
  readonly offerCache?: "marketplace" | "catalogue";
}

/** What {@link ProviderV1.offers} is asked. */
export interface OffersOptions extends ProviderCallOptions {
  /** The per-node requirements of one spec. */
  readonly query: OfferQuery;
}

/** What {@link ProviderV1.prepare} is asked. */
export interface PrepareOptions extends ProviderCallOptions {
  /** The resolved pool spec. */
  readonly spec: PoolSpec;
  /** The offer chosen for it. */
  readonly offer: Offer;
}

/** What a call about one prepared cluster is given. */
export interface ClusterCallOptions<Specific = unknown> extends ProviderCallOptions {
  /** The cluster `prepare` returned. */
  readonly cluster: Cluster<Specific>;
}

/** What {@link ProviderV1.provision} is asked. */
export interface ProvisionOptions<Specific = unknown> extends ClusterCallOptions<Specific> {
  /** How many new instances (>= 1). */
  readonly count: number;
}

/** What {@link ProviderV1.getInstance} is asked. */
export interface GetInstanceOptions<Specific = unknown> extends ClusterCallOptions<Specific> {
  /** The instance's id. */
  readonly id: string;
}

/** What {@link ProviderV1.terminate} is asked. */
export interface TerminateOptions<Specific = unknown> extends ClusterCallOptions<Specific> {
  /** The instances to terminate. */
  readonly ids: readonly string[];
}

/** What {@link ProviderV1.selfDestruct} is given. */
export interface SelfDestructOptions<Specific = unknown> {
  /** The instance's cluster. */
  readonly cluster: Cluster<Specific>;
  /** The instance that ends itself. */
  readonly instance: Instance;
}

/** What {@link ProviderV1.launchWorker} is asked: start the worker of one node. */
export interface LaunchWorkerOptions<Specific = unknown>
  extends ClusterCallOptions<Specific>,
    WorkerLaunchRequest {
  /** The running instance to start it on. */
  readonly instance: Instance;
}

/**
 * Version 1 of the provider contract. A provider is a plain object; `Specific` is the type of its
 * {@link Cluster.specific} data. Every method takes one options object, so a field can be added
 * without breaking a provider.
 *
 * Errors: capacity problems (no machine free, quota, spot market empty) throw `NoCapacityError`;
 * other failures of the provider's API throw `ProvisionError` (with `isRetryable` set when trying
 * again may help); an abort rejects with the signal's reason. All from `@skyward/core`.
 */
export interface ProviderV1<Specific = unknown> {
  /** The contract version; always `"v1"` here. */
  readonly specificationVersion: "v1";
  /** Short lower-case name (`aws`, `runpod`, `local`), used in offers, tags, events and errors. */
  readonly name: string;
  /** What it can do itself. */
  readonly capabilities: ProviderCapabilities;
  /**
   * Distinguishes differently configured instances of the same provider in caches (e.g. its region
   * or account id). Never a secret.
   */
  readonly cacheKey?: string;

  /**
   * Lists the offers matching `query`, in any order. Read-only: creates nothing.
   * Returns an empty array (does not throw) when nothing matches.
   */
  offers(options: OffersOptions): Promise<readonly Offer[]>;

  /**
   * Sets up what the pool's instances share (network, security group, key pair…) for `offer`, and
   * returns the cluster later calls receive. Idempotent for the same pool: resources left by an
   * earlier attempt are reused, not duplicated. Throws `ProvisionError` when setup fails; whatever it
   * created must then be removed, or be removable by `teardown`.
   */
  prepare(options: PrepareOptions): Promise<Cluster<Specific>>;

  /**
   * Requests `count` (>= 1) new instances of the cluster's offer and returns those created, possibly
   * still `pending`; the pool polls `getInstance` until they run. May return fewer than `count` when
   * capacity runs short (the pool asks again or tries another offer); throws `NoCapacityError` when
   * none could be created, `ProvisionError` for other failures. Instances are tagged with the cluster
   * and pool ids, so `teardown` and `listInstances` can find them.
   */
  provision(options: ProvisionOptions<Specific>): Promise<readonly Instance[]>;

  /**
   * The current state of one instance, or null when the provider no longer knows it (deleted, or
   * preempted and gone). Throws `ProvisionError` only when the provider cannot be asked. The pool
   * polls until every instance is `running`, so report `running` only once `launchWorker` can start a
   * worker on it (an instance reached over SSH: once it has its `ssh` coordinates).
   */
  getInstance(options: GetInstanceOptions<Specific>): Promise<Instance | null>;

  /**
   * Sets up the node's environment, starts the worker on it, and returns how to reach it. Providers
   * whose nodes are reached over SSH use `@skyward/ssh`'s `launchSshWorker` (connect, upload,
   * bootstrap, start, tunnel); the built-in `Local` starts a process on this machine.
   */
  launchWorker(options: LaunchWorkerOptions<Specific>): Promise<WorkerEndpoint>;

  /**
   * Terminates the given instances. Idempotent: ids already terminated or unknown are not errors,
   * and calling it twice is harmless. Resolves once termination is requested for every id.
   */
  terminate(options: TerminateOptions<Specific>): Promise<void>;

  /**
   * Removes what `prepare` created, after the instances are terminated (terminating any the cluster
   * still has). Idempotent: resources already gone are not errors.
   */
  teardown(options: ClusterCallOptions<Specific>): Promise<void>;

  /**
   * The shell operation a worker runs, on its own node, to end that node when its TTL expires with no
   * client attached (e.g. `sudo shutdown -h now` on an instance set to terminate on shutdown, or a call
   * to the provider's API). Pure: builds a string, calls nothing.
   */
  selfDestruct(options: SelfDestructOptions<Specific>): ShellOp;

  /**
   * Lists every instance Skyward created at this provider (found by its tags), across pools, for the
   * CLI. Optional; read-only.
   */
  listInstances?(options: ProviderCallOptions): Promise<readonly Instance[]>;

  /**
   * Removes the shared resources `prepare` created (security groups, key pairs, their local key files…)
   * for pools that have no live instance left — what a pool whose client died leaves behind, since its
   * `teardown` never ran. Needs no cluster object: the resources are found by Skyward's tags, so the CLI
   * (`skyward down`) can call it. Never terminates an instance: a pool with an instance that is still
   * pending, running or stopped keeps its resources, reported in `left`; instances still shutting down
   * are waited for up to `waitSeconds`, then what they hold is reported in `left` too. Only what
   * Skyward created goes, never resources the user supplied in the provider's settings. Idempotent:
   * what is already gone is neither an error nor reported. Throws `ProvisionError` only when the
   * provider cannot be asked. Optional: providers whose pools share nothing at the provider (each
   * instance standing alone) leave it out.
   */
  cleanup?(options: CleanupOptions): Promise<CleanupResult>;
}

/** A provider: the current contract version. */
export type Provider = ProviderV1;

/**
 * The price an offer is ranked by under an allocation, as the pool ranks offers: the spot price for
 * `"spot"`, the on-demand price for `"on-demand"`, otherwise the lower of the two; null when the offer
 * cannot be bought that way.
 */
export function offerPrice(
  offer: Pick<Offer, "spotPrice" | "onDemandPrice">,
  allocation: AllocationStrategy,
): number | null {
  if (allocation === "spot") return offer.spotPrice;
  if (allocation === "on-demand") return offer.onDemandPrice;
  const prices = [offer.spotPrice, offer.onDemandPrice].filter((price): price is number => price !== null);
  return prices.length > 0 ? Math.min(...prices) : null;
}

/**
 * Whether to ask for spot capacity first for an offer under an allocation: for `"spot"` and
 * `"spot-if-available"` when the offer has a spot price, for `"cheapest"` when spot is not dearer than
 * on-demand (or on-demand has no price); never for `"on-demand"`.
 */
export function prefersSpot(
  allocation: AllocationStrategy,
  offer: Pick<Offer, "spotPrice" | "onDemandPrice">,
): boolean {
  if (offer.spotPrice === null) return false;
  if (allocation === "spot" || allocation === "spot-if-available") return true;
  if (allocation === "cheapest")
    return offer.onDemandPrice === null || offer.spotPrice <= offer.onDemandPrice;
  return false;
}

/** The query the pool sends to `offers` for a resolved pool spec: its per-node requirements. */
export function offerQuery(spec: PoolSpec): OfferQuery {
  return {
    accelerator: spec.accelerator
      ? {
          name: spec.accelerator.name,
          count: spec.accelerator.count,
          ...(spec.accelerator.memoryGb ? { memoryGb: spec.accelerator.memoryGb } : {}),
        }
      : null,
    ...(spec.vcpus !== undefined ? { vcpus: spec.vcpus } : {}),
    ...(spec.memoryGb !== undefined ? { memoryGb: spec.memoryGb } : {}),
    ...(spec.diskGb !== undefined ? { diskGb: spec.diskGb } : {}),
    ...(spec.architecture !== undefined ? { architecture: spec.architecture } : {}),
    allocation: spec.allocation,
    ...(spec.region !== undefined ? { region: spec.region } : {}),
    ...(spec.maxHourlyCost !== undefined ? { maxHourlyCost: spec.maxHourlyCost } : {}),
  };
}

/**
 * The cluster handed to `terminate` for an instance found by `listInstances`, when there is no cluster
 * object (`skyward down`): only what the instance's tags say — `id` (`skyward:cluster`), `provider`,
 * `poolId` (`skyward:pool`) and `region` (`skyward:region`). Its `spec`, `offer` and `specific` are
 * absent, so a provider with `listInstances` must terminate by instance id alone; the conformance
 * suite of `@skyward/testing` checks that it does.
 */
export function clusterFromInstance(providerName: string, instance: Instance): Cluster {
  const tags = instance.tags;
  const detached = {
    id: tags["skyward:cluster"] ?? "",
    provider: providerName,
    poolId: tags["skyward:pool"] ?? "",
    region: tags["skyward:region"] ?? "",
    spec: undefined,
    offer: undefined,
    ssh: null,
    specific: undefined,
  };
  return Object.freeze(detached) as unknown as Cluster;
}

const requiredMethods = [
  "offers",
  "prepare",
  "provision",
  "getInstance",
  "launchWorker",
  "terminate",
  "teardown",
  "selfDestruct",
];

/**
 * Why `value` is not a usable provider, in words, or undefined when it is one. Explains a wrong
 * contract version, a missing name or capabilities, and missing methods.
 */
export function whyNotProvider(value: unknown): string | undefined {
  if (typeof value !== "object" || value === null)
    return `expected a provider object, received ${describe(value)}`;
  const candidate = value as Record<string, unknown>;
  const version = candidate.specificationVersion;
  const label = typeof candidate.name === "string" ? `provider "${candidate.name}"` : "the provider";
  if (version === undefined) return `${label} has no specificationVersion`;
  if (version !== PROVIDER_SPECIFICATION_VERSION) {
    return `${label} implements specification version ${JSON.stringify(version)}, but this version of @skyward/core supports "${PROVIDER_SPECIFICATION_VERSION}"`;
  }
  if (typeof candidate.name !== "string" || candidate.name === "") return `${label} has no name`;
  const capabilities = candidate.capabilities;
  if (typeof capabilities !== "object" || capabilities === null) return `${label} has no capabilities object`;
  const missing = requiredMethods.filter((method) => typeof candidate[method] !== "function");
  if (missing.length > 0)
    return `${label} is missing method${missing.length > 1 ? "s" : ""} ${missing.join(", ")}`;
  for (const method of ["listInstances", "cleanup"]) {
    if (candidate[method] !== undefined && typeof candidate[method] !== "function")
      return `${label} has a ${method} that is not a function`;
  }
  return undefined;
}

function describe(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "string") return `the string ${JSON.stringify(value)}`;
  if (typeof value === "function") return "a function";
  if (typeof value === "object") return "an object";
  if (value === undefined) return "nothing";
  return `${typeof value} ${String(value)}`;
}

/** True when `value` implements the `v1` provider contract (checked by shape, not by class). */
export function isProvider(value: unknown): value is Provider {
  return whyNotProvider(value) === undefined;
}

const providerExpectation = 'expected a provider (e.g. sky.Local(), AWS(...)) with specificationVersion "v1"';

/**
 * Validates a provider field of a spec. Its issue messages say what was expected and, for a provider
 * object built for another contract version, which version it has and which is supported.
 */
export const providerSchema = z.custom<Provider>(isProvider, {
  error: (issue) => {
    const reason = whyNotProvider(issue.input);
    const input = issue.input;
    if (typeof input === "object" && input !== null && "specificationVersion" in input) {
      return reason ? `${providerExpectation}; ${reason}` : providerExpectation;
    }
    return `${providerExpectation}, received ${describe(input)}`;
  },
});
