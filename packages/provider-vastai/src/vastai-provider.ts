/**
 * The Vast.ai provider: GPU instances rented from the Vast.ai marketplace, on demand or interruptible
 * (a bid of the offer's spot price), reached over SSH as root — directly on the machine's public
 * address and the port mapped to 22, or through Vast.ai's SSH proxy. Every instance runs an `onstart`
 * script that arms its self-destruct (see `onstart-script.ts`).
 */
import { DockerImage, NoCapacityError } from "@skyward/core";
import {
  acceleratorFormFactor,
  type Cluster,
  canonicalAcceleratorName,
  containerImageSchema,
  type Instance,
  type Offer,
  type OfferQuery,
  offerQuery,
  type ProviderV1,
  parseInput,
} from "@skyward/core/contract";
import {
  createClusterId,
  environmentVariablesSchema,
  filterOffers,
  type HttpSettings,
  httpSettingsShape,
  keysDirectorySchema,
  type MachineEndpoint,
  type MachineRateLimits,
  type Market,
  machineErrorKind,
  marketsFor,
  type ProviderHttpAnswer,
  type ProviderHttpRequest,
  rateLimitFor,
  refuseVolumesWithoutFuse,
  requireOwnOffer,
  roundPrice,
  skywardKeysDirectory,
  skywardTags,
  sshReachableStatus,
} from "@skyward/provider-utils";
import {
  ensureSshKeyPair,
  findSshIdentityFile,
  launchSshWorker,
  reconnectThroughGetInstance,
} from "@skyward/ssh";
import { z } from "zod";
import { ONSTART_MAX_LENGTH, renderOnstartScript, SELF_DESTRUCT_COMMAND } from "./onstart-script.js";
import {
  createAnswerSchema,
  instanceAnswerSchema,
  instancesPageSchema,
  parseAnswer,
  searchAnswerSchema,
  VAST_API_URL,
  VAST_API_V1_URL,
  VAST_RATE_LIMITS,
  VastApiError,
  type VastInstance,
  type VastOffer,
  vastaiApi,
} from "./vastai-api.js";

/**
 * How long an instance may take to be running with its SSH port when the pool's options leave
 * `provisionTimeout` unset: Vast.ai pulls the image on the host before the container starts, and a
 * large CUDA image on a host that has not cached it takes 20–30 minutes.
 */
export const VASTAI_PROVISION_TIMEOUT_SECONDS = 1800;

/** An endpoint paced by Vast.ai's documented limits, as {@link VastAISettings.rateLimits} names it. */
export type VastPacedEndpoint = "search" | "get" | "list" | "destroy";

/** The image instances run when none is set: Vast.ai's base image, tagged for the host's CUDA by Vast.ai. */
export const DEFAULT_VASTAI_IMAGE = "vastai/base-image:@vastai-automatic-tag";

/** How Skyward reaches instances over SSH. */
export type VastSshMode = "direct" | "proxy";

/** Settings of the Vast.ai provider; every field is optional. */
export interface VastAISettings extends HttpSettings {
  /** The API key. Default: the `VAST_API_KEY` environment variable, read on the first API call. A secret: never logged. */
  apiKey?: string;
  /** Lowest host reliability (0–1) an offer may have. Default 0.95. */
  minReliability?: number;
  /** Only verified hosts. Default true. */
  verifiedOnly?: boolean;
  /**
   * Lowest CUDA version the host's driver must support (`cuda_max_good`). Default 12.0. A
   * {@link DockerImage} that states its CUDA (`sky.containers.cuda("12.9")`) raises it to that version.
   */
  minCuda?: number;
  /** Only hosts in this country (`"US"`, matched against the offer's geolocation); a spec's `region` does the same. */
  geolocation?: string;
  /** The bid of an interruptible instance, as a multiple of the offer's minimum bid. Default 1.2. */
  bidMultiplier?: number;
  /**
   * The Docker image: a tag or a {@link DockerImage} (`sky.containers.cuda("12.9")`). Vast.ai's SSH
   * launch mode adds `sshd` to any image; it needs `python3` for the worker. An image that states its
   * CUDA raises {@link VastAISettings.minCuda} to it. Default {@link DEFAULT_VASTAI_IMAGE}.
   */
  dockerImage?: string | DockerImage;
  /** Disk per instance, GB; a spec's `diskGb` raises it. Default 50. */
  diskGb?: number;
  /**
   * `"direct"` (default): SSH to the machine's public address and the port mapped to 22 (only offers
   * with direct ports); `"proxy"`: through Vast.ai's SSH proxy (`sshN.vast.ai`), for any offer.
   */
  ssh?: VastSshMode;
  /** Seconds without a running worker after which an instance destroys itself; 0 disables. Default 1800. */
  watchdogGraceSeconds?: number;
  /** More environment variables for every instance. */
  env?: Readonly<Record<string, string>>;
  /** Where the SSH key pair is kept. Default `$SKYWARD_HOME/keys` (`~/.skyward/keys`). */
  keysDirectory?: string;
  /** How many offers one search returns at most. Default 64. */
  searchLimit?: number;
  /**
   * The least time between two create (rent) calls, ms: Vast.ai accepts one per 4.5 s per key and
   * refuses the next ones for a penalty. Default 4950: the 4.5 s limit plus a 10 % margin, so that
   * network jitter (a call sent on time that reaches Vast.ai early) does not start the penalty.
   */
  createIntervalMs?: number;
  /** How long Vast.ai refuses create calls after one came too early, ms. Default 12000. */
  rateLimitPenaltyMs?: number;
  /**
   * The rate limits other calls are paced by, `requests` per `perSeconds`, per endpoint. Default
   * Vast.ai's documented ones: search 10 a minute, get one per 2 s, list one per 1 s, destroy one per
   * 3 s. Change them only for an API in front of Vast.ai's, or a test's fake.
   */
  rateLimits?: Partial<Readonly<Record<VastPacedEndpoint, { requests: number; perSeconds: number }>>>;
  /**
   * Skyward's directory on each instance (environment, runtime, code, the worker's pid file the
   * watchdog reads); `{id}` in it becomes the instance's id. Default `/opt/skyward`.
   */
  root?: string;
}

