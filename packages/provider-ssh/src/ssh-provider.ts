/**
 * The `SSH` provider: a fixed set of machines people already have (their own GPU boxes),
 * reached over SSH, one node per host. It provisions nothing and never shuts a machine down: ending
 * a node stops its worker, and its self-destruct (when a released worker's TTL runs out) stops the
 * worker and removes what the pool left in its Skyward root directory, keeping the environment
 * (virtual environment, wheel cache, uv) so a later pool with the same image starts warm.
 */
import type { Accelerator } from "@skyward/core";
import {
  acceleratorFromName,
  acceleratorSchema,
  type Cluster,
  ConfigurationError,
  ConnectionError,
  type Instance,
  NoCapacityError,
  type Offer,
  type OfferQuery,
  offerFormFactorFit,
  type ProviderV1,
  parseInput,
  type WorkerEndpoint,
} from "@skyward/core/contract";
import { cleanNodeRootCommand, DEFAULT_NODE_ROOT, launchSshWorker, reconnectSshWorker } from "@skyward/ssh";
import { z } from "zod";

/** One machine of an `SSH` provider. */
export interface SshHostInput {
  /** Address or name to connect to. */
  host: string;
  /** SSH port. Default 22. */
  port?: number;
  /** Login user. Default `root`. */
  user?: string;
  /** The private key itself (OpenSSH or PEM text). A secret: never logged. */
  privateKey?: string;
  /** Path of the private key file. */
  identityFile?: string;
  /** The host key's `SHA256:…` fingerprint; without it the key is trusted on first use. */
  hostKeyFingerprint?: string;
  /** Skyward's directory on the host (environment, runtime, code). Default `/opt/skyward`. */
  root?: string;
  /** The address other nodes reach this one on, when it differs from `host`. */
  privateIp?: string;
}

/** Settings of the `SSH` provider. */
export interface SshSettings {
  /** The machines, one node each. */
  hosts: readonly SshHostInput[];
  /**
   * The accelerator every host has, so specs asking for it match; omit for CPU hosts. Its form factor,
   * when given (`sky.accelerators.H100({ formFactor: "PCIe" })`), labels the offer: a spec asking for
   * another gets no offer; without one a spec's form factor is not checked (the pool says so).
   */
  accelerator?: Accelerator;
  /**
   * What a host costs you, USD per hour (a rented box, power), for `pool.cost()` and
   * `options.budget`. Default 0: your machines are free to Skyward.
   */
  hourlyPrice?: number;
  /**
   * vCPUs every host has (the smallest host's), so a spec's `vcpus` can be matched. Undeclared, a
   * spec that asks for vCPUs is refused (the hosts' hardware is not known before connecting).
   */
  vcpus?: number;
  /** Memory every host has, GB (the smallest host's), for a spec's `memoryGb`; undeclared, such a spec is refused. */
  memoryGb?: number;
  /** Free disk every host has for Skyward's root, GB, for a spec's `diskGb`; undeclared, such a spec is refused. */
  diskGb?: number;
  /** The hosts' CPU architecture, matched against a spec's `architecture`. Default `"x86_64"`. */
  architecture?: "x86_64" | "arm64";
  /** A name for where the hosts are, matched against a spec's `region`. Default `"ssh"`. */
  region?: string;
}

/** A validated host of the `SSH` provider. */
export interface SshHost {
  readonly host: string;
  readonly port: number;
  readonly user: string;
  readonly privateKey: string | undefined;
  readonly identityFile: string | undefined;
  readonly hostKeyFingerprint: string | undefined;
  readonly root: string;
  readonly privateIp: string;
}

/** What the `SSH` provider keeps per cluster: the hosts it may use. */
export interface SshClusterData {
  readonly hosts: readonly SshHost[];
}

