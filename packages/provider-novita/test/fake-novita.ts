/**
 * A fake of Novita AI's GPU instance API, serving on loopback, built from its API reference
 * (https://novita.ai/docs/api-reference/): each route below names the page whose request and answer
 * shapes it follows. With a test bed, each new instance is one of its hosts (its SSH port mapping the
 * host's address), so a whole pool runs on real SSH hosts.
 */
import { randomBytes } from "node:crypto";
import {
  type FakeFaultSwitches,
  fakeFaultSwitches,
  fakeRoutes,
  jsonAnswer,
  startFakeRestServer,
  type TestbedHost,
  testbedHostPool,
} from "@skyward/testing";

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
  /**
   * Faults of a real marketplace: lose the answer of the next create (the instance is made, the client
   * gets a 500), and bill instances at `priceFactor` times the product's listed price (a price that
   * moved between the listing and the create); answer 404 to the next `notFoundReads` reads of an
   * instance (one a moment behind its create).
   */
  faults: { loseNextCreateAnswer: boolean; priceFactor: number; notFoundReads: number };
  /** The fault matrix's switches (a 429 storm, an unknown list shape) and every instance created, at its price in USD. */
  readonly switches: FakeFaultSwitches;
  /** Novita takes the instance back (a spot instance reclaimed): it is gone. */
  reclaim(id: string): Promise<void>;
  /** Runs each instance's boot watchdog as if its time were up with no worker: an armed one is deleted. */
  fireBootWatchdogs(): Promise<void>;
  /** The instances not deleted, in words. */
  leftovers(): string[];
  /** Forgets requests and instances, and makes capacity unlimited again. */
  reset(): void;
}