/** What an offer of this provider carries in {@link Offer.specific}. */
export interface VastOfferData {
  /** The ask to rent (`PUT /asks/{askId}/`). */
  readonly askId: number;
  readonly machineId: number | null;
  /** Vast.ai's name of the GPU (`RTX 4090`). */
  readonly gpuName: string;
  readonly numGpus: number;
  /** The bid placed for an interruptible instance, $/h; null when the offer takes no bids. */
  readonly bid: number | null;
  readonly reliability: number | null;
  readonly geolocation: string | null;
}

/** What a Vast.ai cluster keeps in {@link Cluster.specific}. */
export interface VastClusterData {
  /** The public key attached to each of the cluster's instances (not to the account). */
  readonly publicKey: string;
  /** The private key's path on this machine (mode 0600). */
  readonly identityFile: string;
  readonly image: string;
  readonly diskGb: number;
}

/** Vast.ai's limit on create calls per key, ms (https://docs.vast.ai/api-reference/rate-limits-and-errors). */
const VAST_CREATE_LIMIT_MS = 4500;
/**
 * The margin the default create spacing keeps over {@link VAST_CREATE_LIMIT_MS}: two calls sent 4.5 s
 * apart can arrive closer together (network jitter, a slow first request), and one early call costs the
 * 12 s penalty.
 */
const CREATE_INTERVAL_MARGIN = 0.1;

const settingsSchema = z.strictObject({
  ...httpSettingsShape,
  minReliability: z.number().min(0).max(1, { message: "expected a reliability from 0 to 1" }).default(0.95),
  verifiedOnly: z.boolean().default(true),
  minCuda: z.number().min(0).default(12),
  geolocation: z.string().min(1).optional(),
  bidMultiplier: z.number().min(1, { message: "expected a multiplier >= 1" }).default(1.2),
  dockerImage: containerImageSchema.default(DEFAULT_VASTAI_IMAGE),
  diskGb: z.number().int().min(8, { message: "expected at least 8 GB" }).default(50),
  ssh: z.enum(["direct", "proxy"]).default("direct"),
  watchdogGraceSeconds: z.number().int().min(0).default(1800),
  env: environmentVariablesSchema.default({}),
  keysDirectory: keysDirectorySchema,
  searchLimit: z.number().int().min(1).max(1000).default(64),
  createIntervalMs: z
    .number()
    .min(0, { message: "expected milliseconds >= 0" })
    .default(Math.round(VAST_CREATE_LIMIT_MS * (1 + CREATE_INTERVAL_MARGIN))),
  rateLimitPenaltyMs: z.number().min(0, { message: "expected milliseconds >= 0" }).default(12_000),
  rateLimits: z
    .partialRecord(
      z.enum(["search", "get", "list", "destroy"]),
      z.strictObject({
        requests: z.number().int().min(1, { message: "expected at least one request" }),
        perSeconds: z.number().positive({ message: "expected seconds > 0" }),
      }),
    )
    .default({}),
  root: z
    .string()
    .refine((value) => value.startsWith("/") && !/['"\\$`\s]/.test(value.replaceAll("{id}", "")), {
      message: "expected an absolute path without quotes, spaces or $",
    })
    .optional(),
});

type ParsedSettings = z.output<typeof settingsSchema>;

const NAME = "vastai";
/** The worker's pid file on a node, under Skyward's root; on the node `{id}` is its `$CONTAINER_ID`. */
function workerPidFile(settings: ParsedSettings): string {
  return `${(settings.root ?? "/opt/skyward").replaceAll("{id}", "$CONTAINER_ID")}/worker.pid`;
}
/** `<cluster id> <offer id>`, then the pool id when there is one. */
const LABEL = /^(skyward-[0-9a-f]{8}) (\S+)(?: (\S+))?$/;