const hostSchema = z
  .strictObject({
    host: z.string().min(1, { message: "expected a host name or address" }),
    port: z.number().int().min(1).max(65_535, { message: "expected a port from 1 to 65535" }).default(22),
    user: z.string().min(1, { message: "expected a user name" }).default("root"),
    privateKey: z.string().min(1, { message: "expected the private key's text" }).optional(),
    identityFile: z.string().min(1, { message: "expected the private key's path" }).optional(),
    hostKeyFingerprint: z
      .string()
      .regex(/^SHA256:[A-Za-z0-9+/]{43}=?$/, {
        message: 'expected a fingerprint like "SHA256:…" as ssh-keygen -l prints it',
      })
      .optional(),
    root: z
      .string()
      .refine((value) => value.startsWith("/") && value !== "/", {
        message: "expected an absolute directory other than /",
      })
      .default(DEFAULT_NODE_ROOT),
    privateIp: z.string().min(1).optional(),
  })
  .superRefine((value, context) => {
    if (value.privateKey === undefined && value.identityFile === undefined) {
      context.addIssue({
        code: "custom",
        path: ["privateKey"],
        message: "expected privateKey or identityFile",
      });
    }
  })
  .transform(
    (value): SshHost =>
      Object.freeze({
        host: value.host,
        port: value.port,
        user: value.user,
        privateKey: value.privateKey,
        identityFile: value.identityFile,
        hostKeyFingerprint: value.hostKeyFingerprint,
        root: value.root.replace(/\/+$/, ""),
        privateIp: value.privateIp ?? value.host,
      }),
  );

const settingsSchema = z.strictObject({
  hosts: z
    .array(hostSchema, { error: "expected an array of hosts" })
    .min(1, { message: "expected at least one host" })
    .superRefine((hosts, context) => {
      const seen = new Set<string>();
      hosts.forEach((host, index) => {
        const key = `${host.host}:${host.port}`;
        if (seen.has(key))
          context.addIssue({ code: "custom", path: [index, "host"], message: `duplicate host ${key}` });
        seen.add(key);
      });
    }),
  accelerator: acceleratorSchema.optional(),
  hourlyPrice: z
    .number({ error: "expected a price in USD per hour, >= 0" })
    .min(0, { message: "expected a price in USD per hour, >= 0" })
    .refine(Number.isFinite, { message: "expected a price in USD per hour, >= 0" })
    .default(0),
  vcpus: z
    .number()
    .int({ message: "expected a whole number of vCPUs >= 1" })
    .min(1, { message: "expected a whole number of vCPUs >= 1" })
    .optional(),
  memoryGb: z.number().positive({ message: "expected the hosts' memory in GB, > 0" }).optional(),
  diskGb: z.number().positive({ message: "expected the hosts' free disk in GB, > 0" }).optional(),
  architecture: z.enum(["x86_64", "arm64"], { error: 'expected "x86_64" or "arm64"' }).default("x86_64"),
  region: z.string().min(1, { message: "expected a region name" }).default("ssh"),
});

/** Settings as validated: what the hosts are declared to have. */
type Declared = z.output<typeof settingsSchema>;

/**
 * Why the declared hosts cannot be shown to meet `query` (a spec field they do not declare, or
 * declare less of), or undefined when they meet it. The hosts' hardware is not probed: it is what
 * the settings say.
 */
function unmetRequirement(declared: Declared, query: OfferQuery): string | undefined {
  const minimum = (field: "vcpus" | "memoryGb" | "diskGb", unit: string) => {
    const wanted = query[field];
    if (wanted === undefined) return undefined;
    const have = declared[field];
    if (have === undefined)
      return `the spec asks for ${field} >= ${wanted}${unit}, but SSH({ ${field} }) declares none: set it to what every host has`;
    if (have < wanted)
      return `the spec asks for ${field} >= ${wanted}${unit}, the hosts have ${have}${unit} (SSH({ ${field} }))`;
    return undefined;
  };
  const wantedMemory = query.accelerator?.memoryGb;
  if (wantedMemory !== undefined && declared.accelerator) {
    const have = declared.accelerator.memoryGb;
    if (have === undefined)
      return `the spec asks for accelerator.memoryGb >= ${wantedMemory} GB, but SSH({ accelerator }) declares no memory: give the accelerator's memory`;
    if (have < wantedMemory)
      return `the spec asks for accelerator.memoryGb >= ${wantedMemory} GB, the hosts' ${declared.accelerator.name} has ${have} GB`;
  }
  if (query.architecture !== undefined && query.architecture !== declared.architecture)
    return `the spec asks for architecture "${query.architecture}", the hosts are "${declared.architecture}" (SSH({ architecture }))`;
  if (query.region !== undefined && query.region !== declared.region)
    return `the spec asks for region "${query.region}", the hosts are in "${declared.region}" (SSH({ region }))`;
  return minimum("vcpus", "") ?? minimum("memoryGb", " GB") ?? minimum("diskGb", " GB");
}

function instanceId(host: SshHost): string {
  return `ssh:${host.user}@${host.host}:${host.port}`;
}

