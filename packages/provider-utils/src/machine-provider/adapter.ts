/**
 * What a provider writes to sit on the machine-provider base ({@link defineMachineProvider}): the
 * calls of its API (offers, create, get, list a page, delete), how its machines look to Skyward
 * (`describe`, the tag codec) and its documented facts (rate limits live in its HTTP client, see
 * `pacing.ts`; errors are classified where they are made, see `errors.ts`). Everything else — the
 * market loop and price cap, idempotent create, delete until gone, lists that fail loudly, the SSH
 * key pair and worker — is the base's.
 */
import type {
  CleanupOptions,
  CleanupResult,
  Cluster,
  Instance,
  Offer,
  OfferQuery,
  PoolSpec,
  ProviderCapabilities,
  RecordedCluster,
  ShellOp,
} from "@skyward/core/contract";

/** What every cluster of the base keeps in {@link Cluster.specific}: its SSH key pair. */
export interface MachineClusterData {
  /** The public key put on every machine. */
  readonly publicKey: string;
  /** The private key's path on this machine (mode 0600). */
  readonly identityFile: string;
}

/** One page of the API's list of machines. */
export interface MachinePage<Machine> {
  /** The machines of the page, as the adapter parsed them (an answer it does not know must have thrown). */
  readonly machines: readonly Machine[];
  /** The cursor of the next page (a page number, a token); undefined on the last page. */
  readonly next?: string | undefined;
}

/** How a Skyward machine carries its tags and its unique name, wherever the API keeps them. */
export interface MachineTagCodec<Machine> {
  /**
   * The machine's unique name for node `index` of the cluster (`skyward-1a2b3c4d-0--pool1`): sent on
   * create, and what an idempotent create looks for after a lost answer. Unique per cluster and index.
   */
  name(cluster: Pick<Cluster, "id" | "poolId">, index: number): string;
  /** The name a machine has (as `name` gave it); undefined when the API shows none. */
  nameOf(machine: Machine): string | undefined;
  /** Skyward's tags the machine carries (from its name, labels, description…); empty when it is not Skyward's. */
  read(machine: Machine): Readonly<Record<string, string>>;
}

/** One machine to create, as the base asks the adapter. */
export interface MachineCreateRequest<ClusterData extends MachineClusterData> {
  readonly cluster: Cluster<ClusterData>;
  /** The market: spot (interruptible) or on demand. */
  readonly spot: boolean;
  /** The hourly price of that market in the offer; the base checked it against `maxHourlyCost`. */
  readonly hourlyPrice: number;
  /** The machine's unique name ({@link MachineTagCodec.name}). */
  readonly name: string;
  /** Skyward's tags to store on the machine (`skyward:cluster`, `skyward:pool`, `skyward:spot`…). */
  readonly tags: Readonly<Record<string, string>>;
  /**
   * The same for every attempt at this machine: for an API that takes an idempotency token
   * ({@link MachineAdapter.idempotencyToken}), sending it makes a retried create return the first.
   */
  readonly idempotencyKey: string;
  /**
   * Seconds after boot by which a worker must have started, else the machine deletes itself (the
   * client died between create and bootstrap): the pool's `ttl + sshTimeout + bootstrapTimeout`. An
   * adapter with `bootWatchdog: "boot-command"` puts it in the machine's boot command.
   */
  readonly watchdogSeconds: number;
  readonly signal: AbortSignal;
}

/** What one delete did, per machine, as the API answered (a batch delete reads each). */
export type MachineDeleteOutcome =
  /** The API accepted the delete. */
  | "deleted"
  /** The machine was already gone (or discontinued): counted as deleted. */
  | "gone"
  /** The API refused for now (still provisioning): the base tries again. */
  | "busy"
  /** Refused for good; `error` says why. */
  | { readonly error: unknown };

/** How the adapter deletes: one machine a call, or a batch with a result per machine. */
export type MachineDeleter =
  | {
      /** Deletes one machine; resolves when accepted, throws its API error otherwise (classified by kind). */
      readonly one: (id: string, signal: AbortSignal) => Promise<void>;
    }
  | {
      /** Deletes several machines in one call; a result for every id asked (a 207 read entry by entry). */
      readonly batch: (
        ids: readonly string[],
        signal: AbortSignal,
      ) => Promise<ReadonlyMap<string, MachineDeleteOutcome>>;
    };

/** Where the instance's self-destruct and boot watchdog come from. */
export type MachineBootWatchdog =
  /** The machine runs a command at boot (cloud-init, a start command): the adapter arms the watchdog there. */
  | "boot-command"
  /** The API lets the machine run nothing at boot: why, for the README; the pool's TTL and `skyward down` are the guard. */
  | { readonly none: string };

/** What {@link MachineAdapter.prepare} receives. */
export interface MachinePrepareContext {
  readonly spec: PoolSpec;
  readonly offer: Offer;
  readonly poolId: string;
  /** The new cluster's id. */
  readonly clusterId: string;
  /** The SSH key pair of the provider (made if missing). */
  readonly keys: MachineClusterData;
  readonly signal: AbortSignal;
}

