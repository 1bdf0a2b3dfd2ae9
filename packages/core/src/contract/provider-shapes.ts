/**
 * What the provider contract's calls exchange: offers and the query they answer, instances and their
 * SSH coordinates, the cluster's identity and the partial clusters some calls receive, workers'
 * launch requests and endpoints, capabilities, and the resources `cleanup` reports. Plain data with
 * no reference back to the contracts (`types.ts`), so these shapes import nothing of them.
 */
import type { Duplex } from "node:stream";
import type { Image } from "../spec/image.js";
import type { AllocationStrategy, Architecture } from "../spec/nodes.js";
import type { LaunchCommand } from "./launch-command.js";
import type { PluginBootstrapOp } from "./plugin-shapes.js";

/** Options passed to every provider call that may wait. */
export interface ProviderCallOptions {
  /** Aborted when the pool gives up (deadline, user abort, shutdown); the call must then reject promptly. */
  readonly signal: AbortSignal;
  /** The pool the call serves (for `prepare`: to tag what it creates and fill `Cluster.poolId`). */
  readonly poolId?: string;
  /**
   * Reports progress of a long step so the pool can show it; optional to call. `launchWorker`'s are
   * bootstrap phases (`upload`, `venv`, `pip`, …: `bootstrap.phase` events); `provision`'s and
   * `getInstance`'s while the pool waits for instances (a scheduler's `queue`) are `provision.progress`.
   */
  readonly progress?: (report: ProgressReport) => void;
}

/** One step of a long provider call (a bootstrap phase, a queue), as {@link ProviderCallOptions.progress} reports it. */
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
  /**
   * Other tokens the pool's workers hold: those of earlier pools' released workers it picked up
   * ({@link WorkerEndpoint.token}). A worker on the node holding `token` or one of these is the
   * pool's own — its node back after a partition, whose old connection may still look open there —
   * and is taken back rather than refused as another pool's. Secrets: never logged or put in a command line.
   */
  readonly ownTokens?: readonly string[];
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

/** What a provider can do, as far as the core acts on it. */
export interface ProviderCapabilities {
  /**
   * It can create spot (interruptible) instances. When false, a spec with `allocation: "spot"` gets no
   * offer from it (the attempt says why) and its offers are never asked for.
   */
  readonly spot: boolean;
  /**
   * @deprecated Read by nothing: the bootstrap mounts the spec's volumes on every SSH-reached provider.
   * Accepted so that v1 providers declaring it still type-check; leave it out.
   */
  readonly volumes?: boolean;
  /**
   * @deprecated Read by nothing: a provider's base image is one of its own settings (an AMI, a
   * container image). Accepted so that v1 providers declaring it still type-check; leave it out.
   */
  readonly images?: boolean;
  /**
   * @deprecated Read by nothing: no pool stops or resumes instances. Accepted so that v1 providers
   * declaring it still type-check; leave it out.
   */
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
   * `"gcp-metadata"`: Compute Engine's metadata server — a Spot VM's preemption
   * (`/computeMetadata/v1/instance/preempted`) and a host maintenance that stops the VM
   * (`/computeMetadata/v1/instance/maintenance-event` `TERMINATE_ON_HOST_MAINTENANCE`).
   */
  readonly kind: "aws-imds" | "gcp-metadata";
  /**
   * The service's base URL as the node reaches it (`http://169.254.169.254` on EC2,
   * `http://metadata.google.internal` on Compute Engine).
   */
  readonly endpoint: string;
  /** Seconds between polls. Default 5 (AWS gives two minutes' notice, a GCP Spot VM about 30 s). */
  readonly intervalSeconds?: number;
}

/** Where a running worker was when its pool was detached: what {@link ProviderV1.reconnectWorker} reaches again. */
export interface RecordedWorker {
  /** The port it listens on, on its node's loopback. */
  readonly port: number;
  /** Its process id on its node. */
  readonly pid: number;
}