/**
 * The names Vast.ai may list a catalog accelerator under (`RTX_4090` → `RTX 4090`, `RTX 4090D`…; `A100`
 * → `A100 PCIE`, `A100 SXM4`…). Over-inclusive on purpose: every result is checked again against the
 * canonical name.
 */
export function vastGpuNames(canonical: string): string[] {
  const base = canonical.replaceAll("_", " ");
  const names = new Set([base]);
  const words = base.split(" ");
  if (words.length > 1) names.add(`${words.slice(0, -1).join(" ")}${words.at(-1)}`); // "RTX 6000Ada"
  for (const suffix of ["PCIE", "SXM", "SXM2", "SXM4", "SXM5", "NVL", "D", "S", "X"]) {
    names.add(`${base} ${suffix}`);
    if (suffix.length <= 1) names.add(`${base}${suffix}`);
  }
  names.add(`Tesla ${base}`);
  names.add(`Q ${base}`);
  return [...names];
}

/**
 * The two-letter country code a region names (`"DE"`, `"Texas, US"` → `US`), the form the search's
 * `geolocation` filter takes ("Two letter country code", vast-cli's `search offers` help:
 * https://github.com/vast-ai/vast-cli/blob/master/vast.py); undefined for none.
 */
function countryCode(region: string | undefined): string | undefined {
  const code = region?.split(",").at(-1)?.trim().toUpperCase();
  return code !== undefined && /^[A-Z]{2}$/.test(code) ? code : undefined;
}

function geolocationMatches(geolocation: string | null | undefined, wanted: string): boolean {
  if (!geolocation) return false;
  const country = geolocation.split(",").at(-1)?.trim().toUpperCase();
  return (
    country === wanted.trim().toUpperCase() ||
    geolocation.trim().toUpperCase() === wanted.trim().toUpperCase()
  );
}

function sshPortMapping(instance: VastInstance): number | undefined {
  const ports = instance.ports;
  if (!ports || Array.isArray(ports)) return undefined;
  const mapping = ports["22/tcp"]?.[0]?.HostPort;
  const port = mapping === undefined ? Number.NaN : Number(mapping);
  return Number.isInteger(port) && port > 0 ? port : undefined;
}

/** The instance a Vast.ai instance is: `running`, with SSH coordinates, once it runs and its SSH port is known. */
export function instanceFromVast(
  instance: VastInstance,
  options: {
    ssh: VastSshMode;
    identityFile: string | undefined;
    spot?: boolean;
    hourlyPrice?: number | null;
    /** Skyward's directory on the instance; `{id}` becomes its id. Default: the pool's. */
    root?: string | undefined;
  },
  now = Date.now(),
): Instance {
  const actual = (instance.actual_status ?? "").toLowerCase();
  const intended = (instance.intended_status ?? "").toLowerCase();
  const status =
    actual === "running"
      ? intended === "stopped"
        ? "stopping"
        : "running"
      : ["exited", "stopped", "offline", "destroyed"].includes(actual) || intended === "stopped"
        ? "terminated"
        : "pending";
  const directPort = sshPortMapping(instance);
  const publicIp = instance.public_ipaddr?.trim() || null;
  let target: { host: string; port: number } | undefined;
  if (status === "running") {
    if (options.ssh === "direct" && publicIp && directPort) target = { host: publicIp, port: directPort };
    else if (instance.ssh_host && instance.ssh_port)
      target = { host: instance.ssh_host, port: instance.ssh_port };
  }
  const label = instance.label ?? "";
  const parsed = LABEL.exec(label);
  const tags: Record<string, string> = parsed?.[1]
    ? skywardTags({ cluster: parsed[1], offer: parsed[2] ?? "", ...(parsed[3] ? { pool: parsed[3] } : {}) })
    : {};
  if (label) tags["vastai:label"] = label;
  const ssh = target
    ? Object.freeze({
        ...target,
        user: "root",
        ...(options.identityFile !== undefined ? { identityFile: options.identityFile } : {}),
        ...(options.root !== undefined ? { root: options.root.replaceAll("{id}", String(instance.id)) } : {}),
      })
    : null;
  return Object.freeze({
    id: String(instance.id),
    status: sshReachableStatus(status, ssh),
    publicIp,
    // Instances on different machines share no private network: peers reach each other publicly.
    privateIp: publicIp,
    ssh,
    spot: options.spot ?? instance.is_bid === true,
    hourlyPrice: options.hourlyPrice !== undefined ? options.hourlyPrice : instance.dph_total,
    offerId: parsed?.[2] ?? "",
    createdAt:
      instance.start_date !== null && instance.start_date > 0 ? Math.round(instance.start_date * 1000) : now,
    tags: Object.freeze(tags),
  });
}

/** An answer refusing to rent an ask because it is gone, taken, or outbid: try another offer. */
function isCapacityProblem(error: unknown): boolean {
  const kind = machineErrorKind(error);
  return kind === "capacity" || kind === "gone" || kind === "price";
}

function isGone(error: unknown): boolean {
  return machineErrorKind(error) === "gone";
}

