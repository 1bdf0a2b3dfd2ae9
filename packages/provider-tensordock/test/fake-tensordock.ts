/**
 * A fake of TensorDock's v2 API, serving on loopback, built from the documented request and answer
 * shapes (`fixtures.ts` names the page of each): locations with their GPUs and prices, and instances —
 * create, list, get, delete. It checks what the real API checks (the bearer token, the location and GPU,
 * the GPU count against what is free there, at least 100 GB of storage, an SSH key, a dedicated IP
 * where one is available) and keeps its state in memory.
 *
 * Given test-bed hosts, each new instance gets a free one: its address is the host's, and the request's
 * SSH key is authorised on the host, as TensorDock puts it on a new VM; deleting the instance takes the
 * key away again. Without hosts, addresses are documentation addresses nothing answers on.
 */
import { randomBytes, randomUUID } from "node:crypto";
import {
  fakeRoutes,
  jsonAnswer,
  startFakeRestServer,
  type TestbedHost,
  testbedHostPool,
} from "@skyward/testing";
import { locations as documentedLocations, errors } from "./fixtures.js";

/** One request the fake received. */
export interface RecordedRequest {
  readonly method: string;
  readonly path: string;
  readonly body: unknown;
  /** The bearer token as sent (a secret of the test; compared, never printed). */
  readonly token: string | undefined;
}

/** An instance as the fake keeps it. */
export interface FakeInstance {
  id: string;
  attributes: Record<string, unknown>;
  /** As TensorDock writes it; a test may set any documented status (`"StoppedDisassociated"`). */
  status: "starting" | "running" | "deleting" | "stopped" | "StoppedDisassociated";
  reads: number;
  ipAddress: string;
  host: TestbedHost | undefined;
  gpus: { v0Name: string; count: number };
  rateHourly: number;
}

/** A running fake. */
export interface FakeTensorDock extends AsyncDisposable {
  /** The API root to give the provider as `apiUrl` (`http://127.0.0.1:PORT/api/v2`). */
  readonly apiUrl: string;
  /** The token it accepts. */
  readonly token: string;
  readonly requests: RecordedRequest[];
  readonly instances: Map<string, FakeInstance>;
  /** Instances not deleted, in words. */
  leftovers(): string[];
  /** Answers the next `count` requests with HTTP 429 and `Retry-After: seconds`, as the API does past 100 requests a minute. */
  rateLimitNext(count: number, seconds: number): void;
  /** From now on answers `GET /instances` as `{data: {}}`, a shape the provider must refuse, never read as "no instances". */
  breakListShape(): void;
}

/** How the fake answers `GET /instances/{id}`. */
export type InstanceAnswerShape =
  /** As documented: the bare instance (https://dashboard.tensordock.com/api/docs/instance-management, "Get Instance"). */
  | "bare"
  /** In the `{data: {type, id, attributes}}` envelope of the list, as some answers come. */
  | "envelope";

/**
 * Starts the fake on 127.0.0.1; with `hosts`, its instances are those test-bed hosts. It serves
 * `locations` (default: the documented ones of `fixtures.ts`).
 */
