/**
 * A fake of the Acme Cloud API (the README's "The Acme API" reference: every endpoint, request and
 * answer shape below is from there), serving on loopback. Given test-bed hosts, it hands them out as
 * machines: creating one authorises the request's SSH key on a free host, as Acme does on a new
 * machine, and deleting it takes the key away. Without hosts, addresses are documentation addresses.
 * It injects the faults of the fault matrix (`FaultController` of `@skyward/testing`).
 */
import { randomBytes } from "node:crypto";
import {
  type FaultController,
  fakeRoutes,
  jsonAnswer,
  startFakeRestServer,
  type TestbedHost,
  testbedHostPool,
} from "@skyward/testing";

interface FakeMachine {
  id: string;
  name: string;
  type: string;
  state: "provisioning" | "running" | "deleting" | "deleted";
  host: TestbedHost | undefined;
  address: string;
  labels: Record<string, string>;
  createdAt: string;
  pricePerHour: number;
}

const MACHINE_TYPES = [
  { id: "cpu-2", region: "eu-1", vcpus: 2, memoryGb: 4, gpu: null, pricePerHour: 0.04 },
  { id: "cpu-8", region: "eu-1", vcpus: 8, memoryGb: 32, gpu: null, pricePerHour: 0.16 },
  {
    id: "a100-1",
    region: "eu-1",
    vcpus: 12,
    memoryGb: 85,
    gpu: { model: "A100", count: 1, memoryGb: 80 },
    pricePerHour: 1.29,
  },
  { id: "cpu-2", region: "us-2", vcpus: 2, memoryGb: 4, gpu: null, pricePerHour: 0.05 },
];

/** Machines a list page holds (README: "pages of 2"), so a provider must read every page. */
const PAGE_SIZE = 2;

/** A running fake Acme API; its fault switches are the matrix's. */
export interface FakeAcme extends AsyncDisposable, Required<Omit<FaultController, "fireBootWatchdogs">> {
  /** Its base URL (`http://127.0.0.1:PORT`). */
  readonly url: string;
  /** The API key it accepts. */
  readonly apiKey: string;
  /** Machines not deleted, in words. */
  machinesLeft(): string[];
  /** Requests seen, as `METHOD path`. */
  readonly requests: string[];
}