/** The instance id in a refused create's answer: `new_contract`, or "instance N" in its message. */
function instanceIdInRefusal(error: VastApiError): number | undefined {
  const answer = error.answer as Record<string, unknown> | undefined;
  const field = answer?.new_contract ?? answer?.instance_id;
  if (typeof field === "number" && Number.isInteger(field)) return field;
  const match = /instance\D{0,4}(\d{5,})/i.exec(error.message);
  return match?.[1] ? Number(match[1]) : undefined;
}

/** A refused bid: below the machine's current minimum (`invalid_price`). */
function isBidTooLow(error: unknown): error is VastApiError {
  return VastApiError.isInstance(error) && error.statusCode === 400 && error.kind === "price";
}

function parseSettings(settings: VastAISettings | undefined, prefix: string): ParsedSettings {
  return parseInput(settingsSchema, settings ?? {}, prefix);
}

/**
 * The CUDA version a {@link DockerImage} setting states (`sky.containers.cuda("12.9")` → 12.9), as
 * Vast.ai's `cuda_max_good` writes it; undefined for a tag string or an image that states none. Read
 * from the raw setting: the parsed one is the tag alone.
 */
function imageCuda(image: unknown): number | undefined {
  if (!DockerImage.isDockerImage(image) || image.cuda === undefined) return undefined;
  const version = Number(image.cuda);
  return Number.isFinite(version) ? version : undefined;
}

