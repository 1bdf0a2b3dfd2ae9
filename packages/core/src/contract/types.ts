/**
 * The contracts' types in one module: the provider contract (`ProviderV1` and what its methods take and
 * return), the plugin contract (`PluginV1` and its hooks' options), and the resolved spec they both
 * receive. They refer to one another (a cluster carries its pool spec, a spec carries its provider and
 * plugins), so they live together; the modules beside this one hold the code that works with them.
 */
import type { Duplex } from "node:stream";
import type { Accelerator } from "../spec/accelerators.js";
import type { Image } from "../spec/image.js";
import type { AllocationStrategy, Architecture, Nodes } from "../spec/nodes.js";
import type { Options } from "../spec/options.js";
import type { Volume } from "../spec/volume.js";
import type { LaunchCommand, LaunchContext } from "./launch-command.js";

// The provider contract

/**
 * One shell operation run on a node by `sh` (a command line, or a short script). Used for plugin
 * bootstrap ops and a provider's self-destruct command.
 */
export type ShellOp = string;

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
    /**
     * The form factor asked for, as the catalog spells it (`SXM`, `PCIe`, `NVL`, …); undefined when
     * any will do. A provider that can tell form factors apart returns only offers of this one; offers
     * whose form factor it cannot tell may be returned unlabelled (the pool keeps them and says so).
     */
    readonly formFactor?: string;
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
    /**
     * The accelerator's form factor, as the catalog spells it (`SXM`, `PCIe`, `NVL`, …), when the
     * provider's data says it; undefined when unknown. The pool drops offers whose form factor differs
     * from the one asked for, and keeps unlabelled ones with a note (see `docs/providers.md`).
     */
    readonly formFactor?: string;
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

/** What names a cluster: the fields every cluster a provider receives has, whatever its origin. */
export interface ClusterIdentity {
  /** Identifies the cluster within its provider; also tagged on its instances. */
  readonly id: string;
  /** The provider's name. */
  readonly provider: string;
  /** The pool this cluster serves. */
  readonly poolId: string;
  /** The region the instances are created in. */
  readonly region: string;
}

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

/**
 * A cluster as a detached pool's state file recorded it, which holds no secret: no `spec`, no
 * `ssh.privateKey`, and in `specific` no field named like a key, password, secret or token. What
 * {@link ProviderV1.reconnectWorker} receives (and, through it, `getInstance`); the provider reads
 * its credentials again (its settings, the key files it wrote).
 */
export interface RecordedCluster<Specific = unknown> extends ClusterIdentity {
  /** Not recorded. */
  readonly spec?: undefined;
  /** The offer it was prepared for. */
  readonly offer: Offer;
  /** SSH defaults for its nodes, without `privateKey`. */
  readonly ssh: ClusterSsh | null;
  /** The provider's own data, without the fields named like credentials. */
  readonly specific: Specific;
}

/**
 * A cluster rebuilt from an instance's tags ({@link clusterFromInstance}), when there is no cluster
 * object (`skyward down`): its identity only. `terminate` may receive one, so a provider with
 * `listInstances` terminates by instance id alone.
 */
export interface ClusterFromTags extends ClusterIdentity {
  /** Unknown: not in the tags. */
  readonly spec?: undefined;
  /** Unknown: not in the tags. */
  readonly offer?: undefined;
  /** Unknown: not in the tags. */
  readonly ssh: null;
  /** Unknown: not in the tags. */
  readonly specific?: undefined;
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
  /**
   * Whether a cluster's instances reach one another on any port at their `privateIp`, as the
   * rendezvous of a distributed-training plugin needs (the head's address and port, then peer to peer):
   * `"private"` (the default when absent) — always, on a private network; `"accelerated"` — only
   * instances with an accelerator (RunPod's global networking needs an NVIDIA GPU); `"none"` — never
   * (machines rented separately, each behind its own NAT). A spec of more than one node whose plugins
   * need a peer network ({@link PluginV1.peerNetwork}) is refused at validation, before anything starts,
   * when its provider cannot give one.
   */
  readonly peerNetwork?: PeerNetwork;
  /**
   * Seconds its instances may take to be running with an address, when the pool's options leave
   * `provisionTimeout` unset: a provider that pulls a container image before SSH answers (RunPod) needs
   * more than the default 300.
   */
  readonly provisionTimeout?: number;
}

