/**
 * A fake of Verda's public API, serving on loopback, built from its documentation — the API reference
 * at https://api.verda.com/v1/docs (OpenAPI schema: https://api.verda.com/v1/openapi.json), whose
 * request and answer shapes each fixture below follows, section by section; the OS volume's
 * `on_spot_discontinue` and the delete action's `volume_ids` / `delete_permanently` as the official
 * SDK's release notes show them (https://github.com/verda-cloud/sdk-python/releases/tag/v1.20.0). With a test bed, each new
 * instance is one of its hosts (its `ip` the host's address), so a whole pool runs on real SSH hosts.
 */
import { randomBytes, randomUUID } from "node:crypto";
import {
  type FakeFaultSwitches,
  fakeFaultSwitches,
  fakeRoutes,
  jsonAnswer,
  startFakeRestServer,
  type TestbedHost,
  testbedHostPool,
  textAnswer,
} from "@skyward/testing";

export const TEST_CLIENT_ID = "verda-test-client";
export const TEST_CLIENT_SECRET = "verda-test-5ecret-0123456789abcdef";

/** What an instance type's entry says of its hardware beyond the sizes. */
interface Hardware {
  model: string;
  name: string;
  p2p: string;
  manufacturer: string;
  os: string[];
}

const A100: Hardware = {
  model: "A100",
  name: "A100 SXM4 80GB",
  p2p: "600 GB/s",
  manufacturer: "NVIDIA",
  os: ["ubuntu-24.04-cuda-13.0-open"],
};
const EPYC: Hardware = {
  model: "CPU Node",
  name: "AMD EPYC",
  p2p: "",
  manufacturer: "AMD",
  os: ["ubuntu-24.04", "ubuntu-22.04"],
};

/** One entry of `GET /v1/instance-types`, its descriptions written as the docs' example writes them. */
function instanceType(
  n: number,
  type: string,
  [price, spot]: [string | number, string | number],
  size: { cores: number; gpus: number; ramGb: number; gpuRamGb: number },
  hardware: Hardware,
) {
  const gpu = size.gpus > 0;
  return {
    id: `c01dd00d-000${n}-4972-ae4e-d429115d055b`,
    instance_type: type,
    price_per_hour: price,
    spot_price: spot,
    description: gpu ? "Dedicated Hardware Instance" : "CPU Node",
    cpu: { description: `${size.cores} CPU`, number_of_cores: size.cores },
    gpu: { description: gpu ? `${size.gpus}x ${hardware.name}` : "", number_of_gpus: size.gpus },
    memory: { description: `${size.ramGb}GB RAM`, size_in_gigabytes: size.ramGb },
    gpu_memory: { description: gpu ? `${size.gpuRamGb}GB GPU RAM` : "", size_in_gigabytes: size.gpuRamGb },
    storage: { description: "dynamic" },
    model: hardware.model,
    name: hardware.name,
    p2p: hardware.p2p,
    currency: "usd",
    manufacturer: hardware.manufacturer,
    display_name: gpu ? hardware.name : "CPU Node",
    supported_os: hardware.os,
  };
}

/**
 * `GET /v1/instance-types` (docs: "Instance Types" → "Get instance types"; the fields as the answer
 * example lists them: `instance_type`, `price_per_hour`, `spot_price`, `cpu`, `gpu`, `memory`,
 * `gpu_memory`, `storage`, `model`, `currency`…; prices are decimal strings or numbers).
 */
export const INSTANCE_TYPES = [
  instanceType(
    0,
    "1H100.80S.30V",
    ["2.19", "0.95"],
    { cores: 30, gpus: 1, ramGb: 120, gpuRamGb: 80 },
    {
      model: "H100",
      name: "H100 SXM5 80GB",
      p2p: "900 GB/s",
      manufacturer: "NVIDIA",
      os: [
        "ubuntu-24.04-cuda-12.8-open-docker",
        "ubuntu-24.04-cuda-12.8-open",
        "ubuntu-24.04-cuda-13.0-open",
      ],
    },
  ),
  instanceType(1, "2A100.80S.44V", ["2.58", "1.12"], { cores: 44, gpus: 2, ramGb: 240, gpuRamGb: 160 }, A100),
  instanceType(4, "1A100.80S.22V", ["1.29", "0.56"], { cores: 22, gpus: 1, ramGb: 120, gpuRamGb: 80 }, A100),
  instanceType(2, "CPU.4V.16G", [0.0387, 0.0155], { cores: 4, gpus: 0, ramGb: 16, gpuRamGb: 0 }, EPYC),
  instanceType(3, "CPU.8V.32G", [0.0774, 0.031], { cores: 8, gpus: 0, ramGb: 32, gpuRamGb: 0 }, EPYC),
];

