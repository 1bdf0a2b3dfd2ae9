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
import { readFile, writeFile } from "node:fs/promises";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { dirname, join } from "node:path";
import type { TestbedHost } from "@skyward/testing";
import { errors, locations } from "./fixtures.js";

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
  status: "starting" | "running" | "deleting";
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
}

async function readBody(request: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  const text = Buffer.concat(chunks).toString("utf8");
  return text ? JSON.parse(text) : undefined;
}

/** Starts the fake on 127.0.0.1; with `hosts`, its instances are those test-bed hosts. */
export async function startFakeTensorDock(
  options: { hosts?: readonly TestbedHost[] } = {},
): Promise<FakeTensorDock> {
  const token = `td-test-${randomBytes(12).toString("hex")}`;
  const requests: RecordedRequest[] = [];
  const instances = new Map<string, FakeInstance>();
  const hosts = options.hosts ?? [];
  const authorizedKeys = (host: TestbedHost) => join(dirname(host.root), "authorized_keys");
  const original = new Map<TestbedHost, string>();
  for (const host of hosts) original.set(host, await readFile(authorizedKeys(host), "utf8"));
  let addresses = 0;

  const send = (response: ServerResponse, status: number, answer: unknown) => {
    response.writeHead(status, { "content-type": "application/json" });
    response.end(JSON.stringify(answer));
  };

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
    return false;
  };

  const handle = async (request: IncomingMessage, response: ServerResponse): Promise<void> => {
    const url = new URL(request.url ?? "/", "http://fake");
    const body = await readBody(request);
    const method = request.method ?? "GET";
    const path = url.pathname.replace(/^\/api\/v2/, "");
    const authorization = request.headers.authorization;
    const sent = authorization?.startsWith("Bearer ") ? authorization.slice("Bearer ".length) : undefined;
    requests.push({ method, path, body, token: sent });
    if (sent !== token) return send(response, 401, errors.unauthorized);

    if (method === "GET" && path === "/locations") return send(response, 200, { data: { locations } });
    if (method === "GET" && path === "/instances") {
      const listed = [...instances.values()].filter(stillThere);
      return send(response, 200, { data: { instances: listed.map(view) } });
    }
    if (method === "POST" && path === "/instances") {
      const data = (body as { data?: { type?: string; attributes?: Record<string, unknown> } } | undefined)
        ?.data;
      const attributes = data?.attributes;
      if (data?.type !== "virtualmachine" || !attributes)
        return send(response, 400, errors.badRequest("expected data.type virtualmachine with attributes"));
      for (const field of ["name", "image", "ssh_key", "location_id"])
        if (typeof attributes[field] !== "string" || attributes[field] === "")
          return send(response, 400, errors.badRequest(`${field} is required`));
      const location = locations.find((entry) => entry.id === attributes.location_id);
      if (!location) return send(response, 400, errors.badRequest("Unknown location"));
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
        return send(
          response,
          400,
          errors.badRequest("At least one GPU available at the location is required"),
        );
      const count = Number(wanted?.count ?? 0);
      const storage = Number(resources?.storage_gb ?? 0);
      const vcpus = Number(resources?.vcpu_count ?? 0);
      const ram = Number(resources?.ram_gb ?? 0);
      if (storage < 100) return send(response, 400, errors.badRequest("Minimum storage is 100GB"));
      if (vcpus < 1 || vcpus > offered.resources.max_vcpus || ram <= 0 || ram > offered.resources.max_ram_gb)
        return send(
          response,
          400,
          errors.badRequest("Requested resources exceed what the location can deploy"),
        );
      if (attributes.useDedicatedIp === true && !offered.network_features.dedicated_ip_available)
        return send(response, 400, errors.badRequest("Dedicated IP not available at this location"));
      const inUse = [...instances.values()]
        .filter(
          (entry) =>
            entry.status !== "deleting" &&
            entry.attributes.location_id === location.id &&
            entry.gpus.v0Name === v0Name,
        )
        .reduce((sum, entry) => sum + entry.gpus.count, 0);
      if (count < 1 || inUse + count > offered.max_count)
        return send(response, 400, errors.noCapacity(`${count}x ${v0Name}`));
      const free = hosts.find((host) => ![...instances.values()].some((entry) => entry.host === host));
      if (hosts.length > 0 && !free) return send(response, 400, errors.noCapacity(`${count}x ${v0Name}`));
      if (free) await writeFile(authorizedKeys(free), `${original.get(free)}${String(attributes.ssh_key)}\n`);
      addresses += 1;
      const instance: FakeInstance = {
        id: randomUUID(),
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
      return send(response, 201, {
        data: { type: "virtualmachine", id: instance.id, name: attributes.name, status: instance.status },
      });
    }
    const match = /^\/instances\/([^/]+)$/.exec(path);
    const instance = match ? instances.get(decodeURIComponent(match[1] ?? "")) : undefined;
    if (!instance || !stillThere(instance)) return send(response, 404, errors.notFound);
    if (method === "GET") {
      if (instance.status === "starting") {
        instance.reads += 1;
        if (instance.reads > 1) instance.status = "running";
      }
      return send(response, 200, { data: view(instance) });
    }
    if (method === "DELETE") {
      if (instance.status !== "deleting") {
        instance.status = "deleting";
        instance.reads = 0;
        if (instance.host) await writeFile(authorizedKeys(instance.host), original.get(instance.host) ?? "");
      }
      return send(response, 200, { data: { type: "success", message: "Instance deleted" } });
    }
    return send(response, 404, errors.notFound);
  };

  const server = createServer((request, response) => {
    handle(request, response).catch((error: unknown) =>
      send(response, 500, {
        errors: [{ status: "500", title: "Internal Server Error", detail: String(error) }],
      }),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    apiUrl: `http://127.0.0.1:${port}/api/v2`,
    token,
    requests,
    instances,
    leftovers: () =>
      [...instances.values()]
        .filter((entry) => entry.status !== "deleting")
        .map((entry) => `${entry.id} ${String(entry.attributes.name)} (${entry.status})`),
    async [Symbol.asyncDispose]() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      for (const [host, text] of original) await writeFile(authorizedKeys(host), text);
    },
  };
}