function build(settings: ParsedSettings, cudaOfImage: number | undefined): ProviderV1<VastClusterData> {
  const http = vastaiApi.createClient(settings);
  const keysDirectory = () => settings.keysDirectory ?? skywardKeysDirectory();
  /** Vast.ai's documented limits, each replaced by the setting's where one is set. */
  const limits: MachineRateLimits = {
    endpoints: Object.fromEntries(
      (
        [
          ["offers", "search"],
          ["get", "get"],
          ["list", "list"],
          ["delete", "destroy"],
        ] as const
      ).map(([endpoint, setting]) => [
        endpoint,
        { ...VAST_RATE_LIMITS.endpoints[endpoint], ...settings.rateLimits[setting] },
      ]),
    ),
  };
  /** Whether `GET /users/current/` accepted the key: then a 404 means what it says. */
  let keyAccepted = false;
  /** The lowest CUDA a host's driver must support: `minCuda`, raised to the image's CUDA when it states one. */
  const minCuda = Math.max(settings.minCuda, cudaOfImage ?? 0);
  /** The disk each instance gets, GB: the setting, raised by the spec's `diskGb`. */
  const diskFor = (diskGb: number | undefined) => Math.max(settings.diskGb, Math.ceil(diskGb ?? 0));

  /**
   * Sends a request; a 404 is checked against the key first, since Vast.ai answers an unknown key with
   * 404 on every endpoint: then it is the rejected key it is, not a gone offer or "no capacity".
   */
  async function send(request: ProviderHttpRequest, endpoint?: MachineEndpoint): Promise<ProviderHttpAnswer> {
    const rateLimit = endpoint === undefined ? undefined : rateLimitFor(limits, endpoint);
    try {
      return await http.send(rateLimit ? { ...request, rateLimit } : request);
    } catch (error) {
      if (VastApiError.isInstance(error) && error.statusCode === 404 && !keyAccepted) await checkKey(request);
      throw error;
    }
  }

  async function checkKey(request: ProviderHttpRequest): Promise<void> {
    try {
      await http.send({
        method: "GET",
        url: `${VAST_API_URL}/users/current/`,
        idempotent: true,
        purpose: "checking the API key",
        signal: request.signal,
      });
      keyAccepted = true;
    } catch (error) {
      if (VastApiError.isInstance(error) && [401, 403, 404].includes(error.statusCode ?? 0)) {
        throw new VastApiError({
          kind: "auth",
          statusCode: 401,
          message: `Vast.ai rejected the API key while ${request.purpose} (it answers HTTP 404 to a key it does not know): set VAST_API_KEY to a valid key or pass apiKey`,
        });
      }
      throw error;
    }
  }

  /** The search query JSON for `query`, or undefined when Vast.ai cannot offer it (CPU-only nodes). */
  function searchBody(
    query: OfferQuery,
    diskGb: number,
    type: "on-demand" | "bid",
  ): Record<string, unknown> | undefined {
    const accelerator = query.accelerator;
    if (!accelerator) return undefined;
    const body: Record<string, unknown> = {
      rentable: { eq: true },
      rented: { eq: false },
      ...(settings.verifiedOnly ? { verified: { eq: true } } : {}),
      type,
      gpu_name: { in: vastGpuNames(accelerator.name) },
      num_gpus: { eq: accelerator.count },
      reliability: { gte: settings.minReliability },
      cuda_max_good: { gte: minCuda },
      allocated_storage: diskGb,
      disk_space: { gte: diskGb },
      order: [["dph_total", "asc"]],
      limit: settings.searchLimit,
    };
    if (accelerator.memoryGb !== undefined)
      body.gpu_ram = { gte: Math.round(accelerator.memoryGb * 1024 * 0.97) };
    if (query.vcpus !== undefined) body.cpu_cores_effective = { gte: query.vcpus };
    if (query.memoryGb !== undefined) body.cpu_ram = { gte: Math.round(query.memoryGb * 1024) };
    if (query.architecture !== undefined)
      body.cpu_arch = { eq: query.architecture === "arm64" ? "arm64" : "amd64" };
    if (settings.ssh === "direct") body.direct_port_count = { gte: 1 };
    // The country is asked of the search itself: filtered afterwards, the cheapest `searchLimit` offers
    // worldwide may hold none of the country's though it has some.
    const country = countryCode(query.region ?? settings.geolocation);
    if (country !== undefined) body.geolocation = { eq: country };
    // In either search `dph_total` is that market's price (a bid search's at the minimum bid): an ask
    // over the cap in one market drops out of that search only, and has no price in that market.
    if (query.maxHourlyCost !== undefined) body.dph_total = { lte: query.maxHourlyCost };
    return body;
  }

  /**
   * The offer of one ask, from its on-demand search result (the on-demand price: `dph_total`) and its bid
   * search result (`dph_total` there is the price at the minimum bid: the bid placed is `min_bid` ×
   * `bidMultiplier`, and the rest of `dph_total` — storage and the like — is added to it). Either may be
   * missing: that market then has no price.
   */
  function toOffer(
    onDemand: VastOffer | undefined,
    interruptible: VastOffer | undefined,
    canonical: string,
    pricesAsOf: string,
  ): Offer {
    const raw = (onDemand ?? interruptible) as VastOffer;
    const minBid = interruptible?.min_bid ?? null;
    const bid = minBid !== null && minBid > 0 ? roundPrice(minBid * settings.bidMultiplier) : null;
    const extras =
      interruptible?.dph_total != null && minBid !== null ? Math.max(0, interruptible.dph_total - minBid) : 0;
    const spotPrice = bid === null ? null : roundPrice(bid + extras);
    const onDemandPrice =
      onDemand?.dph_total != null && onDemand.dph_total > 0 ? roundPrice(onDemand.dph_total) : null;
    // A partial rental (`gpu_frac` < 1) gets its share of the machine's RAM, as of its CPUs.
    const share = raw.gpu_frac !== null && raw.gpu_frac > 0 && raw.gpu_frac < 1 ? raw.gpu_frac : 1;
    const arch = (raw.cpu_arch ?? "").toLowerCase();
    // gpu_name says the board when there are several ("H100 SXM", "H100 PCIE", "H100 NVL", "A100 SXM4").
    const formFactor = acceleratorFormFactor(raw.gpu_name);
    return Object.freeze({
      id: `vastai:${raw.id}`,
      provider: NAME,
      instanceType: `${raw.num_gpus}x ${raw.gpu_name}${raw.machine_id ? ` (machine ${raw.machine_id})` : ""}`,
      accelerator: Object.freeze({
        name: canonical,
        count: raw.num_gpus,
        memoryGb: raw.gpu_ram === null ? 0 : Math.round(raw.gpu_ram / 1024),
        ...(formFactor === undefined ? {} : { formFactor }),
      }),
      vcpus: raw.cpu_cores_effective ?? raw.cpu_cores ?? 0,
      memoryGb: raw.cpu_ram === null ? 0 : Number(((raw.cpu_ram * share) / 1024).toFixed(4)),
      ...(raw.disk_space !== null ? { diskGb: Math.floor(raw.disk_space) } : {}),
      architecture: arch === "arm64" || arch === "aarch64" ? "arm64" : "x86_64",
      region: raw.geolocation?.trim() || "unknown",
      spotPrice,
      onDemandPrice,
      billingUnit: "second",
      pricesAsOf,
      specific: Object.freeze({
        askId: raw.id,
        machineId: raw.machine_id ?? null,
        gpuName: raw.gpu_name,
        numGpus: raw.num_gpus,
        bid,
        reliability: raw.reliability2 ?? raw.reliability,
        geolocation: raw.geolocation ?? null,
      } satisfies VastOfferData),
    });
  }

  async function searchMarket(
    query: OfferQuery,
    diskGb: number,
    type: "on-demand" | "bid",
    signal: AbortSignal,
  ): Promise<VastOffer[]> {
    const body = searchBody(query, diskGb, type);
    const accelerator = query.accelerator;
    if (!body || !accelerator) return [];
    const purpose = type === "bid" ? "searching interruptible offers" : "searching offers";
    const { data } = await send(
      {
        method: "POST",
        url: `${VAST_API_URL}/bundles/`,
        data: body,
        idempotent: true,
        purpose,
        signal,
      },
      "offers",
    );
    const region = query.region ?? settings.geolocation;
    return parseAnswer(searchAnswerSchema, data, purpose)
      .offers.filter(
        (raw) =>
          canonicalAcceleratorName(raw.gpu_name) === accelerator.name && raw.num_gpus === accelerator.count,
      )
      .filter((raw) => (raw.reliability2 ?? raw.reliability ?? 1) >= settings.minReliability)
      .filter((raw) => region === undefined || geolocationMatches(raw.geolocation, region));
  }

  /**
   * The offers for `query`: an on-demand search, a bid search, or both (spot-if-available, cheapest),
   * joined by ask, so each market is priced by its own search.
   */
  async function search(query: OfferQuery, diskGb: number, signal: AbortSignal): Promise<Offer[]> {
    const accelerator = query.accelerator;
    if (!accelerator) return [];
    const wantsOnDemand = query.allocation !== "spot";
    const wantsBid = query.allocation !== "on-demand";
    const onDemand = wantsOnDemand ? await searchMarket(query, diskGb, "on-demand", signal) : [];
    const interruptible = wantsBid ? await searchMarket(query, diskGb, "bid", signal) : [];
    const bids = new Map(interruptible.map((raw) => [raw.id, raw]));
    const asOf = new Date().toISOString();
    const offers = onDemand.map((raw) => toOffer(raw, bids.get(raw.id), accelerator.name, asOf));
    const seen = new Set(onDemand.map((raw) => raw.id));
    for (const raw of interruptible)
      if (!seen.has(raw.id)) offers.push(toOffer(undefined, raw, accelerator.name, asOf));
    return filterOffers(offers, query);
  }

  /** The label of a cluster's instances: how teardown and listInstances find them, and their offer. */
  function label(cluster: Cluster<VastClusterData>): string {
    const pool = cluster.poolId.replace(/\s+/g, "");
    return `${cluster.id} ${cluster.offer.id}${pool ? ` ${pool}` : ""}`;
  }

  async function rent(
    cluster: Cluster<VastClusterData>,
    askId: number,
    bid: number | null,
    signal: AbortSignal,
  ): Promise<number> {
    const { data } = await send({
      method: "PUT",
      url: `${VAST_API_URL}/asks/${askId}/`,
      rateLimit: {
        key: "PUT /asks",
        minIntervalMs: settings.createIntervalMs,
        penaltyMs: settings.rateLimitPenaltyMs,
      },
      data: {
        client_id: "me",
        image: cluster.specific.image,
        disk: cluster.specific.diskGb,
        label: label(cluster),
        runtype: settings.ssh === "direct" ? "ssh_direct" : "ssh_proxy",
        onstart: renderOnstartScript({
          graceSeconds: settings.watchdogGraceSeconds,
          workerPidFile: workerPidFile(settings),
        }),
        env: { ...settings.env, SKYWARD_CLUSTER: cluster.id },
        ...(bid !== null ? { price: bid } : {}),
        cancel_unavail: true,
      },
      idempotent: false,
      purpose: `renting offer ${askId}`,
      signal,
    });
    const answer = parseAnswer(createAnswerSchema, data, `renting offer ${askId}`);
    if (answer.new_contract === null || answer.new_contract === undefined) {
      throw new VastApiError({
        kind: "capacity",
        statusCode: 410,
        message: `Vast.ai did not rent offer ${askId}: ${answer.msg ?? answer.error ?? "no instance id in the answer"}`,
      });
    }
    return answer.new_contract;
  }

  /** Attaches the cluster's key to one instance (never to the account, which would reach every instance). */
  async function attachKey(
    cluster: Cluster<VastClusterData>,
    id: number,
    signal: AbortSignal,
  ): Promise<void> {
    await send({
      method: "POST",
      url: `${VAST_API_URL}/instances/${id}/ssh/`,
      data: { ssh_key: cluster.specific.publicKey },
      idempotent: true,
      purpose: `attaching Skyward's SSH key to instance ${id}`,
      signal,
    });
  }

  async function fetchInstance(id: string, signal: AbortSignal): Promise<VastInstance | null> {
    if (!/^\d+$/.test(id)) return null;
    try {
      const { data } = await send(
        {
          method: "GET",
          url: `${VAST_API_URL}/instances/${id}/`,
          params: { owner: "me" },
          idempotent: true,
          purpose: `looking up instance ${id}`,
          signal,
        },
        "get",
      );
      return parseAnswer(instanceAnswerSchema, data, `looking up instance ${id}`).instances ?? null;
    } catch (error) {
      if (isGone(error)) return null;
      throw error;
    }
  }

  /** Every instance of the account, page by page through `GET /api/v1/instances/` (25 a page). */
  async function listAll(signal: AbortSignal): Promise<VastInstance[]> {
    const all: VastInstance[] = [];
    let after: string | undefined;
    for (let page = 0; page < 400; page += 1) {
      const { data } = await send(
        {
          method: "GET",
          url: `${VAST_API_V1_URL}/instances/`,
          params: {
            select_filters: "{}",
            order_by: JSON.stringify([{ col: "id", dir: "asc" }]),
            limit: "25",
            ...(after !== undefined ? { after_token: after } : {}),
          },
          idempotent: true,
          purpose: "listing instances",
          signal,
        },
        "list",
      );
      const answer = parseAnswer(instancesPageSchema, data, "listing instances");
      all.push(...answer.instances);
      if (!answer.next_token) break;
      after = answer.next_token;
    }
    return all;
  }

  async function destroy(id: string, signal: AbortSignal): Promise<void> {
    if (!/^\d+$/.test(id)) return; // Not an id Vast.ai issues: nothing of ours to destroy.
    try {
      await send(
        {
          method: "DELETE",
          url: `${VAST_API_URL}/instances/${id}/`,
          data: {},
          idempotent: true,
          purpose: `destroying instance ${id}`,
          signal,
        },
        "delete",
      );
    } catch (error) {
      if (!isGone(error)) throw error;
    }
  }

  return {
    specificationVersion: "v1",
    name: NAME,
    // A marketplace: prices and availability move, so the core caches its offers for an hour at most.
    // Instances are rented on separate machines, each behind its own NAT: no network between them, so
    // a distributed-training plugin on several nodes is refused at validation (core), not left to hang.
    capabilities: Object.freeze({
      spot: true,
      offerCache: "marketplace",
      peerNetwork: "none",
      provisionTimeout: VASTAI_PROVISION_TIMEOUT_SECONDS,
    }),
    // Every setting the search's answer depends on (its filters, the disk priced in, the bid, how many
    // asks), so that a provider set otherwise is never handed offers the core cached for another: the
    // image only by the CUDA it states (it raises minCuda). Not the image's tag, env, watchdog, create
    // pacing, root or key: they change how an ask is rented, not which.
    cacheKey: JSON.stringify([
      settings.minReliability,
      settings.verifiedOnly,
      minCuda,
      settings.geolocation ?? null,
      settings.bidMultiplier,
      settings.diskGb,
      settings.ssh,
      settings.searchLimit,
    ]),

    async offers({ query, signal }) {
      return search(query, diskFor(query.diskGb), signal);
    },

    async prepare({ spec, offer, poolId }) {
      requireOwnOffer(offer, NAME, "Vast.ai");
      // Its instances are containers without FUSE: volumes are refused before anything is created.
      refuseVolumesWithoutFuse(spec.volumes, { provider: "Vast.ai", machines: "instances" });
      // Fail before creating anything when no key is set.
      vastaiApi.resolveApiKey(settings.apiKey);
      // The key is attached to each instance as it is rented, not registered on the account: an
      // account key is pushed onto every instance of the account, Skyward's or not.
      const keys = await ensureSshKeyPair(keysDirectory(), "vastai_ed25519");
      return Object.freeze({
        id: createClusterId(),
        provider: NAME,
        poolId: poolId ?? "",
        region: offer.region,
        spec,
        offer,
        ssh: Object.freeze({ user: "root", identityFile: keys.identityFile, sudo: false }),
        specific: Object.freeze({
          publicKey: keys.publicKey,
          identityFile: keys.identityFile,
          image: settings.dockerImage,
          diskGb: diskFor(spec.diskGb),
        }),
      });
    },

    async provision({ cluster, count, signal }) {
      const specific = cluster.offer.specific as unknown as VastOfferData;
      const cap = cluster.spec.maxHourlyCost;
      // Spot (a bid) and on-demand in the allocation's order; when one market runs out, the next.
      const markets: Market[] = marketsFor(cluster.spec.allocation, cluster.offer);
      let spot = markets[0] === "spot";
      const created: Instance[] = [];
      const reasons: string[] = [];
      const tried = new Set<number>();
      type Candidate = {
        askId: number;
        bid: number | null;
        spotPrice: number | null;
        onDemandPrice: number | null;
      };
      const candidateOf = (offer: Offer): Candidate => {
        const data = offer.specific as unknown as VastOfferData;
        return {
          askId: data.askId,
          bid: data.bid,
          spotPrice: offer.spotPrice,
          onDemandPrice: offer.onDemandPrice,
        };
      };
      // The cluster's own offer first; one ask rents once, so more nodes come from a fresh search for the same kind.
      let candidates: Candidate[] = [candidateOf(cluster.offer)];
      let searched = false;
      while (created.length < count) {
        const candidate = candidates.shift();
        if (!candidate) {
          if (searched) {
            markets.shift();
            if (markets.length === 0) break;
            spot = markets[0] === "spot";
            searched = false;
            tried.clear();
            candidates = [candidateOf(cluster.offer)];
            continue;
          }
          searched = true;
          // The query the pool sent to `offers` for this spec (hardware, accelerator memory, region,
          // cap), in the market now tried: the same search, so every node meets the spec and settings.
          const query: OfferQuery = { ...offerQuery(cluster.spec), allocation: spot ? "spot" : "on-demand" };
          const fresh = await search(query, diskFor(query.diskGb), signal);
          candidates = fresh
            .filter((offer) => (offer.specific as unknown as VastOfferData).gpuName === specific.gpuName)
            .map(candidateOf)
            .filter((entry) => !tried.has(entry.askId));
          continue;
        }
        if (tried.has(candidate.askId)) continue;
        tried.add(candidate.askId);
        const bid = spot ? candidate.bid : null;
        if (spot && bid === null) continue;
        // The price of the market actually rented, checked against the cap before renting.
        const price = spot ? candidate.spotPrice : candidate.onDemandPrice;
        if (price === null) continue;
        if (cap !== undefined && price > cap) {
          reasons.push(
            `${spot ? "bid" : "on-demand"} on offer ${candidate.askId}: $${price}/h is over maxHourlyCost $${cap}/h`,
          );
          continue;
        }
        let id: number;
        try {
          id = await rent(cluster, candidate.askId, bid, signal);
        } catch (error) {
          if (signal.aborted) throw signal.reason;
          if (isBidTooLow(error)) {
            // Vast.ai creates the instance stopped (billing for its disk) and names it in the refusal.
            const stopped = instanceIdInRefusal(error);
            if (stopped !== undefined) await destroy(String(stopped), signal);
            reasons.push(
              `bid on offer ${candidate.askId}: ${error.message}${stopped !== undefined ? ` (instance ${stopped}, created stopped, was destroyed)` : ""}`,
            );
            continue;
          }
          if (isCapacityProblem(error)) {
            reasons.push(
              `${spot ? "bid" : "on-demand"} on offer ${candidate.askId}: ${(error as Error).message}`,
            );
            continue;
          }
          // Instances already rented are handed back (the pool asks again), never left unknown.
          if (created.length > 0) break;
          throw error;
        }
        const instance = instanceFromVast(
          { id, label: label(cluster), actual_status: "loading" } as VastInstance,
          {
            ssh: settings.ssh,
            identityFile: cluster.specific.identityFile,
            spot,
            hourlyPrice: price,
            root: settings.root,
          },
        );
        try {
          await attachKey(cluster, id, signal);
        } catch (error) {
          // Unreachable without its key: destroy it rather than leave it billing.
          await destroy(String(id), signal).catch(() => {});
          if (created.length > 0) break;
          throw error;
        }
        created.push(instance);
      }
      if (created.length === 0) {
        throw new NoCapacityError({
          attempts: (reasons.length > 0 ? reasons : ["no offer of this kind is left"]).map((reason) => ({
            provider: NAME,
            offer: cluster.offer.instanceType,
            reason,
          })),
        });
      }
      return created;
    },

    async getInstance({ cluster, id, signal }) {
      const found = await fetchInstance(id, signal);
      return found
        ? instanceFromVast(found, {
            ssh: settings.ssh,
            identityFile: cluster.specific?.identityFile,
            root: settings.root,
          })
        : null;
    },

    launchWorker: launchSshWorker,

    reconnectWorker(options) {
      // A detached pool's node: found again by its id, with the key file its cluster data records.
      return reconnectThroughGetInstance(options, (lookup) => this.getInstance(lookup));
    },

    async terminate({ ids, signal }) {
      for (const id of new Set(ids)) await destroy(id, signal);
    },

    async teardown({ cluster, signal }) {
      const left = (await listAll(signal)).filter(
        (instance) => LABEL.exec(instance.label ?? "")?.[1] === cluster.id,
      );
      for (const instance of left) await destroy(String(instance.id), signal);
    },

    selfDestruct(): string {
      // Installed by the onstart script, with the instance-scoped API key Vast.ai gives the container.
      return SELF_DESTRUCT_COMMAND;
    },

    async listInstances({ signal }) {
      // Listing only reads: the key pair is made by `prepare`, when a machine is about to be created.
      const identityFile = await findSshIdentityFile(keysDirectory(), "vastai_ed25519");
      return (await listAll(signal))
        .filter((instance) => LABEL.test(instance.label ?? ""))
        .map((instance) =>
          instanceFromVast(instance, { ssh: settings.ssh, identityFile, root: settings.root }),
        );
    },
  };
}