/**
 * `GET /v1/instance-availability?is_spot=…` (docs: "Instance Availability" → "Get all instance types
 * availability": a list of `{ location_code, availabilities: [instance type, …] }`).
 */
export const AVAILABILITY = {
  onDemand: [
    { location_code: "FIN-01", availabilities: ["1H100.80S.30V", "CPU.4V.16G", "CPU.8V.32G"] },
    { location_code: "ICE-01", availabilities: ["1A100.80S.22V", "2A100.80S.44V", "CPU.4V.16G"] },
  ],
  spot: [
    { location_code: "FIN-01", availabilities: ["1H100.80S.30V", "CPU.4V.16G"] },
    { location_code: "ICE-01", availabilities: ["1A100.80S.22V", "2A100.80S.44V"] },
  ],
};

/** An instance as the fake keeps it (the fields of the docs' "Get instance by ID" answer). */
export interface FakeVerdaInstance {
  id: string;
  instance_type: string;
  image: string;
  price_per_hour: number;
  hostname: string;
  description: string;
  status: string;
  created_at: string;
  ssh_key_ids: string[];
  location: string;
  is_spot: boolean;
  os_volume: { name: string; size: number; on_spot_discontinue?: string } | null;
  os_volume_id: string;
  startup_script_id: string | null;
  pricing: unknown;
  ip: string | null;
  /** Reads while provisioning: the instance "boots" after its first read. */
  reads: number;
  host: TestbedHost | undefined;
}

/** One request the fake received. */
export interface RecordedVerdaRequest {
  readonly method: string;
  readonly path: string;
  readonly query: URLSearchParams;
  readonly authorization: string | undefined;
  readonly body: unknown;
}

/** A running fake Verda API. */
export interface FakeVerda extends AsyncDisposable {
  /** Its base URL, `http://127.0.0.1:PORT/v1`: the provider's `apiUrl`. */
  readonly apiUrl: string;
  readonly instances: Map<string, FakeVerdaInstance>;
  readonly sshKeys: Map<string, { id: string; name: string; key: string; fingerprint: string }>;
  /** Startup scripts (docs: "Startup Scripts"), by id. */
  readonly scripts: Map<string, { id: string; name: string; script: string }>;
  /** OS volumes by id, with where they are: attached, detached (left by a discontinued spot instance) or in the trash. */
  readonly volumes: Map<string, { id: string; name: string; state: "attached" | "detached" | "trash" }>;
  /**
   * Faults of the real API: refuse to delete an instance still provisioning (each such instance answered
   * in a 207, as Verda answers a batch action some of whose instances failed), and lose the answer of
   * the next deploy (the instance is made, the client gets a 500), and leave instances out of `GET
   * /instances` for a while (a list a moment behind a deploy).
   */
  faults: {
    refuseDeleteWhileProvisioning: boolean;
    loseNextDeployAnswer: boolean;
    unlisted: Set<string>;
    /** Reads of `GET /instances/{id}` still to answer 404 (an instance a moment behind its deploy). */
    notFoundReads: number;
    /** Token requests still to answer 503 (the token service failing for a moment). */
    tokenFailures: number;
  };
  /** The fault matrix's switches (a 429 storm, a 207, refusals, an unknown list shape) and every instance deployed, at its price. */
  readonly switches: FakeFaultSwitches;
  /** Runs each instance's boot watchdog as if its time were up with no worker: one whose startup script arms it is deleted. */
  fireBootWatchdogs(): Promise<void>;
  /** Verda reclaims a spot instance: it is discontinued, its OS volume deleted or kept detached as its `on_spot_discontinue` says. */
  discontinue(id: string): void;
  readonly requests: RecordedVerdaRequest[];
  /** Instances that can still be deployed before Verda answers "not enough resources"; Infinity by default. */
  capacity: { onDemand: number; spot: number };
  /** Access tokens issued; revoking one makes the API answer 401 to it. */
  readonly tokens: Set<string>;
  /** What the provider left here, in words: instances and SSH keys. */
  leftovers(): string[];
  /** Forgets requests, instances, keys, and makes capacity unlimited again. */
  reset(): void;
}

