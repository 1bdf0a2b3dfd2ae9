/**
 * The contracts' types: the provider contract (`ProviderV1` and the options of its calls), the plugin
 * contract (`PluginV1` and its hooks' options), and the resolved spec they both receive. These refer
 * to one another (a cluster carries its pool spec, a spec carries its provider and plugins), so they
 * live together; the plain data they exchange is in `provider-shapes.ts` and `plugin-shapes.ts`,
 * re-exported here, and the modules beside this one hold the code that works with them.
 */
import type { Accelerator } from "../spec/accelerators.js";
import type { Image } from "../spec/image.js";
import type { AllocationStrategy, Architecture, Nodes } from "../spec/nodes.js";
import type { Options } from "../spec/options.js";
import type { Secrets, SecretsInput } from "../spec/secrets.js";
import type { Volume } from "../spec/volume.js";
import type {
  AroundClientResult,
  LauncherTransform,
  PluginWorker,
  PluginWorkerInput,
  ShellOp,
} from "./plugin-shapes.js";
import type {
  CleanupOptions,
  CleanupResult,
  ClusterFromTags,
  ClusterIdentity,
  ClusterSsh,
  Instance,
  InterruptionNoticeSource,
  Offer,
  OffersOptions,
  ProviderCallOptions,
  ProviderCapabilities,
  RecordedCluster,
  RecordedWorker,
  WorkerEndpoint,
  WorkerLaunchRequest,
} from "./provider-shapes.js";

export type * from "./plugin-shapes.js";
export type * from "./provider-shapes.js";

// The provider contract

/**
 * What `prepare` returns: everything set up once per pool at a provider (network, keys, security
 * group…), handed back to every later call and to plugins. `Specific` is the provider's own part.
 * Calls that may also receive a cluster known only in part say so in their options' type
 * ({@link RecordedCluster}, {@link ClusterFromTags}).
 */
