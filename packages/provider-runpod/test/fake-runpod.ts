/**
 * A fake RunPod for tests: msw handlers answering RunPod's GraphQL endpoint and the REST v1 `POST
 * /pods` with the documented shapes (the JSON under `fixtures/`), keeping pods in memory and recording
 * every request. Nothing leaves the process: unhandled requests fail the test.
 */
import { HttpResponse, http } from "msw";
import { type SetupServer, setupServer } from "msw/node";
import cpuFlavors from "./fixtures/cpu-flavors.json" with { type: "json" };
import cpuSpecifics from "./fixtures/cpu-specifics.json" with { type: "json" };
import errors from "./fixtures/errors.json" with { type: "json" };
import gpuTypes from "./fixtures/gpu-types.json" with { type: "json" };

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

/** A pod as the fake keeps it. */
export interface FakePod {
  id: string;
  name: string;
  desiredStatus: "RUNNING" | "EXITED" | "TERMINATED";
  costPerHr: number;
  env: Record<string, string>;
  spot: boolean;
  /** How often `pod` looked it up; the public SSH port shows from the second lookup on. */
  lookups: number;
  publicIp: string;
  sshPort: number;
  /** What created it: the GraphQL input or the REST body. */
  input: Record<string, unknown>;
}

/** The fake, its state and its controls. */
export interface FakeRunPod {
  readonly server: SetupServer;
  readonly requests: RecordedRequest[];
  readonly pods: Map<string, FakePod>;
  /** Pods that can still be created before RunPod reports no capacity; Infinity by default. */
  capacity: { onDemand: number; spot: number; cpu: number };
  /** Answers the next `count` requests with `response()` instead of handling them. */
  interrupt(count: number, response: () => Response): void;
  /** The GraphQL requests of one operation (`SkywardGpuTypes`…). */
  operations(name: string): RecordedRequest[];
  /** Forgets requests, pods and pending interruptions, and makes capacity unlimited again. */
  reset(): void;
}

const GRAPHQL_URL = "https://api.runpod.io/graphql";
const REST_PODS_URL = "https://rest.runpod.io/v1/pods";

function graphqlPod(pod: FakePod): Record<string, unknown> {
  const booted = pod.desiredStatus === "RUNNING" && pod.lookups >= 2;
  return {
    id: pod.id,
    name: pod.name,
    desiredStatus: pod.desiredStatus,
    costPerHr: pod.costPerHr,
    env: Object.entries(pod.env).map(([key, value]) => `${key}=${value}`),
    runtime: booted
      ? {
          uptimeInSeconds: 42,
          ports: [
            { ip: "100.65.0.7", isIpPublic: false, privatePort: 22, publicPort: 22, type: "tcp" },
            { ip: pod.publicIp, isIpPublic: true, privatePort: 22, publicPort: pod.sshPort, type: "tcp" },
          ],
        }
      : null,
  };
}