/** Starts the fake on loopback; with `hosts`, each new instance is the next free one of them. */
export async function startFakeVerda(options: { hosts?: readonly TestbedHost[] } = {}): Promise<FakeVerda> {
  const hosts = await testbedHostPool<string>(options.hosts ?? []);
  const instances = new Map<string, FakeVerdaInstance>();
  const sshKeys = new Map<string, { id: string; name: string; key: string; fingerprint: string }>();
  const tokens = new Set<string>();
  const scripts = new Map<string, { id: string; name: string; script: string }>();
  const volumes = new Map<string, { id: string; name: string; state: "attached" | "detached" | "trash" }>();
  const switches = fakeFaultSwitches();
  const faults = {
    refuseDeleteWhileProvisioning: false,
    loseNextDeployAnswer: false,
    unlisted: new Set<string>(),
    notFoundReads: 0,
    tokenFailures: 0,
  };
  const capacity = { onDemand: Number.POSITIVE_INFINITY, spot: Number.POSITIVE_INFINITY };
  let nextAddress = 10;

  // Errors, as the docs' error answers show them: `{ code, message }`.
  const error = (status: number, code: string, message: string) => jsonAnswer(status, { code, message });

  const answerOf = (instance: FakeVerdaInstance) => {
    const type = INSTANCE_TYPES.find((entry) => entry.instance_type === instance.instance_type);
    return {
      id: instance.id,
      instance_type: instance.instance_type,
      image: instance.image,
      price_per_hour: instance.price_per_hour,
      hostname: instance.hostname,
      description: instance.description,
      ip: instance.status === "running" ? instance.ip : null,
      status: instance.status,
      created_at: instance.created_at,
      ssh_key_ids: instance.ssh_key_ids,
      cpu: type?.cpu,
      gpu: type?.gpu,
      memory: type?.memory,
      gpu_memory: type?.gpu_memory,
      storage: type?.storage,
      os_volume_id: instance.os_volume_id,
      startup_script_id: instance.startup_script_id,
      location: instance.location,
      is_spot: instance.is_spot,
      contract: instance.is_spot ? "SPOT" : "PAY_AS_YOU_GO",
      pricing: instance.pricing ?? "FIXED_PRICE",
    };
  };

  const routes = fakeRoutes(
    {
      "GET /instance-types": () => jsonAnswer(200, INSTANCE_TYPES),
      "GET /instance-availability": ({ query }) => {
        const spot = query.get("is_spot") === "true";
        const location = query.get("location_code");
        const list = spot ? AVAILABILITY.spot : AVAILABILITY.onDemand;
        return jsonAnswer(
          200,
          list.filter((entry) => location === null || entry.location_code === location),
        );
      },
      // Docs: "SSH Keys" → "Get all SSH keys", "Add SSH key" ({ name, key } → the key's id), "Delete SSH key".
      "GET /ssh-keys": () => jsonAnswer(200, [...sshKeys.values()]),
      "POST /ssh-keys": ({ body }) => {
        const { name, key } = (body ?? {}) as { name?: unknown; key?: unknown };
        if (typeof name !== "string" || typeof key !== "string" || !/^ssh-\S+ \S+/.test(key))
          return error(400, "invalid_request", "name and a valid public key are required");
        const id = randomUUID();
        sshKeys.set(id, { id, name, key, fingerprint: `SHA256:${randomBytes(8).toString("hex")}` });
        // Creations answer the new id as plain text (docs: "Deploy new instance" → 202, the instance id).
        return textAnswer(201, id);
      },
      "DELETE /ssh-keys/:id": (_, { id }) => {
        if (!sshKeys.delete(id ?? "")) return error(404, "not_found", "SSH key not found");
        return jsonAnswer(200);
      },
      // Docs: "Instances" → "Get instances" (every instance not deleted), "Deploy new instance",
      // "Get instance by ID", "Perform action on instance or multiple instances" (PUT, action "delete").
      // Docs: "Startup Scripts" → "Get all startup scripts", "Add startup script" ({ name, script } → its id
      // as text), "Delete startup script by id" — `/scripts` and `/scripts/{id}`, as the official SDK calls them
      // (https://github.com/DataCrunch-io/datacrunch-python, datacrunch/startup_scripts/startup_scripts.py).
      // Paged since 2026-03-30 (https://docs.verda.com/welcome-to-verda/release-notes/verda-api-changes/):
      // `page` and `pageSize` (at most 100); the metadata in X-Page, X-Page-Size and X-Total-Count.
      "GET /scripts": ({ query }) => {
        const size = Math.min(100, Number(query.get("pageSize") ?? 100));
        const page = Number(query.get("page") ?? 1);
        const all = [...scripts.values()];
        return {
          ...jsonAnswer(200, all.slice((page - 1) * size, page * size)),
          headers: {
            "x-page": String(page),
            "x-page-size": String(size),
            "x-total-count": String(all.length),
          },
        };
      },
      "POST /scripts": ({ body }) => {
        const { name, script } = (body ?? {}) as { name?: unknown; script?: unknown };
        if (typeof name !== "string" || typeof script !== "string" || !script.startsWith("#!"))
          return error(400, "invalid_request", "name and a script starting with #! are required");
        const id = randomUUID();
        scripts.set(id, { id, name, script });
        return textAnswer(201, id);
      },
      "DELETE /scripts/:id": (_, { id }) => {
        if (!scripts.delete(id ?? "")) return error(404, "not_found", "Startup script not found");
        return jsonAnswer(200);
      },
      "GET /instances": () => {
        const listed = [...instances.values()].filter((instance) => !faults.unlisted.has(instance.id));
        return jsonAnswer(
          200,
          switches.listShapeBroken ? { instances: listed.map(answerOf) } : listed.map(answerOf),
        );
      },
      "POST /instances": ({ body }) => {
        const wanted = (body ?? {}) as Record<string, unknown>;
        const type = INSTANCE_TYPES.find((entry) => entry.instance_type === wanted.instance_type);
        const spot = wanted.is_spot === true;
        const location = typeof wanted.location_code === "string" ? wanted.location_code : "FIN-01";
        if (!type)
          return error(400, "invalid_request", `Invalid instance type ${String(wanted.instance_type)}`);
        if (typeof wanted.image !== "string" || wanted.image === "")
          return error(400, "invalid_request", "image is required");
        if (typeof wanted.hostname !== "string" || wanted.hostname === "")
          return error(400, "invalid_request", "hostname is required");
        const keyIds = Array.isArray(wanted.ssh_key_ids) ? (wanted.ssh_key_ids as string[]) : [];
        if (keyIds.some((id) => !sshKeys.has(id))) return error(400, "invalid_request", "Unknown SSH key");
        if (!type.supported_os.includes(wanted.image))
          return error(400, "invalid_request", "Operating system is not valid for this instance type");
        const scriptId = typeof wanted.startup_script_id === "string" ? wanted.startup_script_id : null;
        if (scriptId !== null && !scripts.has(scriptId))
          return error(400, "invalid_request", "Unknown startup script");
        if (
          wanted.pricing !== undefined &&
          !["FIXED_PRICE", "DYNAMIC_PRICE"].includes(String(wanted.pricing))
        )
          return error(400, "invalid_request", "pricing must be FIXED_PRICE or DYNAMIC_PRICE");
        const available = (spot ? AVAILABILITY.spot : AVAILABILITY.onDemand).find(
          (entry) => entry.location_code === location,
        );
        const market = spot ? "spot" : "onDemand";
        const id = randomUUID();
        const host =
          available?.availabilities.includes(type.instance_type) && capacity[market] > 0
            ? hosts.take(id)
            : undefined;
        if (
          !available?.availabilities.includes(type.instance_type) ||
          capacity[market] <= 0 ||
          (hosts.hosts.length > 0 && host === undefined)
        )
          return error(503, "not_enough_resources", "Not enough resources available for this instance type");
        capacity[market] -= 1;
        const osVolume = (wanted.os_volume as FakeVerdaInstance["os_volume"] | undefined) ?? null;
        const volumeId = randomUUID();
        volumes.set(volumeId, {
          id: volumeId,
          name: osVolume?.name ?? `${wanted.hostname}-os`,
          state: "attached",
        });
        const instance: FakeVerdaInstance = {
          id,
          instance_type: type.instance_type,
          image: wanted.image,
          price_per_hour: Number(spot ? type.spot_price : type.price_per_hour),
          hostname: wanted.hostname,
          description: typeof wanted.description === "string" ? wanted.description : "",
          status: "provisioning",
          created_at: new Date().toISOString(),
          ssh_key_ids: keyIds,
          location,
          is_spot: spot,
          os_volume: osVolume,
          os_volume_id: volumeId,
          startup_script_id: scriptId,
          pricing: wanted.pricing,
          ip: host?.host ?? `203.0.113.${nextAddress++}`,
          reads: 0,
          host,
        };
        instances.set(instance.id, instance);
        switches.created.push({ id, hourlyPrice: instance.price_per_hour });
        if (faults.loseNextDeployAnswer) {
          faults.loseNextDeployAnswer = false;
          return error(500, "internal", "upstream connection lost");
        }
        return textAnswer(202, instance.id);
      },
      "GET /instances/:id": (_, { id }) => {
        const instance = instances.get(id ?? "");
        if (!instance || faults.notFoundReads-- > 0) return error(404, "not_found", "Instance not found");
        instance.reads += 1;
        if (instance.status === "provisioning" && instance.reads > 1) instance.status = "running";
        return jsonAnswer(200, answerOf(instance));
      },
      // Docs: "Perform action on instance or multiple instances": 202 when every action was taken,
      // 207 with `[{ instanceId, action, status, error, statusCode }]` when some failed. `volume_ids`
      // are deleted with them (to the trash, or for good with `delete_permanently`).
      "PUT /instances": async ({ body }) => {
        const request = (body ?? {}) as {
          action?: unknown;
          id?: unknown;
          volume_ids?: unknown;
          delete_permanently?: unknown;
        };
        const id = request.id;
        const ids = Array.isArray(id) ? (id as string[]) : typeof id === "string" ? [id] : [];
        if (request.action !== "delete" || ids.length === 0)
          return error(400, "invalid_request", "action and id are required");
        if (ids.length === 1 && !instances.has(ids[0] ?? ""))
          return error(404, "not_found", "Instance not found");
        const results = [];
        const partial = switches.takePartialDelete();
        for (const entry of ids) {
          const instance = instances.get(entry);
          const refused = !instance
            ? { statusCode: 404, error: "Instance not found" }
            : (faults.refuseDeleteWhileProvisioning && instance.status === "provisioning") ||
                switches.takeDeleteRefusal()
              ? { statusCode: 400, error: "Cannot delete an instance while it is provisioning" }
              : partial && entry === ids[0]
                ? { statusCode: 403, error: "Instance is locked by a running action" }
                : undefined;
          results.push({
            instanceId: entry,
            action: "delete",
            status: refused ? "error" : "success",
            ...refused,
          });
          if (refused || !instance) continue;
          instances.delete(entry);
          await hosts.release(entry);
          const volume = volumes.get(instance.os_volume_id);
          const asked =
            Array.isArray(request.volume_ids) && request.volume_ids.includes(instance.os_volume_id);
          if (volume && !asked) volume.state = "detached";
          else if (volume && request.delete_permanently === true) volumes.delete(volume.id);
          else if (volume) volume.state = "trash";
        }
        return results.every((result) => result.status === "success")
          ? jsonAnswer(202)
          : jsonAnswer(207, results);
      },
    },
    ({ method, path }) => error(404, "not_found", `No route ${method} ${path}`),
  );

  const server = await startFakeRestServer({
    prefix: "/v1",
    textBodies: true,
    record: ({ method, url, query, headers, body }): RecordedVerdaRequest => ({
      method,
      path: url.pathname,
      query,
      authorization: headers.authorization,
      body,
    }),
    handle: (request) => {
      // The storm hits the API's calls, not the token request (one an hour; see tokenFailures for its own).
      const limited =
        request.path === "/oauth2/token"
          ? undefined
          : switches.takeRateLimit(error(429, "too_many_requests", "Too many requests"));
      if (limited) return limited;
      // Docs: "Authentication" → "Generate access token" (client credentials in a JSON body).
      if (request.method === "POST" && request.path === "/oauth2/token") {
        if (faults.tokenFailures > 0) {
          faults.tokenFailures -= 1;
          return error(503, "service_unavailable", "Service temporarily unavailable");
        }
        const credentials = request.body as Record<string, unknown> | undefined;
        if (
          credentials?.grant_type !== "client_credentials" ||
          credentials.client_id !== TEST_CLIENT_ID ||
          credentials.client_secret !== TEST_CLIENT_SECRET
        )
          return error(401, "unauthorized_request", "Invalid client credentials");
        const token = `eyJ${randomBytes(16).toString("hex")}`;
        tokens.add(token);
        return jsonAnswer(200, {
          access_token: token,
          token_type: "Bearer",
          expires_in: 3600,
          refresh_token: `eyR${randomBytes(16).toString("hex")}`,
          scope: "cloud-api-v1",
        });
      }
      const token = request.headers.authorization?.replace(/^Bearer /, "");
      if (!token || !tokens.has(token)) return error(401, "unauthorized_request", "Access token is invalid");
      return routes(request);
    },
    failed: (failure) => error(500, "internal", String(failure)),
  });
  return {
    apiUrl: server.url,
    instances,
    sshKeys,
    requests: server.requests,
    capacity,
    tokens,
    leftovers: () => [
      ...[...instances.values()].map(
        (instance) => `instance ${instance.id} ${instance.hostname} (${instance.status})`,
      ),
      ...[...sshKeys.values()].map((key) => `SSH key ${key.name}`),
      ...[...scripts.values()].map((script) => `startup script ${script.name}`),
      ...[...volumes.values()]
        .filter((volume) => volume.state !== "attached")
        .map((volume) => `OS volume ${volume.name} (${volume.state})`),
    ],
    scripts,
    volumes,
    faults,
    switches,
    async fireBootWatchdogs() {
      for (const instance of [...instances.values()]) {
        const script = scripts.get(instance.startup_script_id ?? "")?.script ?? "";
        // Armed: the watchdog line, and a self-destruct that deletes through this very API.
        if (
          !/# Boot watchdog:/.test(script) ||
          !script.includes(server.url) ||
          !script.includes('"method":"PUT","path":"/instances"')
        )
          continue;
        instances.delete(instance.id);
        volumes.delete(instance.os_volume_id);
        await hosts.release(instance.id);
      }
    },
    discontinue(id) {
      const instance = instances.get(id);
      if (!instance) return;
      instance.status = "discontinued";
      const volume = volumes.get(instance.os_volume_id);
      if (!volume) return;
      if (instance.os_volume?.on_spot_discontinue === "delete_permanently") volumes.delete(volume.id);
      else if (instance.os_volume?.on_spot_discontinue === "move_to_trash") volume.state = "trash";
      else volume.state = "detached";
    },
    reset() {
      server.requests.length = 0;
      instances.clear();
      void hosts.releaseAll();
      sshKeys.clear();
      scripts.clear();
      volumes.clear();
      faults.refuseDeleteWhileProvisioning = false;
      faults.loseNextDeployAnswer = false;
      faults.unlisted.clear();
      faults.notFoundReads = 0;
      faults.tokenFailures = 0;
      capacity.onDemand = Number.POSITIVE_INFINITY;
      capacity.spot = Number.POSITIVE_INFINITY;
    },
    [Symbol.asyncDispose]: () => server.close(),
  };
}
