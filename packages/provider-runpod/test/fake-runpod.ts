/**
 * A fake RunPod for tests: msw handlers answering RunPod's REST API v2 and, for interruptible pods
 * only, its GraphQL endpoint, with the documented shapes (the JSON under `fixtures/`), keeping pods in
 * memory and recording every request. Nothing leaves the process: unhandled requests fail the test.
 *
 * Where each shape and behaviour comes from (the v2 OpenAPI schema,
 * https://docs.runpod.io/api-reference-v2/openapi.json, and the pages below):
 * - `fixtures/catalog-gpus.json`, `machines.json`: `GET /v2/catalog/gpus`
 *   (https://docs.runpod.io/api-reference-v2/catalog/list-gpu-types). The catalog's `availability`,
 *   `dataCenters` and `cudaVersions` are computed from the machines for the request's `count`, `cloud` and
 *   `minCudaVersion`/`cudaVersions`, as that page describes them; `NONE` is sold out.
 * - `fixtures/catalog-cpus.json`: `GET /v2/catalog/cpus` (…/catalog/list-cpu-types).
 * - `fixtures/datacenters.json`: `GET /v2/catalog/datacenters` (…/catalog/list-data-centers); which
 *   ones have global networking: https://docs.runpod.io/pods/networking.
 * - Pods: `POST /v2/pods`, `GET /v2/pods`, `GET|DELETE /v2/pods/{id}` (…/pods/create-a-pod, list-pods,
 *   get-a-pod, terminate-a-pod). A pod is `PROVISIONING` while its image is pulled (`imagePullLookups`
 *   lookups), then `STARTING`, then `RUNNING` with `ssh.direct` and its port 22 in `runtime.ports`.
 *   `gpu.minCudaVersion` / `allowedCudaVersions` pick a machine whose CUDA matches, else a 400 (capacity:
 *   "matching is exact… yields a capacity error"). Without them the pod may land on an older-driver
 *   machine: a CUDA 12.9 image there never starts — the pod stays `RUNNING` with no ports and bills
 *   (what real accounts do, issue 19). `globalNetworking` gives the pod a private `10.65.x.y` address and
 *   is refused (400) outside the data centers that have it.
 * - `fixtures/errors.json`: the RFC 9457 problem objects of the v2 reference; GraphQL's refusal of an
 *   interruptible pod (https://docs.runpod.io/sdks/graphql/manage-pods).
 * - `fixtures/spot-prices.json`: GraphQL `gpuTypes { lowestPrice { minimumBidPrice stockStatus } }`; a
 *   `null` stock status is sold out. `podRentInterruptable` refuses a bid below the minimum.
 * - The fault matrix's faults (`faults`): a 429 storm answers a problem object of the v2 reference's
 *   shape (status 429) with the `Retry-After` the matrix asks for; a create whose answer is lost makes the
 *   pod and answers a gateway's 502; an unknown list shape names the list `items` (no `pods`); a reclaimed
 *   interruptible pod is `EXITED` (stopped, not terminated: it keeps its disk and bills for it until
 *   terminated, so it counts as billing); the boot watchdog terminates
 *   every pod whose start command armed one (see `runpod-boot.ts`).
 */
import { type BillingInstance, type FaultController, faultSwitches } from "@skyward/testing";
import { HttpResponse, http } from "msw";
import { type SetupServer, setupServer } from "msw/node";
import cpuCatalog from "./fixtures/catalog-cpus.json" with { type: "json" };
import gpuCatalog from "./fixtures/catalog-gpus.json" with { type: "json" };
import datacenters from "./fixtures/datacenters.json" with { type: "json" };
import errors from "./fixtures/errors.json" with { type: "json" };
import machineFixture from "./fixtures/machines.json" with { type: "json" };
import spotPrices from "./fixtures/spot-prices.json" with { type: "json" };

/** The API key the fake accepts. */
export const TEST_API_KEY = "rp_test_5ecret_key_0123456789";

/** One request the fake received. */
export interface RecordedRequest {
  readonly method: string;
  readonly url: URL;
  readonly authorization: string | null;
  /** The GraphQL operation name, for GraphQL requests. */
  readonly operation: string | undefined;
  readonly query: string | undefined;
  readonly variables: Record<string, unknown> | undefined;
  /** The JSON body. */
  readonly body: unknown;
}