export async function startFakeTensorDock(
  options: {
    hosts?: readonly TestbedHost[];
    locations?: typeof documentedLocations;
    /** Default `"bare"`, as documented. */
    instanceAnswer?: InstanceAnswerShape;
  } = {},
): Promise<FakeTensorDock> {
  const locations = options.locations ?? documentedLocations;
  const token = `td-test-${randomBytes(12).toString("hex")}`;
  const instances = new Map<string, FakeInstance>();
  const hosts = await testbedHostPool<string>(options.hosts ?? []);
  let addresses = 0;
  let rateLimited = { count: 0, seconds: 0 };
  let listShapeBroken = false;

  /** An instance as `GET /instances` and `GET /instances/{id}` show it (JSON:API envelope). */
  const view = (instance: FakeInstance) => ({
    type: "virtualmachine",
    id: instance.id,
    attributes: {
      ...instance.attributes,
      status: instance.status,
      ipAddress: instance.status === "running" ? instance.ipAddress : null,
      portForwards: {},
      rateHourly: instance.rateHourly,
    },
  });

  /** Whether an instance is still there: one being deleted is seen once more, then it is gone. */
  const stillThere = (instance: FakeInstance): boolean => {
    if (instance.status !== "deleting") return true;
    instance.reads += 1;
    if (instance.reads <= 1) return true;
    instances.delete(instance.id);
    void hosts.release(instance.id);
    return false;
  };

  /** The instance a `/instances/{id}` request names, if it is still there. */
  const named = (id: string | undefined) => {
    const instance = instances.get(id ?? "");
    return instance && stillThere(instance) ? instance : undefined;
  };

  const routes = fakeRoutes(
    {
      "GET /locations": () => jsonAnswer(200, { data: { locations } }),
      "GET /instances": () => {
        if (listShapeBroken) return jsonAnswer(200, { data: {} });
        const listed = [...instances.values()].filter(stillThere);
        return jsonAnswer(200, { data: { instances: listed.map(view) } });
      },
      "POST /instances": async ({ body }) => {
        const data = (body as { data?: { type?: string; attributes?: Record<string, unknown> } } | undefined)
          ?.data;
        const attributes = data?.attributes;
        if (data?.type !== "virtualmachine" || !attributes)
          return jsonAnswer(400, errors.badRequest("expected data.type virtualmachine with attributes"));
        for (const field of ["name", "image", "ssh_key", "location_id"])
          if (typeof attributes[field] !== "string" || attributes[field] === "")
            return jsonAnswer(400, errors.badRequest(`${field} is required`));
        const location = locations.find((entry) => entry.id === attributes.location_id);
        if (!location) return jsonAnswer(400, errors.badRequest("Unknown location"));
        const resources = attributes.resources as
          | {
              vcpu_count?: number;
              ram_gb?: number;
              storage_gb?: number;
              gpus?: Record<string, { count?: number }>;
            }
          | undefined;
        const [v0Name, wanted] = Object.entries(resources?.gpus ?? {})[0] ?? [];
        const offered = location.gpus.find((entry) => entry.v0Name === v0Name);
        if (!v0Name || !offered)
          return jsonAnswer(400, errors.badRequest("At least one GPU available at the location is required"));
        const count = Number(wanted?.count ?? 0);
        const storage = Number(resources?.storage_gb ?? 0);
        const vcpus = Number(resources?.vcpu_count ?? 0);
        const ram = Number(resources?.ram_gb ?? 0);
        if (storage < 100) return jsonAnswer(400, errors.badRequest("Minimum storage is 100GB"));
        if (
          vcpus < 1 ||
          vcpus > offered.resources.max_vcpus ||
          ram <= 0 ||
          ram > offered.resources.max_ram_gb
        )
          return jsonAnswer(
            400,
            errors.badRequest("Requested resources exceed what the location can deploy"),
          );
        if (attributes.useDedicatedIp === true && !offered.network_features.dedicated_ip_available)
          return jsonAnswer(400, errors.badRequest("Dedicated IP not available at this location"));
        const inUse = [...instances.values()]
          .filter(
            (entry) =>
              entry.status !== "deleting" &&
              entry.attributes.location_id === location.id &&
              entry.gpus.v0Name === v0Name,
          )
          .reduce((sum, entry) => sum + entry.gpus.count, 0);
        if (count < 1 || inUse + count > offered.max_count)
          return jsonAnswer(400, errors.noCapacity(`${count}x ${v0Name}`));
        const id = randomUUID();
        const free = hosts.take(id);
        if (hosts.hosts.length > 0 && !free) return jsonAnswer(400, errors.noCapacity(`${count}x ${v0Name}`));
        await hosts.authorize(id, String(attributes.ssh_key));
        addresses += 1;
        const instance: FakeInstance = {
          id,
          attributes: {
            name: attributes.name,
            type: "virtualmachine",
            image: attributes.image,
            location_id: location.id,
            resources: {
              vcpu_count: vcpus,
              ram_gb: ram,
              storage_gb: storage,
              gpus: [{ gpuV0Name: v0Name, count }],
            },
            cloud_init: attributes.cloud_init,
          },
          status: "starting",
          reads: 0,
          ipAddress: free?.host ?? `203.0.113.${addresses % 250}`,
          host: free,
          gpus: { v0Name, count },
          rateHourly:
            Math.round(
              (offered.price_per_hr * count +
                offered.pricing.per_vcpu_hr * vcpus +
                offered.pricing.per_gb_ram_hr * ram +
                offered.pricing.per_gb_storage_hr * storage) *
                10_000,
            ) / 10_000,
        };
        instances.set(instance.id, instance);
        // https://dashboard.tensordock.com/api/docs/instance-creation (example response)
        return jsonAnswer(201, {
          data: { type: "virtualmachine", id: instance.id, name: attributes.name, status: instance.status },
        });
      },
      "GET /instances/:id": (_, { id }) => {
        const instance = named(id);
        if (!instance) return jsonAnswer(404, errors.notFound);
        if (instance.status === "starting") {
          instance.reads += 1;
          if (instance.reads > 1) instance.status = "running";
        }
        if (options.instanceAnswer === "envelope") return jsonAnswer(200, { data: view(instance) });
        // https://dashboard.tensordock.com/api/docs/instance-management ("Get Instance"): the bare
        // instance, its port forwards as a list.
        const { attributes } = view(instance);
        return jsonAnswer(200, {
          type: "virtualmachine",
          id: instance.id,
          ...attributes,
          portForwards: [],
        });
      },
      "DELETE /instances/:id": async (_, { id }) => {
        const instance = named(id);
        if (!instance) return jsonAnswer(404, errors.notFound);
        if (instance.status !== "deleting") {
          instance.status = "deleting";
          instance.reads = 0;
          await hosts.revoke(instance.id);
        }
        return jsonAnswer(200, { data: { type: "success", message: "Instance deleted" } });
      },
    },
    () => jsonAnswer(404, errors.notFound),
  );

  const server = await startFakeRestServer({
    prefix: "/api/v2",
    record: ({ method, path, headers, body }): RecordedRequest => ({
      method,
      path,
      body,
      token: headers.authorization?.startsWith("Bearer ")
        ? headers.authorization.slice("Bearer ".length)
        : undefined,
    }),
    handle: (request) => {
      if (rateLimited.count > 0) {
        rateLimited.count -= 1;
        // https://dashboard.tensordock.com/api/docs/getting-started ("Rate Limiting"): 100 a minute, then 429.
        return {
          ...jsonAnswer(429, errors.rateLimited),
          headers: { "retry-after": String(rateLimited.seconds) },
        };
      }
      return request.headers.authorization === `Bearer ${token}`
        ? routes(request)
        : jsonAnswer(401, errors.unauthorized);
    },
    failed: (error) =>
      jsonAnswer(500, { errors: [{ status: "500", title: "Internal Server Error", detail: String(error) }] }),
  });
  return {
    apiUrl: server.url,
    token,
    requests: server.requests,
    instances,
    leftovers: () =>
      [...instances.values()]
        .filter((entry) => entry.status !== "deleting")
        .map((entry) => `${entry.id} ${String(entry.attributes.name)} (${entry.status})`),
    breakListShape() {
      listShapeBroken = true;
    },
    rateLimitNext(count, seconds) {
      rateLimited = { count, seconds };
    },
    async [Symbol.asyncDispose]() {
      await server.close();
      await hosts.releaseAll();
    },
  };
}