function instanceFor(
  host: SshHost,
  cluster: Pick<Cluster, "id" | "offer">,
  createdAt: number,
  hourlyPrice: number,
): Instance {
  return Object.freeze({
    id: instanceId(host),
    status: "running" as const,
    publicIp: host.host,
    privateIp: host.privateIp,
    ssh: Object.freeze({
      host: host.host,
      port: host.port,
      user: host.user,
      ...(host.privateKey !== undefined ? { privateKey: host.privateKey } : {}),
      ...(host.identityFile !== undefined ? { identityFile: host.identityFile } : {}),
      ...(host.hostKeyFingerprint !== undefined ? { hostKeyFingerprint: host.hostKeyFingerprint } : {}),
      // Your own machines keep their addresses: their keys are known by address, as OpenSSH knows them.
      hostKeyScope: "address" as const,
      root: host.root,
    }),
    spot: false,
    hourlyPrice,
    offerId: cluster.offer.id,
    createdAt,
    tags: Object.freeze({ "skyward:cluster": cluster.id }),
  });
}

/**
 * Your own machines as a pool, one node per host.
 *
 * @example
 * ```ts
 * import * as sky from "@skyward/core";
 * import { SSH } from "@skyward/provider-ssh";
 *
 * await using pool = await sky.compute({
 *   provider: SSH({ hosts: [{ host: "10.0.0.5", user: "ubuntu", identityFile: "~/.ssh/id_ed25519" }] }),
 * });
 * ```
 *
 * @throws {ConfigurationError} naming the field for invalid settings (no hosts, a host twice, no key).
 */
export function SSH(settings: SshSettings): ProviderV1<SshClusterData> {
  return build(parseInput(settingsSchema, settings, "SSH"));
}

