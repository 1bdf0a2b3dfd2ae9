/**
 * A fake of Verda's public API, serving on loopback, built from its documentation — the API reference
 * at https://api.verda.com/v1/docs (OpenAPI schema: https://api.verda.com/v1/openapi.json), whose
 * request and answer shapes each fixture below follows, section by section. With a test bed, each new
 * instance is one of its hosts (its `ip` the host's address), so a whole pool runs on real SSH hosts.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { TestbedHost } from "@skyward/testing";

export const TEST_CLIENT_ID = "verda-test-client";
export const TEST_CLIENT_SECRET = "verda-test-5ecret-0123456789abcdef";

/**
 * `GET /v1/instance-types` (docs: "Instance Types" → "Get instance types"; the fields as the answer
 * example lists them: `instance_type`, `price_per_hour`, `spot_price`, `cpu`, `gpu`, `memory`,
 * `gpu_memory`, `storage`, `model`, `currency`…; prices are decimal strings or numbers).
 */
export const INSTANCE_TYPES = [
  {
    id: "c01dd00d-0000-4972-ae4e-d429115d055b",
    instance_type: "1H100.80S.30V",
    price_per_hour: "2.19",
    spot_price: "0.95",
    description: "Dedicated Hardware Instance",
    cpu: { description: "30 CPU", number_of_cores: 30 },
    gpu: { description: "1x H100 SXM5 80GB", number_of_gpus: 1 },
    memory: { description: "120GB RAM", size_in_gigabytes: 120 },
    gpu_memory: { description: "80GB GPU RAM", size_in_gigabytes: 80 },
    storage: { description: "dynamic" },
    model: "H100",
    name: "H100 SXM5 80GB",
    p2p: "900 GB/s",
    currency: "usd",
    manufacturer: "NVIDIA",
    display_name: "H100 SXM5 80GB",
    supported_os: ["ubuntu-24.04-cuda-12.8-open-docker", "ubuntu-24.04-cuda-13.0-open"],
  },
  {
    id: "c01dd00d-0001-4972-ae4e-d429115d055b",
    instance_type: "2A100.80S.44V",
    price_per_hour: "2.58",
    spot_price: "1.12",
    description: "Dedicated Hardware Instance",
    cpu: { description: "44 CPU", number_of_cores: 44 },
    gpu: { description: "2x A100 SXM4 80GB", number_of_gpus: 2 },
    memory: { description: "240GB RAM", size_in_gigabytes: 240 },
    gpu_memory: { description: "160GB GPU RAM", size_in_gigabytes: 160 },
    storage: { description: "dynamic" },
    model: "A100",
    name: "A100 SXM4 80GB",
    p2p: "600 GB/s",
    currency: "usd",
    manufacturer: "NVIDIA",
    display_name: "A100 SXM4 80GB",
    supported_os: ["ubuntu-24.04-cuda-13.0-open"],
  },
  {
    id: "c01dd00d-0004-4972-ae4e-d429115d055b",
    instance_type: "1A100.80S.22V",
    price_per_hour: "1.29",
    spot_price: "0.56",
    description: "Dedicated Hardware Instance",
    cpu: { description: "22 CPU", number_of_cores: 22 },
    gpu: { description: "1x A100 SXM4 80GB", number_of_gpus: 1 },
    memory: { description: "120GB RAM", size_in_gigabytes: 120 },
    gpu_memory: { description: "80GB GPU RAM", size_in_gigabytes: 80 },
    storage: { description: "dynamic" },
    model: "A100",
    name: "A100 SXM4 80GB",
    p2p: "600 GB/s",
    currency: "usd",
    manufacturer: "NVIDIA",
    display_name: "A100 SXM4 80GB",
    supported_os: ["ubuntu-24.04-cuda-13.0-open"],
  },
  {
    id: "c01dd00d-0002-4972-ae4e-d429115d055b",
    instance_type: "CPU.4V.16G",
    price_per_hour: 0.0387,
    spot_price: 0.0155,
    description: "CPU Node",
    cpu: { description: "4 CPU", number_of_cores: 4 },
    gpu: { description: "", number_of_gpus: 0 },
    memory: { description: "16GB RAM", size_in_gigabytes: 16 },
    gpu_memory: { description: "", size_in_gigabytes: 0 },
    storage: { description: "dynamic" },
    model: "CPU Node",
    name: "AMD EPYC",
    p2p: "",
    currency: "usd",
    manufacturer: "AMD",
    display_name: "CPU Node",
    supported_os: ["ubuntu-24.04"],
  },
  {
    id: "c01dd00d-0003-4972-ae4e-d429115d055b",
    instance_type: "CPU.8V.32G",
    price_per_hour: 0.0774,
    spot_price: 0.031,
    description: "CPU Node",
    cpu: { description: "8 CPU", number_of_cores: 8 },
    gpu: { description: "", number_of_gpus: 0 },
    memory: { description: "32GB RAM", size_in_gigabytes: 32 },
    gpu_memory: { description: "", size_in_gigabytes: 0 },
    storage: { description: "dynamic" },
    model: "CPU Node",
    name: "AMD EPYC",
    p2p: "",
    currency: "usd",
    manufacturer: "AMD",
    display_name: "CPU Node",
    supported_os: ["ubuntu-24.04"],
  },
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
  os_volume: { name: string; size: number } | null;
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

async function readBody(request: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  if (chunks.length === 0) return undefined;
  const text = Buffer.concat(chunks).toString("utf8");
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** Starts the fake on loopback; with `hosts`, each new instance is the next free one of them. */
export async function startFakeVerda(options: { hosts?: readonly TestbedHost[] } = {}): Promise<FakeVerda> {
  const hosts = options.hosts ?? [];
  const instances = new Map<string, FakeVerdaInstance>();
  const sshKeys = new Map<string, { id: string; name: string; key: string; fingerprint: string }>();
  const requests: RecordedVerdaRequest[] = [];
  const tokens = new Set<string>();
  const capacity = { onDemand: Number.POSITIVE_INFINITY, spot: Number.POSITIVE_INFINITY };
  let nextAddress = 10;

  const json = (response: ServerResponse, status: number, answer?: unknown) => {
    response.writeHead(status, { "content-type": "application/json" });
    response.end(answer === undefined ? undefined : JSON.stringify(answer));
  };
  // Creations answer the new id as plain text (docs: "Deploy new instance" → 202, the instance id).
  const text = (response: ServerResponse, status: number, answer: string) => {
    response.writeHead(status, { "content-type": "text/plain" });
    response.end(answer);
  };
  // Errors, as the docs' error answers show them: `{ code, message }`.
  const error = (response: ServerResponse, status: number, code: string, message: string) =>
    json(response, status, { code, message });

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
      os_volume_id: randomUUID(),
      location: instance.location,
      is_spot: instance.is_spot,
      contract: instance.is_spot ? "SPOT" : "PAY_AS_YOU_GO",
      pricing: "FIXED_PRICE",
    };
  };

  const handle = async (request: IncomingMessage, response: ServerResponse) => {
    const url = new URL(request.url ?? "/", "http://verda");
    const body = await readBody(request);
    const authorization = request.headers.authorization;
    requests.push({
      method: request.method ?? "",
      path: url.pathname,
      query: url.searchParams,
      authorization,
      body,
    });
    const route = `${request.method} ${url.pathname.replace(/^\/v1/, "")}`;

    // Docs: "Authentication" → "Generate access token" (client credentials in a JSON body).
    if (route === "POST /oauth2/token") {
      const credentials = body as Record<string, unknown> | undefined;
      if (
        credentials?.grant_type !== "client_credentials" ||
        credentials.client_id !== TEST_CLIENT_ID ||
        credentials.client_secret !== TEST_CLIENT_SECRET
      )
        return error(response, 401, "unauthorized_request", "Invalid client credentials");
      const token = `eyJ${randomBytes(16).toString("hex")}`;
      tokens.add(token);
      return json(response, 200, {
        access_token: token,
        token_type: "Bearer",
        expires_in: 3600,
        refresh_token: `eyR${randomBytes(16).toString("hex")}`,
        scope: "cloud-api-v1",
      });
    }
    const token = authorization?.replace(/^Bearer /, "");
    if (!token || !tokens.has(token))
      return error(response, 401, "unauthorized_request", "Access token is invalid");

    if (route === "GET /instance-types") return json(response, 200, INSTANCE_TYPES);
    if (route === "GET /instance-availability") {
      const spot = url.searchParams.get("is_spot") === "true";
      const location = url.searchParams.get("location_code");
      const list = spot ? AVAILABILITY.spot : AVAILABILITY.onDemand;
      return json(
        response,
        200,
        list.filter((entry) => location === null || entry.location_code === location),
      );
    }
    // Docs: "SSH Keys" → "Get all SSH keys", "Add SSH key" ({ name, key } → the key's id), "Delete SSH key".
    if (route === "GET /ssh-keys") return json(response, 200, [...sshKeys.values()]);
    if (route === "POST /ssh-keys") {
      const { name, key } = (body ?? {}) as { name?: unknown; key?: unknown };
      if (typeof name !== "string" || typeof key !== "string" || !/^ssh-\S+ \S+/.test(key))
        return error(response, 400, "invalid_request", "name and a valid public key are required");
      const id = randomUUID();
      sshKeys.set(id, { id, name, key, fingerprint: `SHA256:${randomBytes(8).toString("hex")}` });
      return text(response, 201, id);
    }
    const sshKey = /^DELETE \/ssh-keys\/([^/]+)$/.exec(route);
    if (sshKey) {
      if (!sshKeys.delete(decodeURIComponent(sshKey[1] ?? "")))
        return error(response, 404, "not_found", "SSH key not found");
      return json(response, 200);
    }
    // Docs: "Instances" → "Get instances" (every instance not deleted), "Deploy new instance",
    // "Get instance by ID", "Perform action on instance or multiple instances" (PUT, action "delete").
    if (route === "GET /instances") return json(response, 200, [...instances.values()].map(answerOf));
    if (route === "POST /instances") {
      const wanted = (body ?? {}) as Record<string, unknown>;
      const type = INSTANCE_TYPES.find((entry) => entry.instance_type === wanted.instance_type);
      const spot = wanted.is_spot === true;
      const location = typeof wanted.location_code === "string" ? wanted.location_code : "FIN-01";
      if (!type)
        return error(
          response,
          400,
          "invalid_request",
          `Invalid instance type ${String(wanted.instance_type)}`,
        );
      if (typeof wanted.image !== "string" || wanted.image === "")
        return error(response, 400, "invalid_request", "image is required");
      if (typeof wanted.hostname !== "string" || wanted.hostname === "")
        return error(response, 400, "invalid_request", "hostname is required");
      const keyIds = Array.isArray(wanted.ssh_key_ids) ? (wanted.ssh_key_ids as string[]) : [];
      if (keyIds.some((id) => !sshKeys.has(id)))
        return error(response, 400, "invalid_request", "Unknown SSH key");
      const available = (spot ? AVAILABILITY.spot : AVAILABILITY.onDemand).find(
        (entry) => entry.location_code === location,
      );
      const market = spot ? "spot" : "onDemand";
      const host = hosts.find(
        (candidate) => ![...instances.values()].some((instance) => instance.host === candidate),
      );
      if (
        !available?.availabilities.includes(type.instance_type) ||
        capacity[market] <= 0 ||
        (hosts.length > 0 && host === undefined)
      )
        return error(
          response,
          503,
          "not_enough_resources",
          "Not enough resources available for this instance type",
        );
      capacity[market] -= 1;
      const instance: FakeVerdaInstance = {
        id: randomUUID(),
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
        os_volume: (wanted.os_volume as { name: string; size: number } | undefined) ?? null,
        ip: host?.host ?? `203.0.113.${nextAddress++}`,
        reads: 0,
        host,
      };
      instances.set(instance.id, instance);
      return text(response, 202, instance.id);
    }
    const one = /^GET \/instances\/([^/]+)$/.exec(route);
    if (one) {
      const instance = instances.get(decodeURIComponent(one[1] ?? ""));
      if (!instance) return error(response, 404, "not_found", "Instance not found");
      instance.reads += 1;
      if (instance.status === "provisioning" && instance.reads > 1) instance.status = "running";
      return json(response, 200, answerOf(instance));
    }
    if (route === "PUT /instances") {
      const { action, id } = (body ?? {}) as { action?: unknown; id?: unknown };
      const ids = Array.isArray(id) ? (id as string[]) : typeof id === "string" ? [id] : [];
      if (action !== "delete" || ids.length === 0)
        return error(response, 400, "invalid_request", "action and id are required");
      if (ids.some((entry) => !instances.has(entry)))
        return error(response, 404, "not_found", "Instance not found");
      for (const entry of ids) instances.delete(entry);
      return json(response, 202);
    }
    return error(response, 404, "not_found", `No route ${route}`);
  };

  const server = createServer((request, response) => {
    handle(request, response).catch((failure: unknown) => error(response, 500, "internal", String(failure)));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    apiUrl: `http://127.0.0.1:${port}/v1`,
    instances,
    sshKeys,
    requests,
    capacity,
    tokens,
    leftovers: () => [
      ...[...instances.values()].map(
        (instance) => `instance ${instance.id} ${instance.hostname} (${instance.status})`,
      ),
      ...[...sshKeys.values()].map((key) => `SSH key ${key.name}`),
    ],
    reset() {
      requests.length = 0;
      instances.clear();
      sshKeys.clear();
      capacity.onDemand = Number.POSITIVE_INFINITY;
      capacity.spot = Number.POSITIVE_INFINITY;
    },
    async [Symbol.asyncDispose]() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