/** A machine pods of one GPU type can be placed on. */
export interface FakeMachine {
  cloud: "SECURE" | "COMMUNITY";
  dataCenterId: string;
  cudaVersion: string;
  /** GPUs still free. */
  free: number;
}

/** A pod as the fake keeps it. */
export interface FakePod {
  id: string;
  name: string;
  status: "PROVISIONING" | "STARTING" | "RUNNING" | "EXITED" | "TERMINATED";
  cost: number;
  env: Record<string, string>;
  spot: boolean;
  image: string;
  /** How often `GET /v2/pods/{id}` looked it up. */
  lookups: number;
  /** The machine it runs on (GPU pods). */
  machine: FakeMachine | undefined;
  /** False when its image needs a newer CUDA than its machine runs: it never starts. */
  bootable: boolean;
  publicIp: string;
  sshPort: number;
  /** Its global-networking address, when it asked for one. */
  privateIp: string | undefined;
  /** What created it: the REST body or the GraphQL input. */
  input: Record<string, unknown>;
}

/** Where a pod's SSH answers, and what happens when pods come and go (a test bed's hosts). */
export interface FakeRunPodOptions {
  /** The address and port of the pod's sshd; default a documentation address. */
  sshEndpoint?: (pod: FakePod) => { host: string; port: number; privateIp?: string };
  /** Called when a pod is created (its `PUBLIC_KEY` is in `pod.env`). */
  onCreate?: (pod: FakePod) => Promise<void> | void;
  /** Called when a pod is terminated. */
  onTerminate?: (pod: FakePod) => Promise<void> | void;
}

/** The fake, its state and its controls. */
export interface FakeRunPod {
  readonly server: SetupServer;
  readonly requests: RecordedRequest[];
  readonly pods: Map<string, FakePod>;
  /** The machines of each GPU type (a copy of `fixtures/machines.json`, changed by rentals). */
  machines: Record<string, FakeMachine[]>;
  /** Pods that can still be created before RunPod reports no capacity; Infinity by default. */
  capacity: { onDemand: number; spot: number; cpu: number };
  /** Lookups a pod spends pulling its image (`PROVISIONING`) before `STARTING`; default 2. */
  imagePullLookups: number;
  /** Answers the next `count` requests with `response()` instead of handling them. */
  interrupt(count: number, response: () => Response): void;
  /** The fault matrix's controller (`runFaultMatrix` of @skyward/testing): what bills, what was ever created, its faults. */
  readonly faults: FaultController;
  /** The GraphQL requests of one operation (`SkywardSpotPrices`…). */
  operations(name: string): RecordedRequest[];
  /** The REST requests to a path (`/v2/pods`), optionally of one method. */
  to(path: string | RegExp, method?: string): RecordedRequest[];
  /** Forgets requests, pods and pending interruptions; machines, capacity and delays back to defaults. */
  reset(): void;
}

const API = "https://api.runpod.io/v2";
const GRAPHQL_URL = "https://api.runpod.io/graphql";

/** `a` ≥ `b` for `major.minor` versions. */
function atLeast(a: string, b: string): boolean {
  const [aMajor = 0, aMinor = 0] = a.split(".").map(Number);
  const [bMajor = 0, bMinor = 0] = b.split(".").map(Number);
  return aMajor !== bMajor ? aMajor > bMajor : aMinor >= bMinor;
}

/** The CUDA version an image needs, from its tag (`cuda1290`, `cu1281`, `cuda:12.4.1`). */
function imageCuda(image: string): string | undefined {
  const match =
    /cuda[:\-_]?(\d{1,2})\.(\d{1,2})/i.exec(image) ??
    /cuda(\d{2})(\d)\d(?!\d)/i.exec(image) ??
    /(?:^|[^a-z])cu(\d{2})(\d)\d?(?!\d)/i.exec(image);
  return match ? `${Number(match[1])}.${Number(match[2])}` : undefined;
}

function level(free: number): "NONE" | "LOW" | "MEDIUM" | "HIGH" {
  return free <= 0 ? "NONE" : free < 4 ? "LOW" : free < 8 ? "MEDIUM" : "HIGH";
}