/** Fails when the rendered onstart script would exceed Vast.ai's limit (a guard for future edits). */
function checkOnstartLength(settings: ParsedSettings): void {
  const length = renderOnstartScript({
    graceSeconds: settings.watchdogGraceSeconds,
    workerPidFile: workerPidFile(settings),
  }).length;
  if (length > ONSTART_MAX_LENGTH)
    throw new Error(`the onstart script has ${length} characters, Vast.ai accepts ${ONSTART_MAX_LENGTH}`);
}

/**
 * The Vast.ai provider: `VastAI()` with default settings, or `VastAI({ minReliability: 0.98,
 * geolocation: "US" })`. Throws {@link ConfigurationError} for bad settings; the API key is looked up
 * on the first API call.
 */
export function VastAI(settings: VastAISettings = {}): ProviderV1<VastClusterData> {
  const parsed = parseSettings(settings, "VastAI");
  checkOnstartLength(parsed);
  return build(parsed, imageCuda(settings.dockerImage));
}

/**
 * Creates the provider from a `[providers.NAME]` table of `skyward.toml` (`type = "vastai"`), its keys
 * already camelCased by the core: `min_reliability = 0.95` arrives as `minReliability`.
 */
export function createProviderFromConfig(settings: Record<string, unknown>): ProviderV1<VastClusterData> {
  const parsed = parseSettings(settings as VastAISettings, "");
  checkOnstartLength(parsed);
  return build(parsed, imageCuda(settings.dockerImage));
}