export interface Cluster<Specific = unknown> extends ClusterIdentity {
  /** The resolved pool spec it was prepared for. */
  readonly spec: PoolSpec;
  /** The offer it was prepared for; every instance is of this kind. */
  readonly offer: Offer;
  /** SSH defaults for its nodes; null when nodes are not reached over SSH (the `Local` provider). */
  readonly ssh: ClusterSsh | null;
  /** The provider's own data (VPC and security-group ids, key names…). */
  readonly specific: Specific;
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

/**
 * What {@link ProviderV1.getInstance} is asked. Its cluster is the prepared one, or the one a
 * detached pool recorded when `reconnectWorker` looks its instance up again.
 */
export interface GetInstanceOptions<Specific = unknown> extends ProviderCallOptions {
  /** The cluster `prepare` returned, or the one a detached pool's state file recorded. */
  readonly cluster: Cluster<Specific> | RecordedCluster<Specific>;
  /** The instance's id. */
  readonly id: string;
}

/**
 * What {@link ProviderV1.terminate} is asked. Its cluster is the prepared one, or, from `skyward
 * down`, one rebuilt from an instance's tags: terminate by instance id alone.
 */
export interface TerminateOptions<Specific = unknown> extends ProviderCallOptions {
  /** The cluster `prepare` returned, or one rebuilt from an instance's tags. */
  readonly cluster: Cluster<Specific> | ClusterFromTags;
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
 * What {@link ProviderV1.reconnectWorker} is asked: reach again the worker a detached pool left
 * running on `instance`. The cluster and the instance are as the pool's state file recorded them,
 * which holds no secret ({@link RecordedCluster}). The provider reads its credentials again (its
 * settings, the key files it wrote) to fill them in.
 */
export interface ReconnectWorkerOptions<Specific = unknown> extends ProviderCallOptions {
  /** The cluster, as the state file recorded it. */
  readonly cluster: RecordedCluster<Specific>;
  /** The node index (0 is the head). */
  readonly nodeId: number;
  /** The instance, as recorded at detach (its `ssh` without `privateKey`). */
  readonly instance: Instance;
  /** The worker to reach on it. */
  readonly worker: RecordedWorker;
  /** Seconds to keep trying to connect (e.g. SSH). */
  readonly connectTimeoutSeconds: number;
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
   * Reaches again a worker that a detached pool (`pool.detach()`) left running, for `attach` from
   * this or another process: checks that the worker still runs and returns its endpoint (SSH-reached
   * providers: `@skyward/ssh`'s `reconnectSshWorker`, which opens a tunnel to it). Starts and
   * uploads nothing. Throws `ConnectionError` when the instance or its worker is gone. Optional: a
   * provider without it cannot have its pools detached (`detach()` refuses, naming it).
   */
  reconnectWorker?(options: ReconnectWorkerOptions<Specific>): Promise<WorkerEndpoint>;

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
   * Where the node of `instance` reads its cloud's interruption notices, or null when it has none
   * (an on-demand instance, a cloud without notices). Optional: without it no notice is read, and a
   * reclaimed instance is found lost by its connection or by `getInstance`. Pure: calls nothing.
   */
  interruptionNotice?(options: SelfDestructOptions<Specific>): InterruptionNoticeSource | null;

  /**
   * Lists every instance Skyward created at this provider (found by its tags), across pools, for the
   * CLI. Optional; read-only. A provider that looks in several places (regions) and could ask only
   * some throws `IncompleteListingError` with what it found: never a shorter list as if complete.
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

// The plugin contract

/**
 * What an `aroundClient` hook gets to see of the pool. A deliberately small view, which grows as the
 * pool does.
 */
export interface PoolHandle {
  /** The pool's id. */
  readonly id: string;
  /** The resolved pool spec. */
  readonly spec: PoolSpec;
  /** How many nodes are ready now. */
  currentNodes(): number;
}

/** What an {@link ImageTransform} is given. */
export interface ImageTransformOptions {
  /** The image so far (after the plugins before this one). */
  readonly image: Image;
  /** The prepared cluster. */
  readonly cluster: Cluster;
}

/** Rewrites the image before bootstrap; returns a new image (images are frozen), e.g. via `extendImage`. */
export type ImageTransform = (options: ImageTransformOptions) => Image | Promise<Image>;

/** What a hook that only needs the prepared cluster is given. */
export interface ClusterHookOptions {
  /** The prepared cluster. */
  readonly cluster: Cluster;
}

/** Returns shell ops run on each node after the image's own bootstrap phases. */
export type BootstrapFactory = (options: ClusterHookOptions) => readonly ShellOp[];

/**
 * How many worker processes each node runs on the cluster (MIG: one per GPU instance); a positive
 * whole number. Called once the cluster is prepared, before any node starts.
 */
export type WorkersPerNode = (options: ClusterHookOptions) => number;

/**
 * The secrets a plugin's tasks need, in the spec's `secrets` shape (docs/secrets.md): called when the
 * pool starts, before any secret is read, so a value it takes from this process's environment is the
 * one set then. They join the spec's own; a name the spec names too keeps the spec's source.
 */
export type PluginSecrets = () => SecretsInput;

/** What an {@link AroundClient} hook is given. */
export interface AroundClientOptions {
  /** The pool, as far as a plugin sees it. */
  readonly pool: PoolHandle;
  /** The prepared cluster. */
  readonly cluster: Cluster;
}

/**
 * Client-side lifecycle around the pool's active life: called when the pool is ready, in plugin
 * order; what it returns is disposed when the pool ends, in reverse order.
 */
export type AroundClient = (options: AroundClientOptions) => AroundClientResult | Promise<AroundClientResult>;

/**
 * Version 1 of the plugin contract: a plain object. Every hook is optional and takes one options
 * object; a pool runs them in plugin order (`aroundClient` exits in reverse). Build one with
 * `Plugin.create(name).with…()` or write it as a literal:
 *
 * ```ts
 * import type { PluginV1 } from "@skyward/core/contract";
 *
 * export const quiet = (): PluginV1 => ({
 *   specificationVersion: "v1",
 *   name: "quiet",
 *   transform: ({ image }) => ({ ...image, env: { ...image.env, PYTHONWARNINGS: "ignore" } }),
 * });
 * ```
 */
export interface PluginV1 {
  /** The contract version; always `"v1"` here. */
  readonly specificationVersion: "v1";
  /** The plugin's name: lower case, `[a-z0-9][a-z0-9._-]*`; unique within a pool. */
  readonly name: string;
  /** Rewrites the image before bootstrap. */
  readonly transform?: ImageTransform | undefined;
  /** Adds shell ops after the image's bootstrap phases. */
  readonly bootstrap?: BootstrapFactory | undefined;
  /** Rewrites the worker's launch command. */
  readonly launcher?: LauncherTransform | undefined;
  /** Client-side lifecycle around the pool's active life. */
  readonly aroundClient?: AroundClient | undefined;
  /** How many worker processes each node runs; one when no plugin of the pool sets it (at most one may). */
  readonly workersPerNode?: WorkersPerNode | undefined;
  /** The secrets its tasks need (a token): sent to the workers as the spec's `secrets` are, never written. */
  readonly secrets?: PluginSecrets | undefined;
  /**
   * The worker side: a Python module defining any of `decorate`, `around_app` and `around_process`,
   * where to ship it from, and the JSON config handed to its hooks.
   */
  readonly worker?: PluginWorkerInput | PluginWorker | undefined;
  /**
   * True when the plugin's workers on different nodes connect to one another directly (a distributed
   * training rendezvous on the head's `privateIp`, then peer to peer): torch, JAX, Accelerate, Keras.
   * Such a plugin is refused on more than one node of a provider whose instances share no network
   * ({@link ProviderCapabilities.peerNetwork}), instead of hanging at the rendezvous.
   */
  readonly peerNetwork?: boolean | undefined;
}

// The resolved spec

/** A validated spec: every field resolved. `provider` undefined means the built-in `Local` provider. */
export interface Spec {
  readonly provider: Provider | undefined;
  readonly accelerator: Accelerator | null;
  readonly nodes: Nodes;
  readonly vcpus: number | undefined;
  readonly memoryGb: number | undefined;
  readonly diskGb: number | undefined;
  readonly architecture: Architecture | undefined;
  readonly allocation: AllocationStrategy;
  readonly image: Image;
  readonly region: string | undefined;
  readonly maxHourlyCost: number | undefined;
  readonly ttl: number;
  readonly volumes: readonly Volume[];
  readonly plugins: readonly PluginV1[];
  /**
   * Where each secret's value comes from (names and sources, never a value read from the client's
   * environment or files); absent or empty: none.
   */
  readonly secrets?: Secrets | undefined;
}

/**
 * The resolved pool specification the rest of the system consumes: one spec merged with the pool's
 * options, every field present.
 */
export interface PoolSpec extends Spec {
  readonly worker: Options["worker"];
  readonly provisionTimeout: number;
  readonly sshTimeout: number;
  readonly bootstrapTimeout: number;
  readonly sshRetryInterval: number;
  readonly provisionRetryDelay: number;
  readonly maxProvisionAttempts: number;
  readonly autoscaleCooldown: number;
  readonly autoscaleIdleTimeout: number;
  readonly reconcileTickInterval: number;
  readonly defaultComputeTimeout: number;
  readonly cluster: boolean;
  readonly retryOnInterruption: number;
  /** The accelerator's canonical name for provider matching, or undefined for CPU-only. */
  readonly acceleratorName: string | undefined;
  /** Accelerators per node (0 for CPU-only). */
  readonly acceleratorCount: number;
  /** Requested memory per accelerator in GB, 0 when unspecified or CPU-only. */
  readonly acceleratorMemoryGb: number;
}