function problem(answer: { status: number }, detail?: string) {
  return HttpResponse.json(detail ? { ...answer, detail } : answer, {
    status: answer.status,
    headers: { "content-type": "application/problem+json" },
  });
}

/** Creates the fake; `server.listen({ onUnhandledFrame: "error" })` starts it, `server.close()` stops it. */
export function startFakeRunPod(options: FakeRunPodOptions = {}): FakeRunPod {
  const requests: RecordedRequest[] = [];
  const pods = new Map<string, FakePod>();
  const interruptions: (() => Response)[] = [];
  const freshMachines = () => structuredClone(machineFixture) as Record<string, FakeMachine[]>;
  let nextPod = 1;
  /** Every pod made, at what it bills. */
  const created: BillingInstance[] = [];
  const switches = faultSwitches({ title: "Too Many Requests", status: 429 }, "application/problem+json");
  const answered = switches.createAnswer;
  const fake: FakeRunPod = {
    server: undefined as unknown as SetupServer,
    requests,
    pods,
    machines: freshMachines(),
    capacity: {
      onDemand: Number.POSITIVE_INFINITY,
      spot: Number.POSITIVE_INFINITY,
      cpu: Number.POSITIVE_INFINITY,
    },
    imagePullLookups: 2,
    interrupt(count, response) {
      for (let index = 0; index < count; index += 1) interruptions.push(response);
    },
    faults: {
      live: () => [...pods.values()].map((pod) => ({ id: pod.id, hourlyPrice: pod.cost })),
      created: () => [...created],
      ...switches.controller,
      reclaim(id) {
        const pod = pods.get(id);
        if (pod) pod.status = "EXITED";
      },
      fireBootWatchdogs() {
        for (const pod of [...pods.values()])
          if (/base64 -d \| bash; exec /.test(String(pod.input.args ?? pod.input.dockerArgs ?? "")))
            pods.delete(pod.id);
      },
    },
    operations(name) {
      return requests.filter((request) => request.operation === name);
    },
    to(path, method) {
      return requests.filter(
        (request) =>
          request.url.href.startsWith(API) &&
          (typeof path === "string" ? request.url.pathname === path : path.test(request.url.pathname)) &&
          (method === undefined || request.method === method),
      );
    },
    reset() {
      requests.length = 0;
      pods.clear();
      interruptions.length = 0;
      fake.machines = freshMachines();
      fake.imagePullLookups = 2;
      created.length = 0;
      switches.reset();
      fake.capacity = {
        onDemand: Number.POSITIVE_INFINITY,
        spot: Number.POSITIVE_INFINITY,
        cpu: Number.POSITIVE_INFINITY,
      };
    },
  };

  /** The machines of `gpuId` in `cloud` whose CUDA satisfies the constraint. */
  const candidates = (
    gpuId: string,
    cloud: string,
    constraint: { min?: string | undefined; allowed?: readonly string[] | undefined },
  ) =>
    (fake.machines[gpuId] ?? []).filter(
      (machine) =>
        machine.cloud === cloud &&
        (constraint.min === undefined || atLeast(machine.cudaVersion, constraint.min)) &&
        (constraint.allowed === undefined || constraint.allowed.includes(machine.cudaVersion)),
    );

  const newPod = async (
    input: Record<string, unknown>,
    details: {
      env: Record<string, string>;
      spot: boolean;
      cost: number;
      image: string;
      machine?: FakeMachine;
      globalNetworking: boolean;
    },
  ) => {
    const id = `fakepod${String(nextPod).padStart(6, "0")}`;
    const needs = imageCuda(details.image);
    const pod: FakePod = {
      id,
      name: String(input.name ?? ""),
      status: "PROVISIONING",
      cost: details.cost,
      env: details.env,
      spot: details.spot,
      image: details.image,
      lookups: 0,
      machine: details.machine,
      bootable: !details.machine || needs === undefined || atLeast(details.machine.cudaVersion, needs),
      publicIp: `203.0.113.${nextPod}`,
      sshPort: 40_000 + nextPod,
      privateIp: details.globalNetworking ? `10.65.0.${nextPod + 1}` : undefined,
      input,
    };
    if (options.sshEndpoint) {
      const endpoint = options.sshEndpoint(pod);
      pod.publicIp = endpoint.host;
      pod.sshPort = endpoint.port;
      if (pod.privateIp && endpoint.privateIp) pod.privateIp = endpoint.privateIp;
    }
    nextPod += 1;
    pods.set(id, pod);
    created.push({ id, hourlyPrice: pod.cost });
    await options.onCreate?.(pod);
    return pod;
  };

  const view = (pod: FakePod): Record<string, unknown> => {
    const running = pod.status === "RUNNING";
    const reachable = running && pod.bootable;
    const gpu = pod.input.gpu as { id: string; count?: number } | undefined;
    const cpu = pod.input.cpu as { id: string; vcpuCount: number } | undefined;
    return {
      id: pod.id,
      name: pod.name,
      image: pod.image,
      args: "",
      disk: pod.input.disk ?? pod.input.containerDiskInGb ?? 50,
      ports: ["22/tcp"],
      env: pod.env,
      registry: null,
      status: pod.status,
      actions: running ? ["stop", "restart", "terminate"] : ["terminate"],
      mounts: pod.input.mounts ?? {},
      ...(gpu ? { gpu: { id: gpu.id, count: gpu.count ?? 1 } } : {}),
      ...(pod.input.gpuTypeId ? { gpu: { id: pod.input.gpuTypeId, count: pod.input.gpuCount } } : {}),
      ...(cpu ? { cpu: { id: cpu.id, vcpuCount: cpu.vcpuCount, memory: cpu.vcpuCount * 2 } } : {}),
      cloud: pod.machine?.cloud ?? "SECURE",
      dataCenterId: pod.machine?.dataCenterId ?? "US-KS-2",
      cudaVersion: pod.machine?.cudaVersion ?? null,
      ssh: {
        proxy: {
          host: "ssh.runpod.io",
          port: 22,
          username: `${pod.id}-64411eb2`,
          command: `ssh ${pod.id}-64411eb2@ssh.runpod.io`,
        },
        direct: reachable
          ? {
              host: pod.publicIp,
              port: pod.sshPort,
              username: "root",
              command: `ssh root@${pod.publicIp} -p ${pod.sshPort}`,
            }
          : null,
      },
      template: null,
      cost: pod.status === "EXITED" || pod.status === "TERMINATED" ? 0 : pod.cost,
      locked: false,
      globalNetworking: pod.privateIp
        ? { enabled: true, ip: pod.privateIp, internalDns: `${pod.id}.runpod.internal` }
        : { enabled: false },
      runtime: running
        ? reachable
          ? { uptime: 42, ports: [{ private: 22, public: pod.sshPort, type: "tcp", ip: pod.publicIp }] }
          : {}
        : null,
      createdAt: "2026-11-24T12:00:00Z",
      startedAt: running ? "2026-11-24T12:02:00Z" : null,
    };
  };

  const catalogGpus = (url: URL) => {
    const include = url.searchParams.get("include");
    const product = url.searchParams.get("product");
    if ((include === "AVAILABILITY") !== (product !== null))
      return problem(errors.invalid, "include=AVAILABILITY requires product, and product requires it");
    const count = Number(url.searchParams.get("count") ?? "1");
    const cloud = url.searchParams.get("cloud") ?? "SECURE";
    const min = url.searchParams.get("minCudaVersion") ?? undefined;
    const allowed = url.searchParams.get("cudaVersions")?.split(",");
    const gpus = gpuCatalog.gpus.map((gpu) => {
      if (include !== "AVAILABILITY") return gpu;
      const usable = candidates(gpu.id, cloud, { min, allowed }).filter((machine) => machine.free >= count);
      const free = usable.reduce((sum, machine) => sum + machine.free, 0);
      const versions = [
        ...new Set(candidates(gpu.id, cloud, { min, allowed }).map((machine) => machine.cudaVersion)),
      ];
      const centers = [...new Set(usable.map((machine) => machine.dataCenterId))];
      return {
        ...gpu,
        availability: level(free),
        ...(centers.length > 0
          ? {
              dataCenters: centers.map((id) => ({
                id,
                name: id,
                availability: level(
                  usable.filter((machine) => machine.dataCenterId === id).reduce((sum, m) => sum + m.free, 0),
                ),
              })),
            }
          : {}),
        ...(versions.length > 0
          ? {
              cudaVersions: versions.map((version) => ({
                version,
                available: usable.some((m) => m.cudaVersion === version),
              })),
            }
          : {}),
      };
    });
    return HttpResponse.json({ gpus });
  };

  const createPod = async (body: Record<string, unknown>) => {
    const image = String(body.image ?? "");
    const env = (body.env ?? {}) as Record<string, string>;
    const centers = body.dataCenterIds as string[] | undefined;
    const globalNetworking = body.globalNetworking === true;
    if (globalNetworking) {
      const networked = new Set(
        datacenters.dataCenters.filter((center) => center.globalNetwork).map((center) => center.id),
      );
      if (!body.gpu || (centers ?? []).some((id) => !networked.has(id)))
        return problem(errors.noGlobalNetwork);
    }
    if (body.cpu) {
      const cpu = body.cpu as { id: string; vcpuCount: number };
      const flavor = cpuCatalog.cpus.find((entry) => entry.id === cpu.id);
      if (!flavor) return problem(errors.invalid, `unknown CPU flavor ${cpu.id}`);
      if (fake.capacity.cpu <= 0 || flavor.availability === "NONE") return problem(errors.noCapacity);
      fake.capacity.cpu -= 1;
      const pod = await newPod(body, {
        env,
        spot: false,
        cost: Math.round(flavor.price.securePerVcpu * cpu.vcpuCount * 1000) / 1000,
        image,
        globalNetworking: false,
      });
      return answered(HttpResponse.json(view(pod), { status: 201 }));
    }
    const gpu = body.gpu as {
      id: string;
      count?: number;
      minCudaVersion?: string;
      allowedCudaVersions?: string[];
    };
    const count = gpu.count ?? 1;
    const cloud = String(body.cloud ?? "SECURE");
    const type = gpuCatalog.gpus.find((entry) => entry.id === gpu.id);
    if (!type) return problem(errors.invalid, `unknown GPU type ${gpu.id}`);
    const machine = candidates(gpu.id, cloud, {
      min: gpu.minCudaVersion,
      allowed: gpu.allowedCudaVersions,
    }).find(
      (entry) =>
        entry.free >= count && (!centers || centers.length === 0 || centers.includes(entry.dataCenterId)),
    );
    if (!machine || fake.capacity.onDemand <= 0) return problem(errors.noCapacity);
    fake.capacity.onDemand -= 1;
    machine.free -= count;
    const perGpu = cloud === "COMMUNITY" ? type.price.community : type.price.secure;
    const pod = await newPod(body, {
      env,
      spot: false,
      cost: Math.round(perGpu * count * 1000) / 1000,
      image,
      machine,
      globalNetworking,
    });
    return answered(HttpResponse.json(view(pod), { status: 201 }));
  };

  const rentInterruptible = async (input: Record<string, unknown>) => {
    const refuse = () => HttpResponse.json(errors.noSpotCapacity);
    if (fake.capacity.spot <= 0) return refuse();
    const cloud = String(input.cloudType ?? "SECURE");
    const prices = spotPrices.data.gpuTypes.find((entry) => entry.id === input.gpuTypeId);
    const lowest = cloud === "COMMUNITY" ? prices?.communityLowest : prices?.secureLowest;
    if (!lowest?.minimumBidPrice || Number(input.bidPerGpu) < lowest.minimumBidPrice)
      return HttpResponse.json({
        errors: [{ message: "Your bid price is too low for this GPU type.", path: ["podRentInterruptable"] }],
        data: { podRentInterruptable: null },
      });
    const count = Number(input.gpuCount ?? 1);
    const machine = candidates(String(input.gpuTypeId), cloud, {
      allowed: input.allowedCudaVersions as string[] | undefined,
    }).find(
      (entry) => entry.free >= count && (!input.dataCenterId || entry.dataCenterId === input.dataCenterId),
    );
    if (!machine) return refuse();
    fake.capacity.spot -= 1;
    machine.free -= count;
    const env = Object.fromEntries(
      (input.env as { key: string; value: string }[]).map((entry) => [entry.key, entry.value]),
    );
    const pod = await newPod(input, {
      env,
      spot: true,
      cost: Math.round(Number(input.bidPerGpu) * count * 1000) / 1000,
      image: String(input.imageName ?? ""),
      machine,
      globalNetworking: false,
    });
    return answered(HttpResponse.json({ data: { podRentInterruptable: { id: pod.id } } }));
  };

  const record = async (request: Request): Promise<RecordedRequest> => {
    const text = request.method === "GET" || request.method === "DELETE" ? "" : await request.text();
    const body: unknown = text ? JSON.parse(text) : undefined;
    const graphqlBody = request.url.startsWith(GRAPHQL_URL) ? (body as Record<string, unknown>) : undefined;
    const query = typeof graphqlBody?.query === "string" ? graphqlBody.query : undefined;
    const entry: RecordedRequest = {
      method: request.method,
      url: new URL(request.url),
      authorization: request.headers.get("authorization"),
      operation: query ? /^\s*(?:query|mutation)\s+(\w+)/.exec(query)?.[1] : undefined,
      query,
      variables: graphqlBody?.variables as Record<string, unknown> | undefined,
      body,
    };
    requests.push(entry);
    return entry;
  };

  /** Records the request, then answers an interruption or a 401 before `handle` runs. */
  const guarded =
    (
      handle: (
        entry: RecordedRequest,
        params: Record<string, string | readonly string[] | undefined>,
      ) => Response | Promise<Response>,
    ) =>
    async ({
      request,
      params,
    }: {
      request: Request;
      params: Record<string, string | readonly string[] | undefined>;
    }) => {
      const entry = await record(request);
      const interruption = interruptions.shift();
      if (interruption) return interruption();
      const storm = switches.rateLimited();
      if (storm) return storm;
      if (entry.authorization !== `Bearer ${TEST_API_KEY}`) {
        return entry.url.href.startsWith(GRAPHQL_URL)
          ? HttpResponse.json({ error: "Unauthorized" }, { status: 401 })
          : problem(errors.unauthorized);
      }
      return handle(entry, params);
    };

  const server = setupServer(
    http.get(
      `${API}/catalog/gpus`,
      guarded((entry) => catalogGpus(entry.url)),
    ),
    http.get(
      `${API}/catalog/cpus`,
      guarded(() => HttpResponse.json(cpuCatalog)),
    ),
    http.get(
      `${API}/catalog/datacenters`,
      guarded((entry) => {
        const only = entry.url.searchParams.get("globalNetwork");
        return HttpResponse.json({
          dataCenters: datacenters.dataCenters.filter(
            (center) => only === null || String(center.globalNetwork) === only,
          ),
        });
      }),
    ),
    http.post(
      `${API}/pods`,
      guarded((entry) => createPod(entry.body as Record<string, unknown>)),
    ),
    http.get(
      `${API}/pods`,
      guarded(() =>
        HttpResponse.json({ [switches.listBroken ? "items" : "pods"]: [...pods.values()].map(view) }),
      ),
    ),
    http.get(
      `${API}/pods/:id`,
      guarded((_entry, params) => {
        const pod = pods.get(String(params.id));
        if (!pod) return problem(errors.notFound);
        pod.lookups += 1;
        if (pod.status === "PROVISIONING" && pod.lookups > fake.imagePullLookups) pod.status = "STARTING";
        else if (pod.status === "STARTING") pod.status = "RUNNING";
        return HttpResponse.json(view(pod));
      }),
    ),
    http.delete(
      `${API}/pods/:id`,
      guarded(async (_entry, params) => {
        const pod = pods.get(String(params.id));
        if (!pod) return problem(errors.notFound);
        pods.delete(pod.id);
        if (pod.machine) {
          const gpu =
            (pod.input.gpu as { count?: number } | undefined)?.count ?? Number(pod.input.gpuCount ?? 1);
          pod.machine.free += gpu;
        }
        await options.onTerminate?.(pod);
        return new HttpResponse(null, { status: 204 });
      }),
    ),
    http.post(
      GRAPHQL_URL,
      guarded((entry) => {
        switch (entry.operation) {
          case "SkywardSpotPrices":
            return HttpResponse.json(spotPrices);
          case "SkywardRentInterruptable":
            return rentInterruptible((entry.variables?.input ?? {}) as Record<string, unknown>);
          default:
            return HttpResponse.json(
              { errors: [{ message: `the fake does not know ${entry.operation}` }] },
              { status: 400 },
            );
        }
      }),
    ),
  );
  (fake as { server: SetupServer }).server = server;
  return fake;
}