/** Creates the fake; `server.listen({ onUnhandledFrame: "error" })` starts it, `server.close()` stops it. */
export function startFakeRunPod(): FakeRunPod {
  const requests: RecordedRequest[] = [];
  const pods = new Map<string, FakePod>();
  const interruptions: (() => Response)[] = [];
  let nextPod = 1;
  const fake: FakeRunPod = {
    server: undefined as unknown as SetupServer,
    requests,
    pods,
    capacity: {
      onDemand: Number.POSITIVE_INFINITY,
      spot: Number.POSITIVE_INFINITY,
      cpu: Number.POSITIVE_INFINITY,
    },
    interrupt(count, response) {
      for (let index = 0; index < count; index += 1) interruptions.push(response);
    },
    operations(name) {
      return requests.filter((request) => request.operation === name);
    },
    reset() {
      requests.length = 0;
      pods.clear();
      interruptions.length = 0;
      fake.capacity = {
        onDemand: Number.POSITIVE_INFINITY,
        spot: Number.POSITIVE_INFINITY,
        cpu: Number.POSITIVE_INFINITY,
      };
    },
  };

  const newPod = (
    input: Record<string, unknown>,
    env: Record<string, string>,
    spot: boolean,
    price: number,
  ) => {
    const id = `fakepod${String(nextPod).padStart(6, "0")}`;
    const pod: FakePod = {
      id,
      name: String(input.name ?? ""),
      desiredStatus: "RUNNING",
      costPerHr: price,
      env,
      spot,
      lookups: 0,
      publicIp: `203.0.113.${nextPod}`,
      sshPort: 40_000 + nextPod,
      input,
    };
    nextPod += 1;
    pods.set(id, pod);
    return pod;
  };

  const gpuPrice = (input: Record<string, unknown>, spot: boolean): number => {
    const type = gpuTypes.data.gpuTypes.find((entry) => entry.id === input.gpuTypeId);
    const perGpu = spot
      ? Number(input.bidPerGpu)
      : input.cloudType === "COMMUNITY"
        ? (type?.communityPrice ?? 0)
        : (type?.securePrice ?? 0);
    return Math.round(perGpu * Number(input.gpuCount ?? 1) * 1000) / 1000;
  };

  const answerGraphql = (
    operation: string | undefined,
    query: string,
    variables: Record<string, unknown>,
  ) => {
    switch (operation) {
      case "SkywardGpuTypes":
        return HttpResponse.json(gpuTypes);
      case "SkywardCpuFlavors":
        return HttpResponse.json(cpuFlavors);
      case "SkywardCpuPrices": {
        const data: Record<string, unknown> = {};
        for (const match of query.matchAll(
          /(f\d+): cpuFlavors\(input: \{id: "([^"]+)"\}\) \{ id specifics\(input: \{instanceId: "([^"]+)"\}\)/g,
        )) {
          const [, alias, flavorId, instanceId] = match as unknown as [string, string, string, string];
          const specifics = (cpuSpecifics as Record<string, unknown>)[instanceId] ?? {
            stockStatus: null,
            securePrice: null,
          };
          data[alias] = [{ id: flavorId, specifics }];
        }
        return HttpResponse.json({ data });
      }
      case "SkywardDeployOnDemand":
      case "SkywardRentInterruptable": {
        const spot = operation === "SkywardRentInterruptable";
        const field = spot ? "podRentInterruptable" : "podFindAndDeployOnDemand";
        const input = variables.input as Record<string, unknown>;
        if (spot ? fake.capacity.spot <= 0 : fake.capacity.onDemand <= 0)
          return HttpResponse.json(spot ? errors.noSpotCapacity : errors.noCapacity);
        if (spot) fake.capacity.spot -= 1;
        else fake.capacity.onDemand -= 1;
        const env = Object.fromEntries(
          (input.env as { key: string; value: string }[]).map((entry) => [entry.key, entry.value]),
        );
        const pod = newPod(input, env, spot, gpuPrice(input, spot));
        return HttpResponse.json({ data: { [field]: graphqlPod(pod) } });
      }
      case "SkywardPod": {
        const pod = pods.get(String(variables.podId));
        if (pod) pod.lookups += 1;
        return HttpResponse.json({ data: { pod: pod ? graphqlPod(pod) : null } });
      }
      case "SkywardPods":
        return HttpResponse.json({ data: { myself: { pods: [...pods.values()].map(graphqlPod) } } });
      case "SkywardTerminate": {
        const id = String((variables.input as Record<string, unknown>).podId);
        if (!pods.delete(id)) {
          // RunPod's wording for an unknown pod is not documented: a generic error makes the provider check.
          return HttpResponse.json({
            errors: [
              {
                message: "Something went wrong. Please try again later or contact support.",
                path: ["podTerminate"],
              },
            ],
            data: { podTerminate: null },
          });
        }
        return HttpResponse.json({ data: { podTerminate: null } });
      }
      default:
        return HttpResponse.json(
          { errors: [{ message: `the fake does not know ${operation}` }] },
          { status: 400 },
        );
    }
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

  const authorised = (entry: RecordedRequest) => entry.authorization === `Bearer ${TEST_API_KEY}`;

  const server = setupServer(
    http.post(GRAPHQL_URL, async ({ request }) => {
      const entry = await record(request);
      const interruption = interruptions.shift();
      if (interruption) return interruption();
      if (!authorised(entry)) return HttpResponse.json(errors.unauthorized, { status: 401 });
      return answerGraphql(entry.operation, entry.query ?? "", entry.variables ?? {});
    }),
    http.post(REST_PODS_URL, async ({ request }) => {
      const entry = await record(request);
      const interruption = interruptions.shift();
      if (interruption) return interruption();
      if (!authorised(entry)) return HttpResponse.json(errors.unauthorized, { status: 401 });
      if (fake.capacity.cpu <= 0) return HttpResponse.json(errors.restNoCapacity, { status: 500 });
      fake.capacity.cpu -= 1;
      const input = entry.body as Record<string, unknown>;
      const flavor = (input.cpuFlavorIds as string[])[0];
      const vcpus = Number(input.vcpuCount);
      const multiplier = cpuFlavors.data.cpuFlavors.find((entry) => entry.id === flavor)?.ramMultiplier ?? 2;
      const price =
        (cpuSpecifics as Record<string, { securePrice: number | null }>)[
          `${flavor}-${vcpus}-${vcpus * multiplier}`
        ]?.securePrice ?? 0;
      const pod = newPod(input, input.env as Record<string, string>, false, price);
      // REST v1's Pod: costPerHr as a string, env as an object, no runtime.
      return HttpResponse.json(
        {
          id: pod.id,
          name: pod.name,
          desiredStatus: "RUNNING",
          costPerHr: String(price),
          adjustedCostPerHr: price,
          cpuFlavorId: flavor,
          vcpuCount: vcpus,
          env: pod.env,
          image: input.imageName,
          ports: input.ports,
          publicIp: null,
          portMappings: null,
          interruptible: false,
        },
        { status: 201 },
      );
    }),
  );
  (fake as { server: SetupServer }).server = server;
  return fake;
}