/** Starts the fake on loopback, lending out `hosts` as machines (none: machines no one can reach). */
export async function startFakeAcme(hosts: readonly TestbedHost[] = []): Promise<FakeAcme> {
  const apiKey = `acme-test-${randomBytes(8).toString("hex")}`;
  const machines = new Map<string, FakeMachine>();
  const byIdempotencyKey = new Map<string, string>();
  const lending = await testbedHostPool<string>(hosts);
  const faults = { rateLimited: 0, retryAfter: 0, loseCreate: false, partialDelete: false, refuse: 0 };
  let listBroken = false;

  const view = (machine: FakeMachine) => {
    const running = machine.state === "running";
    return {
      id: machine.id,
      name: machine.name,
      type: machine.type,
      state: machine.state,
      address: running ? machine.address : null,
      privateAddress: running ? machine.address : null,
      sshPort: machine.host?.port ?? 22,
      sshUser: machine.host?.user ?? "root",
      // Each test-bed host has its own directory (the hosts share one filesystem).
      scratchDir: machine.host?.root ?? null,
      labels: machine.labels,
      pricePerHour: machine.pricePerHour,
      createdAt: machine.createdAt,
    };
  };
  const end = async (machine: FakeMachine) => {
    machine.state = "deleted";
    await lending.release(machine.id);
  };

  const routes = fakeRoutes(
    {
      "GET /machine-types": () => jsonAnswer(200, { machineTypes: MACHINE_TYPES }),
      "GET /machines": ({ query }) => {
        if (listBroken) return jsonAnswer(200, { items: [] });
        const label = query.get("label");
        const listed = [...machines.values()].filter((machine) => label === null || label in machine.labels);
        const start = Number(query.get("page") ?? 0);
        const next = start + PAGE_SIZE < listed.length ? String(start + PAGE_SIZE) : null;
        return jsonAnswer(200, {
          machines: listed.slice(start, start + PAGE_SIZE).map(view),
          nextPage: next,
        });
      },
      "POST /machines": async ({ body }) => {
        const wanted = body as {
          name: string;
          type: string;
          labels: Record<string, string>;
          sshPublicKey: string;
          idempotencyKey: string;
        };
        const earlier = machines.get(byIdempotencyKey.get(wanted.idempotencyKey) ?? "");
        if (earlier) return jsonAnswer(201, view(earlier));
        const type = MACHINE_TYPES.find((entry) => entry.id === wanted.type);
        if (!type) return jsonAnswer(400, { error: `unknown machine type ${wanted.type}` });
        const id = `m-${randomBytes(4).toString("hex")}`;
        const host = lending.take(id);
        if (hosts.length > 0 && !host) return jsonAnswer(409, { error: "no capacity" });
        await lending.authorize(id, wanted.sshPublicKey);
        const machine: FakeMachine = {
          id,
          name: wanted.name,
          type: wanted.type,
          state: "provisioning",
          host,
          address: host?.host ?? `203.0.113.${machines.size % 250}`,
          labels: wanted.labels,
          createdAt: new Date().toISOString(),
          pricePerHour: type.pricePerHour,
        };
        machines.set(id, machine);
        byIdempotencyKey.set(wanted.idempotencyKey, id);
        if (faults.loseCreate) {
          faults.loseCreate = false;
          return jsonAnswer(504, { error: "gateway timeout" });
        }
        return jsonAnswer(201, view(machine));
      },
      "GET /machines/:id": (_, { id }) => {
        const machine = machines.get(id ?? "");
        if (!machine) return jsonAnswer(404, { error: "no such machine" });
        const answer = view(machine);
        if (machine.state === "provisioning") machine.state = "running";
        return jsonAnswer(200, answer);
      },
      "POST /machines/delete": async ({ body }) => {
        const results = [];
        for (const id of (body as { ids: string[] }).ids) {
          const machine = machines.get(id);
          if (!machine || machine.state === "deleted") results.push({ id, status: "not-found" });
          else if (faults.partialDelete && results.length === 0)
            results.push({ id, status: "error", error: "internal error deleting the machine" });
          else if (faults.refuse > 0 && machine.state === "provisioning") {
            faults.refuse -= 1;
            results.push({ id, status: "provisioning", error: "machine is still provisioning" });
          } else {
            await end(machine);
            results.push({ id, status: "deleted" });
          }
        }
        const failed = results.some((result) => result.status !== "deleted");
        faults.partialDelete = false;
        return jsonAnswer(failed ? 207 : 200, { results });
      },
    },
    () => jsonAnswer(404, { error: "no such endpoint" }),
  );

  const server = await startFakeRestServer({
    prefix: "/v1",
    record: ({ method, url }) => `${method} ${url.pathname}`,
    handle: (request) => {
      if (faults.rateLimited > 0) {
        faults.rateLimited -= 1;
        return {
          ...jsonAnswer(429, { error: "rate limited" }),
          headers: { "retry-after": String(faults.retryAfter) },
        };
      }
      return request.headers.authorization === `Bearer ${apiKey}`
        ? routes(request)
        : jsonAnswer(401, { error: "bad API key" });
    },
    failed: (error) => jsonAnswer(500, { error: String(error) }),
  });
  const billing = (machine: FakeMachine) => ({ id: machine.id, hourlyPrice: machine.pricePerHour });
  return {
    url: server.origin,
    apiKey,
    requests: server.requests,
    machinesLeft: () =>
      [...machines.values()]
        .filter((machine) => machine.state !== "deleted")
        .map((machine) => `${machine.id} (${machine.state}) at ${machine.address}`),
    live: () => [...machines.values()].filter((machine) => machine.state !== "deleted").map(billing),
    created: () => [...machines.values()].map(billing),
    rateLimitNext(count, seconds) {
      faults.rateLimited = count;
      faults.retryAfter = seconds;
    },
    loseNextCreateAnswer() {
      faults.loseCreate = true;
    },
    partialDeleteNext() {
      faults.partialDelete = true;
    },
    refuseDeleteWhileProvisioning(count) {
      faults.refuse = count;
    },
    breakListShape(broken) {
      listBroken = broken;
    },
    async reclaim(id) {
      const machine = machines.get(id);
      if (machine) await end(machine);
    },
    async [Symbol.asyncDispose]() {
      await server.close();
      await lending.releaseAll();
    },
  };
}
