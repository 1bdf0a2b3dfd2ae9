/**
 * A fake of Novita AI's GPU instance API, serving on loopback, built from its API reference
 * (https://novita.ai/docs/api-reference/): each route below names the page whose request and answer
 * shapes it follows. With a test bed, each new instance is one of its hosts (its SSH port mapping the
 * host's address), so a whole pool runs on real SSH hosts.
 */
import { randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { TestbedHost } from "@skyward/testing";

export const TEST_API_KEY = "sk_novita_test_5ecret_0123456789";

/**
 * `GET /products` (https://novita.ai/docs/api-reference/gpu-instance-list-products): `{ data: [...] }`
 * with `id`, `name`, `cpuPerGpu`, `memoryPerGpu`, `diskPerGpu`, `availableDeploy`, `minRootFS`,
 * `maxRootFS`, `regions`, `price` (a number) and `spotPrice` (a string), prices per GPU in units of
 * 1/100,000 USD per hour; `billingMethods` lists `onDemand`, `spot`, `monthly`.
 */
export const PRODUCTS = [
  {
    id: "1",
    name: "RTX 4090 24GB",
    cpuPerGpu: 16,
    memoryPerGpu: 62,
    diskPerGpu: 500,
    availableDeploy: true,
    minRootFS: 10,
    maxRootFS: 500,
    minLocalStorage: 0,
    maxLocalStorage: 500,
    regions: ["CN-HK-01", "US-CA-06"],
    price: 35_000,
    monthlyPrice: [{ price: 22_000_000, month: 1 }],
    billingMethods: ["onDemand", "spot", "monthly"],
    spotPrice: "17000",
  },
  {
    id: "8",
    name: "A100 SXM 80GB",
    cpuPerGpu: 16,
    memoryPerGpu: 120,
    diskPerGpu: 1000,
    availableDeploy: true,
    minRootFS: 10,
    maxRootFS: 1000,
    minLocalStorage: 0,
    maxLocalStorage: 1000,
    regions: ["US-CA-06"],
    price: 149_000,
    monthlyPrice: [],
    billingMethods: ["onDemand", "spot"],
    spotPrice: "75000",
  },
  {
    id: "12",
    name: "H100 SXM 80GB",
    cpuPerGpu: 24,
    memoryPerGpu: 200,
    diskPerGpu: 1000,
    availableDeploy: false,
    minRootFS: 10,
    maxRootFS: 1000,
    minLocalStorage: 0,
    maxLocalStorage: 1000,
    regions: ["US-CA-06"],
    price: 259_000,
    monthlyPrice: [],
    billingMethods: ["onDemand"],
    spotPrice: "",
  },
];

/** An instance as the fake keeps it (the fields of the "Get Instance" answer). */
export interface FakeNovitaInstance {
  id: string;
  name: string;
  clusterId: string;
  status: string;
  productId: string;
  productName: string;
  imageUrl: string;
  command: string;
  gpuNum: number;
  rootfsSize: number;
  billingMode: string;
  ports: string;
  envs: { key: string; value: string }[];
  createdAt: string;
  instancePrice: string;
  /** Reads while pulling: the instance runs after its first read. */
  reads: number;
  host: TestbedHost | undefined;
  address: string;
}

/** One request the fake received. */
export interface RecordedNovitaRequest {
  readonly method: string;
  readonly path: string;
  readonly query: URLSearchParams;
  readonly authorization: string | undefined;
  readonly body: unknown;
}

/** A running fake Novita API. */
export interface FakeNovita extends AsyncDisposable {
  /** Its base URL, `http://127.0.0.1:PORT/gpu-instance/openapi/v1`: the provider's `apiUrl`. */
  readonly apiUrl: string;
  readonly instances: Map<string, FakeNovitaInstance>;
  readonly requests: RecordedNovitaRequest[];
  /** Instances that can still be created before Novita answers "not enough resources"; Infinity by default. */
  capacity: { onDemand: number; spot: number };
  /** The instances not deleted, in words. */
  leftovers(): string[];
  /** Forgets requests and instances, and makes capacity unlimited again. */
  reset(): void;
}

async function readBody(request: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return chunks.length > 0 ? JSON.parse(Buffer.concat(chunks).toString("utf8")) : undefined;
}

/** Starts the fake on loopback; with `hosts`, each new instance is the next free one of them. */
export async function startFakeNovita(options: { hosts?: readonly TestbedHost[] } = {}): Promise<FakeNovita> {
  const hosts = options.hosts ?? [];
  const instances = new Map<string, FakeNovitaInstance>();
  const requests: RecordedNovitaRequest[] = [];
  const capacity = { onDemand: Number.POSITIVE_INFINITY, spot: Number.POSITIVE_INFINITY };
  let nextPort = 30_000;

  const json = (response: ServerResponse, status: number, answer: unknown) => {
    response.writeHead(status, { "content-type": "application/json" });
    response.end(JSON.stringify(answer));
  };
  // Error answers as the reference shows them: `{ code, reason, message, metadata }`.
  const error = (response: ServerResponse, status: number, reason: string, message: string) =>
    json(response, status, { code: status, reason, message, metadata: {} });

  const answerOf = (instance: FakeNovitaInstance) => {
    const running = instance.status === "running";
    return {
      id: instance.id,
      name: instance.name,
      clusterId: instance.clusterId,
      clusterName: instance.clusterId,
      status: instance.status,
      imageUrl: instance.imageUrl,
      imageAuthId: "",
      command: instance.command,
      cpuNum: String(16 * instance.gpuNum),
      memory: String(62 * instance.gpuNum),
      gpuNum: String(instance.gpuNum),
      productId: instance.productId,
      productName: instance.productName,
      rootfsSize: instance.rootfsSize,
      billingMode: instance.billingMode,
      createdAt: instance.createdAt,
      instancePrice: instance.instancePrice,
      envs: instance.envs,
      statusError: { state: "", message: "" },
      // The port mapping (Get Instance → `portMappings[].endpoint`) shows once the instance runs.
      portMappings: running ? [{ port: 22, endpoint: instance.address, type: "tcp" }] : [],
      volumeMounts: [],
      kind: "gpu",
    };
  };

  const handle = async (request: IncomingMessage, response: ServerResponse) => {
    const url = new URL(request.url ?? "/", "http://novita");
    const body = await readBody(request);
    const authorization = request.headers.authorization;
    requests.push({
      method: request.method ?? "",
      path: url.pathname,
      query: url.searchParams,
      authorization,
      body,
    });
    if (authorization !== `Bearer ${TEST_API_KEY}`)
      return error(response, 401, "UNAUTHORIZED", "invalid api key");
    const route = `${request.method} ${url.pathname.replace(/^\/gpu-instance\/openapi\/v1/, "")}`;

    if (route === "GET /products") {
      const method = url.searchParams.get("billingMethod") ?? "onDemand";
      return json(response, 200, {
        data: PRODUCTS.filter((product) => product.billingMethods.includes(method)).filter(
          (product) =>
            !url.searchParams.get("clusterId") ||
            product.regions.includes(url.searchParams.get("clusterId") ?? ""),
        ),
      });
    }
    // https://novita.ai/docs/api-reference/gpu-instance-create-instance: the body's fields, `{ id }` back.
    if (route === "POST /gpu/instance/create") {
      const wanted = (body ?? {}) as Record<string, unknown>;
      const product = PRODUCTS.find((entry) => entry.id === wanted.productId);
      if (!product)
        return error(response, 400, "INVALID_ARGUMENT", `product ${String(wanted.productId)} not found`);
      const gpuNum = wanted.gpuNum;
      if (typeof gpuNum !== "number" || !Number.isInteger(gpuNum) || gpuNum < 1 || gpuNum > 8)
        return error(response, 400, "INVALID_ARGUMENT", "gpuNum must be in [1, 8]");
      const rootfsSize = wanted.rootfsSize;
      if (typeof rootfsSize !== "number" || rootfsSize < 10 || rootfsSize > 6144)
        return error(response, 400, "INVALID_ARGUMENT", "rootfsSize must be in [10, 6144]");
      if (typeof wanted.imageUrl !== "string" || wanted.imageUrl === "")
        return error(response, 400, "INVALID_ARGUMENT", "imageUrl is required");
      if (wanted.kind !== "gpu") return error(response, 400, "INVALID_ARGUMENT", "kind must be gpu");
      const spot = wanted.billingMode === "spot";
      const market = spot ? "spot" : "onDemand";
      const host = hosts.find(
        (candidate) => ![...instances.values()].some((instance) => instance.host === candidate),
      );
      if (
        !product.availableDeploy ||
        !product.billingMethods.includes(market) ||
        capacity[market] <= 0 ||
        (hosts.length > 0 && host === undefined)
      )
        return error(response, 400, "NOT_ENOUGH_RESOURCE", "not enough gpu resources in stock");
      capacity[market] -= 1;
      const id = randomBytes(8).toString("hex");
      instances.set(id, {
        id,
        name: typeof wanted.name === "string" ? wanted.name : "",
        clusterId: typeof wanted.clusterId === "string" ? wanted.clusterId : (product.regions[0] ?? ""),
        status: "pulling",
        productId: product.id,
        productName: product.name,
        imageUrl: wanted.imageUrl,
        command: typeof wanted.command === "string" ? wanted.command : "",
        gpuNum,
        rootfsSize,
        billingMode: market,
        ports: typeof wanted.ports === "string" ? wanted.ports : "",
        envs: Array.isArray(wanted.envs) ? (wanted.envs as { key: string; value: string }[]) : [],
        createdAt: new Date().toISOString(),
        instancePrice: String((spot ? Number(product.spotPrice) : product.price) * gpuNum),
        reads: 0,
        host,
        address: host ? `${host.host}:${host.port}` : `203.0.113.7:${nextPort++}`,
      });
      return json(response, 200, { id });
    }
    // https://novita.ai/docs/api-reference/gpu-instance-get-instance (`?instanceId=`).
    if (route === "GET /gpu/instance") {
      const instance = instances.get(url.searchParams.get("instanceId") ?? "");
      if (!instance) return error(response, 404, "NOT_FOUND", "instance not found");
      instance.reads += 1;
      if (instance.status === "pulling" && instance.reads > 1) instance.status = "running";
      return json(response, 200, answerOf(instance));
    }
    // https://novita.ai/docs/api-reference/gpu-instance-list-instances (`pageSize`, `pageNum` required).
    if (route === "GET /gpu/instances") {
      const pageSize = Number(url.searchParams.get("pageSize"));
      const pageNum = Number(url.searchParams.get("pageNum"));
      if (
        !Number.isInteger(pageSize) ||
        !Number.isInteger(pageNum) ||
        url.searchParams.get("pageSize") === null
      )
        return error(response, 400, "INVALID_ARGUMENT", "pageSize and pageNum are required");
      const all = [...instances.values()];
      const page = all.slice((pageNum - 1) * pageSize, pageNum * pageSize);
      return json(response, 200, { instances: page.map(answerOf), pageSize, pageNum, total: all.length });
    }
    // The reference's "Delete Instance" (`{ instanceId }`).
    if (route === "POST /gpu/instance/delete") {
      const { instanceId } = (body ?? {}) as { instanceId?: unknown };
      if (typeof instanceId !== "string" || !instances.delete(instanceId))
        return error(response, 404, "NOT_FOUND", "instance not found");
      return json(response, 200, {});
    }
    return error(response, 404, "NOT_FOUND", `no route ${route}`);
  };

  const server = createServer((request, response) => {
    handle(request, response).catch((failure: unknown) => error(response, 500, "INTERNAL", String(failure)));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    apiUrl: `http://127.0.0.1:${port}/gpu-instance/openapi/v1`,
    instances,
    requests,
    capacity,
    leftovers: () =>
      [...instances.values()].map(
        (instance) => `instance ${instance.id} ${instance.name} (${instance.status})`,
      ),
    reset() {
      requests.length = 0;
      instances.clear();
      capacity.onDemand = Number.POSITIVE_INFINITY;
      capacity.spot = Number.POSITIVE_INFINITY;
    },
    async [Symbol.asyncDispose]() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