/** What {@link MachineAdapter.describe} receives beside the machine. */
export interface MachineDescribeContext<ClusterData extends MachineClusterData> {
  /** The private key to reach the machine with, when known (a `skyward down` may have none). */
  readonly identityFile: string | undefined;
  /**
   * The cluster it belongs to, when there is one (not for `listInstances`); as a detached pool
   * recorded it (no `spec`) when `reconnectWorker` looks the machine up again.
   */
  readonly cluster?: Cluster<ClusterData> | RecordedCluster<ClusterData> | undefined;
}

/**
 * A machine-renting API, as the base needs it. `Machine` is the adapter's parsed machine (what `get`,
 * `create` and `listPage` return), `ClusterData` what its clusters keep.
 */
export interface MachineAdapter<Machine, ClusterData extends MachineClusterData = MachineClusterData> {
  /** The provider's name in offers and tags (`"tensordock"`). */
  readonly name: string;
  /** The provider as people write it (`"TensorDock"`). */
  readonly label: string;
  readonly capabilities: ProviderCapabilities;
  /** Every setting the offers depend on, so offers cached for one configuration never serve another. */
  readonly cacheKey?: string;
  /** The prefix of cluster ids (`"skyward"` makes `skyward-1a2b3c4d`); default `"skyward"`. */
  readonly clusterIdPrefix?: string;
  /** The SSH login user of the machines; `sudo` is used unless it is `root`. */
  readonly sshUser: string;
  /** The key pair's file name in the keys directory (`"tensordock_ed25519"`). */
  readonly keyName: string;
  /** The keys directory; default `$SKYWARD_HOME/keys`. */
  readonly keysDirectory?: string | undefined;
  /** Whether `create` sends {@link MachineCreateRequest.idempotencyKey} so the API dedupes a retry; else the base finds a machine by name first. */
  readonly idempotencyToken: boolean;
  readonly bootWatchdog: MachineBootWatchdog;
  /** Tries of one machine's create (a lost answer, a 5xx); default 3. */
  readonly maxCreateAttempts?: number;
  /** Creates of one cluster in all; default 50: a pool that keeps failing stops asking. */
  readonly maxCreatesPerCluster?: number;
  /** The first wait before deleting again a machine the API refused to delete for now, ms; default 5000 (doubling, at most 30 s). */
  readonly deleteRetryDelayMs?: number;
  /** How long to keep trying to delete refused machines, ms; default 10 minutes. */
  readonly deleteTimeoutMs?: number;
  /**
   * How long a machine whose create answer was lost is looked for in the list before the pool stops
   * asking that market, when a retry of its create was refused (the lost create may have taken the
   * last capacity), ms; default 60 s.
   */
  readonly lostCreateWaitMs?: number;
  /**
   * What the machines are called (`"pods"`) when they are containers without FUSE: the spec's volumes
   * are then refused (`refuseVolumesWithoutFuse`) before `prepare` creates anything.
   */
  readonly containersWithoutFuse?: string;

  /** Fails early (a `ConfigurationError`) when the credentials are missing; called by `prepare`. */
  checkCredentials(): void;
  /** The offers for the query, priced; the base filters them by hardware, allocation and budget. */
  offers(query: OfferQuery, signal: AbortSignal): Promise<readonly Offer[]>;
  /** What the cluster keeps beside its key pair (a registered key's id); default the key pair alone. */
  prepare?(context: MachinePrepareContext): Promise<ClusterData>;
  /** Whether the cluster may use the spot market (an offer or setting may forbid it); default yes. */
  spotAllowed?(cluster: Cluster<ClusterData>): boolean;
  /** Creates one machine; throws its API error when refused (capacity, quota and price move to the next market). */
  create(request: MachineCreateRequest<ClusterData>): Promise<Machine>;
  /** The machine by id, or null when the API says it does not exist. */
  get(id: string, signal: AbortSignal): Promise<Machine | null>;
  /** One page of every machine of the account (`cursor` undefined: the first). Must throw on an answer it does not know. */
  listPage(cursor: string | undefined, signal: AbortSignal): Promise<MachinePage<Machine>>;
  readonly delete: MachineDeleter;
  /** Whether `id` could be one of the API's ids; others are never sent (nothing of ours to find or delete). Default all. */
  isMachineId?(id: string): boolean;
  /**
   * Whether the API is already deleting the machine (teardown leaves it be). Default no: every
   * machine of the cluster is deleted, stopped ones too — a stopped machine still bills its disk.
   */
  isBeingDeleted?(machine: Machine): boolean;
  /** The machine's id. */
  idOf(machine: Machine): string;
  readonly tags: MachineTagCodec<Machine>;
  /** The machine as Skyward sees it; the base fills in the offer id and the market's price when absent. */
  describe(machine: Machine, context: MachineDescribeContext<ClusterData>): Instance;
  /** The shell operation a worker runs to end the machine's billing through the API (delete, not shut down). */
  selfDestruct(instance: Instance, cluster: Cluster<ClusterData>): ShellOp;
  /** Forgets a machine once it is deleted or gone (the `sshAddress` test seam's stand-in of it). */
  forget?(id: string): void;
  /** Removes what the cluster made beside its machines (a registered key), after they are gone. */
  teardown?(cluster: Cluster<ClusterData>, signal: AbortSignal): Promise<void>;
  /** The provider's `cleanup` (`skyward cleanup`): what pools left beside machines; absent when `prepare` makes nothing. */
  cleanup?(options: CleanupOptions): Promise<CleanupResult>;
}