/** How a provider's instances of one cluster reach one another: see {@link ProviderCapabilities.peerNetwork}. */
export type PeerNetwork = "private" | "accelerated" | "none";

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

/**
 * Where a node reads its cloud's interruption notices, as {@link ProviderV1.interruptionNotice}
 * names it. The worker polls it and tells the client, which stops giving the node tasks, moves its
 * queued tasks and starts a replacement at once.
 */
export interface InterruptionNoticeSource {
  /**
   * `"aws-imds"`: AWS's instance metadata service, version 2 — the spot instance action
   * (`/latest/meta-data/spot/instance-action`) and the rebalance recommendation
   * (`/latest/meta-data/events/recommendations/rebalance`).
   */
  readonly kind: "aws-imds";
  /** The service's base URL as the node reaches it (`http://169.254.169.254` on EC2). */
  readonly endpoint: string;
  /** Seconds between polls. Default 5 (AWS gives two minutes' notice). */
  readonly intervalSeconds?: number;
}

/** What {@link ProviderV1.launchWorker} is asked: start the worker of one node. */
export interface LaunchWorkerOptions<Specific = unknown>
  extends ClusterCallOptions<Specific>,
    WorkerLaunchRequest {
  /** The running instance to start it on. */
  readonly instance: Instance;
}

/** Where a running worker was when its pool was detached: what {@link ProviderV1.reconnectWorker} reaches again. */
export interface RecordedWorker {
  /** The port it listens on, on its node's loopback. */
  readonly port: number;
  /** Its process id on its node. */
  readonly pid: number;
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

/** What a {@link LauncherTransform} is given. */
export interface LauncherOptions {
  /** The command so far (after the plugins before this one). */
  readonly command: LaunchCommand;
  /** Where and how the worker runs. */
  readonly context: LaunchContext;
}

/** Rewrites the worker's launch command, e.g. wrapping it with `accelerate launch`. */
export type LauncherTransform = (options: LauncherOptions) => LaunchCommand;

/**
 * How many worker processes each node runs on the cluster (MIG: one per GPU instance); a positive
 * whole number. Called once the cluster is prepared, before any node starts.
 */
export type WorkersPerNode = (options: ClusterHookOptions) => number;

/** What an `aroundClient` hook returns: something to exit when the pool ends, or nothing. */
// biome-ignore lint/suspicious/noConfusingVoidType: lets `async ({ pool }) => { register(pool); }` be a hook.
export type AroundClientResult = AsyncDisposable | Disposable | undefined | void;

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

/** A JSON value: what a plugin may hand to its worker module. */
export type JsonValue =
  | string
  | number
  | boolean
  | null
  | readonly JsonValue[]
  | { readonly [key: string]: JsonValue };

/** The worker side of a plugin, as given to {@link Plugin.withWorker}. */
export interface PluginWorkerInput {
  /** The Python module (dotted name) defining any of `decorate`, `around_app`, `around_process`. */
  module: string;
  /**
   * Where to ship the module from: an absolute path, or a `file:` URL (`new URL("../python/x",
   * import.meta.url)`), of the module's top-level package directory or `.py` file. Omit it when the
   * module is installed on the workers some other way (e.g. by the plugin's image transform).
   */
  path?: string | URL;
  /** JSON-serialisable settings handed to the module's hooks. Default `{}`. */
  config?: { readonly [key: string]: JsonValue };
}

/** The worker side of a plugin, validated. */
export interface PluginWorker {
  /** The Python module's dotted name. */
  readonly module: string;
  /** The absolute path it ships from, or undefined when it is not shipped. */
  readonly path: string | undefined;
  /** Settings handed to its hooks (a frozen deep copy). */
  readonly config: { readonly [key: string]: JsonValue };
}

/** One plugin's worker module, as {@link workerModules} lists it for the bootstrap and the worker. */
export interface WorkerModule extends PluginWorker {
  /** The plugin's name. */
  readonly plugin: string;
}

/** The client-side hooks, as named in {@link PluginError.hook}. */
export type PluginHook = "transform" | "bootstrap" | "launcher" | "aroundClient" | "workersPerNode";

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

/** One plugin bootstrap op and the plugin it comes from, so a failure can name the plugin. */
export interface PluginBootstrapOp {
  /** The plugin's name. */
  readonly plugin: string;
  /** The shell op, run as `bash -c op`. */
  readonly op: ShellOp;
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