function build(declared: Declared): ProviderV1<SshClusterData> {
  const { hosts, accelerator, hourlyPrice } = declared;
  const inUse = new Set<string>();
  const byId = new Map(hosts.map((host) => [instanceId(host), host]));
  const indexOf = new Map(hosts.map((host, index) => [instanceId(host), index]));
  /**
   * A key that cannot be used (an unreadable `identityFile`, a `privateKey` that is not one) is
   * refused by the connection at a field of its own (`identityFile`): named here at its host's
   * (`SSH.hosts[1].identityFile`), so that the user knows which entry to fix.
   */
  const atHost = async (id: string, connecting: Promise<WorkerEndpoint>): Promise<WorkerEndpoint> => {
    try {
      return await connecting;
    } catch (error) {
      const index = indexOf.get(id);
      if (index === undefined || !ConfigurationError.isInstance(error)) throw error;
      throw new ConfigurationError({
        issues: error.issues.map((issue) => ({
          ...issue,
          path: `SSH.hosts[${index}]${issue.path ? `.${issue.path}` : ""}`,
        })),
        cause: error,
      });
    }
  };

  return {
    specificationVersion: "v1",
    name: "ssh",
    capabilities: Object.freeze({ spot: false, maxInstances: hosts.length }),

    async offers({ query }): Promise<readonly Offer[]> {
      if (query.allocation === "spot") return [];
      if (query.accelerator) {
        if (
          !accelerator ||
          accelerator.name !== query.accelerator.name ||
          accelerator.count < query.accelerator.count ||
          offerFormFactorFit({ accelerator }, query) === "differs"
        )
          return [];
      }
      const unmet = unmetRequirement(declared, query);
      if (unmet !== undefined) {
        throw new NoCapacityError({
          attempts: [{ provider: "ssh", reason: unmet }],
          message: `SSH hosts cannot be shown to meet the spec: ${unmet}`,
        });
      }
      return [
        Object.freeze({
          id: "ssh",
          provider: "ssh",
          instanceType: accelerator ? `${accelerator.count}x ${accelerator.name} host` : "host",
          accelerator: accelerator
            ? {
                name: accelerator.name,
                count: accelerator.count,
                memoryGb: accelerator.memoryGb ?? 0,
                // The hosts' form factor, when their accelerator setting names one.
                ...(accelerator.formFactor === undefined ? {} : { formFactor: accelerator.formFactor }),
              }
            : null,
          // Undeclared sizes are unknown: 0, and a spec asking for them is refused above.
          vcpus: declared.vcpus ?? 0,
          memoryGb: declared.memoryGb ?? 0,
          ...(declared.diskGb !== undefined ? { diskGb: declared.diskGb } : {}),
          architecture: declared.architecture,
          region: declared.region,
          spotPrice: null,
          onDemandPrice: hourlyPrice,
          pricesAsOf: new Date().toISOString().slice(0, 10),
          specific: Object.freeze({ hosts: hosts.length }),
        }),
      ];
    },

    async prepare({ spec, offer, poolId }): Promise<Cluster<SshClusterData>> {
      return Object.freeze({
        id: `ssh-${Math.random().toString(36).slice(2, 10)}`,
        provider: "ssh",
        poolId: poolId ?? "",
        region: declared.region,
        spec,
        offer,
        ssh: null,
        specific: Object.freeze({ hosts }),
      });
    },

    async provision({ cluster, count }): Promise<readonly Instance[]> {
      const free = cluster.specific.hosts.filter((host) => !inUse.has(instanceId(host)));
      if (free.length === 0) {
        throw new NoCapacityError({
          attempts: [
            { provider: "ssh", reason: `all ${hosts.length} hosts are in use; asked for ${count} more` },
          ],
        });
      }
      const now = Date.now();
      return free.slice(0, count).map((host) => {
        inUse.add(instanceId(host));
        // These settings' host, with its key: an attached pool's cluster comes from a state file,
        // which keeps no key.
        return instanceFor(byId.get(instanceId(host)) ?? host, cluster, now, hourlyPrice);
      });
    },

    async getInstance({ cluster, id }): Promise<Instance | null> {
      const host = byId.get(id);
      return host && inUse.has(id) ? instanceFor(host, cluster, Date.now(), hourlyPrice) : null;
    },

    launchWorker: (options) => atHost(options.instance.id, launchSshWorker(options)),

    async reconnectWorker(options) {
      // A detached pool's node: the host (with its key) comes from these settings, not the state file.
      const host = byId.get(options.instance.id);
      if (!host) {
        throw new ConnectionError({
          host: options.instance.id,
          node: options.nodeId,
          message: `the detached pool ran on ${options.instance.id}, which is not among this SSH provider's hosts`,
        });
      }
      const endpoint = await atHost(
        options.instance.id,
        reconnectSshWorker({
          ...options,
          instance: instanceFor(host, options.cluster, options.instance.createdAt, hourlyPrice),
        }),
      );
      inUse.add(options.instance.id);
      return endpoint;
    },

    async terminate({ ids }): Promise<void> {
      // The hosts are the user's: nothing to destroy. A released worker waits out its TTL for a client
      // to reattach (a next pool with the same code does), then stops itself and cleans up.
      for (const id of ids) inUse.delete(id);
    },

    async teardown(): Promise<void> {
      // Nothing was created at a provider: the hosts stay as they are.
    },

    selfDestruct({ instance }): string {
      const root = byId.get(instance.id)?.root ?? DEFAULT_NODE_ROOT;
      // Run by the worker itself when its TTL runs out, and it exits right after: what the pool left
      // is removed, the environment is kept for a later pool to start warm. The machine itself is
      // never shut down.
      return cleanNodeRootCommand(root);
    },
  };
}

/** `identity_file` → `identityFile`, for the host tables of `skyward.toml`. */
function camelKeys(table: unknown): unknown {
  if (typeof table !== "object" || table === null || Array.isArray(table)) return table;
  return Object.fromEntries(
    Object.entries(table).map(([key, value]) => [
      key.replace(/_([a-z0-9])/g, (_, letter: string) => letter.toUpperCase()),
      value,
    ]),
  );
}

/**
 * Creates the provider from a `[providers.NAME]` table of `skyward.toml` (`type = "ssh"`), its keys
 * already camelCased by the core. Each `[[providers.NAME.hosts]]` table's keys are camelCased here
 * (`identity_file` → `identityFile`), and `accelerator` may be a name, as in a pool
 * (`accelerator = "A100:2"`).
 *
 * ```toml
 * [providers.lab]
 * type = "ssh"
 * accelerator = "RTX_4090"
 *
 * [[providers.lab.hosts]]
 * host = "10.0.0.5"
 * user = "ubuntu"
 * identity_file = "~/.ssh/id_ed25519"
 * ```
 */
export function createProviderFromConfig(settings: Record<string, unknown>): ProviderV1<SshClusterData> {
  const { accelerator, hosts } = settings;
  return build(
    parseInput(settingsSchema, {
      ...settings,
      hosts: Array.isArray(hosts) ? hosts.map(camelKeys) : hosts,
      ...(typeof accelerator === "string"
        ? { accelerator: acceleratorFromName(accelerator, "accelerator") }
        : {}),
    }),
  );
}