/** Starts the fake on loopback; with `hosts`, each new instance is the next free one of them. */
export async function startFakeNovita(options: { hosts?: readonly TestbedHost[] } = {}): Promise<FakeNovita> {
  const hosts = await testbedHostPool<string>(options.hosts ?? []);
  const instances = new Map<string, FakeNovitaInstance>();
  const capacity = { onDemand: Number.POSITIVE_INFINITY, spot: Number.POSITIVE_INFINITY };
  const faults = { loseNextCreateAnswer: false, priceFactor: 1, notFoundReads: 0 };
  let nextPort = 30_000;
  const switches = fakeFaultSwitches();

  // Error answers as the reference shows them: `{ code, reason, message, metadata }`.
  const error = (status: number, reason: string, message: string) =>
    jsonAnswer(status, { code: status, reason, message, metadata: {} });

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

  const routes = fakeRoutes(
    {
      "GET /products": ({ query }) => {
        const method = query.get("billingMethod") ?? "onDemand";
        return jsonAnswer(200, {
          data: PRODUCTS.filter((product) => product.billingMethods.includes(method)).filter(
            (product) => !query.get("clusterId") || product.regions.includes(query.get("clusterId") ?? ""),
          ),
        });
      },
      // https://novita.ai/docs/api-reference/gpu-instance-create-instance: the body's fields, `{ id }` back.
      "POST /gpu/instance/create": ({ body }) => {
        const wanted = (body ?? {}) as Record<string, unknown>;
        const product = PRODUCTS.find((entry) => entry.id === wanted.productId);
        if (!product) return error(400, "INVALID_ARGUMENT", `product ${String(wanted.productId)} not found`);
        const gpuNum = wanted.gpuNum;
        if (typeof gpuNum !== "number" || !Number.isInteger(gpuNum) || gpuNum < 1 || gpuNum > 8)
          return error(400, "INVALID_ARGUMENT", "gpuNum must be in [1, 8]");
        const rootfsSize = wanted.rootfsSize;
        if (typeof rootfsSize !== "number" || rootfsSize < 10 || rootfsSize > 6144)
          return error(400, "INVALID_ARGUMENT", "rootfsSize must be in [10, 6144]");
        if (typeof wanted.imageUrl !== "string" || wanted.imageUrl === "")
          return error(400, "INVALID_ARGUMENT", "imageUrl is required");
        if (wanted.kind !== "gpu") return error(400, "INVALID_ARGUMENT", "kind must be gpu");
        // "The maximum value is dynamically limited by available storage resources and can be queried
        // via the product list API" (Create GPU Instance → rootfsSize): the product's `maxRootFS`.
        if (rootfsSize > product.maxRootFS)
          return error(
            400,
            "INVALID_ARGUMENT",
            `rootfsSize exceeds the product's maximum ${product.maxRootFS}`,
          );
        const spot = wanted.billingMode === "spot";
        const market = spot ? "spot" : "onDemand";
        const id = randomBytes(8).toString("hex");
        const stocked =
          product.availableDeploy && product.billingMethods.includes(market) && capacity[market] > 0;
        const host = stocked ? hosts.take(id) : undefined;
        if (!stocked || (hosts.hosts.length > 0 && host === undefined))
          return error(400, "NOT_ENOUGH_RESOURCE", "not enough gpu resources in stock");
        capacity[market] -= 1;
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
          instancePrice: String(
            (spot ? Number(product.spotPrice) : product.price) * gpuNum * faults.priceFactor,
          ),
          reads: 0,
          host,
          address: host ? `${host.host}:${host.port}` : `203.0.113.7:${nextPort++}`,
        });
        const created = instances.get(id) as FakeNovitaInstance;
        switches.created.push({ id, hourlyPrice: Number(created.instancePrice) / 100_000 });
        if (faults.loseNextCreateAnswer) {
          faults.loseNextCreateAnswer = false;
          return error(500, "INTERNAL", "upstream connection lost");
        }
        return jsonAnswer(200, { id });
      },
      // https://novita.ai/docs/api-reference/gpu-instance-get-instance (`?instanceId=`).
      "GET /gpu/instance": ({ query }) => {
        const instance = instances.get(query.get("instanceId") ?? "");
        if (!instance || faults.notFoundReads-- > 0) return error(404, "NOT_FOUND", "instance not found");
        instance.reads += 1;
        if (instance.status === "pulling" && instance.reads > 1) instance.status = "running";
        return jsonAnswer(200, answerOf(instance));
      },
      // https://novita.ai/docs/api-reference/gpu-instance-list-instances (`pageSize`, `pageNum` required).
      "GET /gpu/instances": ({ query }) => {
        const pageSize = Number(query.get("pageSize"));
        const pageNum = Number(query.get("pageNum"));
        if (!Number.isInteger(pageSize) || !Number.isInteger(pageNum) || query.get("pageSize") === null)
          return error(400, "INVALID_ARGUMENT", "pageSize and pageNum are required");
        // `name`: "Instance name (supports fuzzy search)".
        const name = query.get("name") ?? "";
        const all = [...instances.values()].filter((instance) => instance.name.includes(name));
        const page = all.slice((pageNum - 1) * pageSize, pageNum * pageSize);
        if (switches.listShapeBroken) return jsonAnswer(200, { data: { list: page.map(answerOf) } });
        return jsonAnswer(200, { instances: page.map(answerOf), pageSize, pageNum, total: all.length });
      },
      // The reference's "Delete Instance" (`{ instanceId }`).
      "POST /gpu/instance/delete": async ({ body }) => {
        const { instanceId } = (body ?? {}) as { instanceId?: unknown };
        if (typeof instanceId !== "string" || !instances.delete(instanceId))
          return error(404, "NOT_FOUND", "instance not found");
        await hosts.release(instanceId);
        return jsonAnswer(200, {});
      },
    },
    ({ method, path }) => error(404, "NOT_FOUND", `no route ${method} ${path}`),
  );

  const server = await startFakeRestServer({
    prefix: "/gpu-instance/openapi/v1",
    record: ({ method, url, query, headers, body }): RecordedNovitaRequest => ({
      method,
      path: url.pathname,
      query,
      authorization: headers.authorization,
      body,
    }),
    handle: (request) =>
      switches.takeRateLimit(error(429, "TOO_MANY_REQUESTS", "rate limit exceeded")) ??
      (request.headers.authorization === `Bearer ${TEST_API_KEY}`
        ? routes(request)
        : error(401, "UNAUTHORIZED", "invalid api key")),
    failed: (failure) => error(500, "INTERNAL", String(failure)),
  });
  return {
    apiUrl: server.url,
    instances,
    requests: server.requests,
    capacity,
    faults,
    switches,
    async reclaim(id) {
      instances.delete(id);
      await hosts.release(id);
    },
    async fireBootWatchdogs() {
      for (const instance of [...instances.values()]) {
        const env = new Map(instance.envs.map((entry) => [entry.key, entry.value]));
        const program = Buffer.from(env.get("SKYWARD_SELF_DESTRUCT") ?? "", "base64").toString("utf8");
        // Armed: a watchdog time, the start command that runs it, and a self-destruct through this API.
        const armed =
          Number(env.get("SKYWARD_WATCHDOG_SECONDS")) > 0 &&
          instance.command.includes("SKYWARD_WATCHDOG_SECONDS") &&
          program.includes(server.url) &&
          program.includes("/gpu/instance/delete");
        if (armed) {
          instances.delete(instance.id);
          await hosts.release(instance.id);
        }
      }
    },
    leftovers: () =>
      [...instances.values()].map(
        (instance) => `instance ${instance.id} ${instance.name} (${instance.status})`,
      ),
    reset() {
      server.requests.length = 0;
      instances.clear();
      void hosts.releaseAll();
      capacity.onDemand = Number.POSITIVE_INFINITY;
      capacity.spot = Number.POSITIVE_INFINITY;
      faults.loseNextCreateAnswer = false;
      faults.priceFactor = 1;
      faults.notFoundReads = 0;
    },
    [Symbol.asyncDispose]: () => server.close(),
  };
}
