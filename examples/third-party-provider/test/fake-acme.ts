/**
 * A fake of the Acme Cloud API (the README's "The Acme API" reference: every endpoint, request and
 * answer shape below is from there), serving on loopback and handing out real machines: the hosts of
 * a `@skyward/testing` test bed. Creating a machine authorises the request's SSH key on a free host,
 * as Acme authorises it on a new machine; deleting one takes the key away again.
 */
import { randomBytes } from "node:crypto";
import { readFile, writeFile } from "node:fs/promises";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { dirname, join } from "node:path";
import type { Testbed, TestbedHost } from "@skyward/testing";

interface FakeMachine {
  id: string;
  type: string;
  state: "provisioning" | "running" | "deleting" | "deleted";
  host: TestbedHost;
  labels: Record<string, string>;
  createdAt: string;
  /** Reads while provisioning: the machine "boots" after its first read. */
  reads: number;
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

/** A running fake Acme API. */
export interface FakeAcme extends AsyncDisposable {
  /** Its base URL (`http://127.0.0.1:PORT`). */
  readonly url: string;
  /** The API key it accepts. */
  readonly apiKey: string;
  /** Machines not deleted, in words. */
  machinesLeft(): string[];
  /** Requests seen, as `METHOD path`. */
  readonly requests: string[];
}

function machineAnswer(machine: FakeMachine) {
  const type = MACHINE_TYPES.find((entry) => entry.id === machine.type);
  const running = machine.state === "running";
  return {
    id: machine.id,
    type: machine.type,
    state: machine.state,
    address: running ? machine.host.host : null,
    privateAddress: running ? machine.host.host : null,
    sshPort: machine.host.port,
    sshUser: machine.host.user,
    // Each test-bed host has its own directory (the hosts share one filesystem).
    scratchDir: machine.host.root,
    labels: machine.labels,
    pricePerHour: type?.pricePerHour ?? 0,
    createdAt: machine.createdAt,
  };
}

async function body(request: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return chunks.length > 0 ? JSON.parse(Buffer.concat(chunks).toString("utf8")) : undefined;
}

/** Starts the fake on loopback, lending out the hosts of `bed`. */
export async function startFakeAcme(bed: Testbed): Promise<FakeAcme> {
  const apiKey = `acme-test-${randomBytes(8).toString("hex")}`;
  const machines = new Map<string, FakeMachine>();
  const requests: string[] = [];
  const authorizedKeys = (host: TestbedHost) => join(dirname(host.root), "authorized_keys");
  const original = new Map<TestbedHost, string>();
  for (const host of bed.hosts) original.set(host, await readFile(authorizedKeys(host), "utf8"));
  const busy = (host: TestbedHost) =>
    [...machines.values()].some((machine) => machine.host === host && machine.state !== "deleted");

  const send = (response: ServerResponse, status: number, answer?: unknown) => {
    response.writeHead(status, { "content-type": "application/json" });
    response.end(answer === undefined ? undefined : JSON.stringify(answer));
  };

  const handle = async (request: IncomingMessage, response: ServerResponse) => {
    const url = new URL(request.url ?? "/", "http://acme");
    requests.push(`${request.method} ${url.pathname}`);
    if (request.headers.authorization !== `Bearer ${apiKey}`)
      return send(response, 401, { error: "bad API key" });
    if (request.method === "GET" && url.pathname === "/v1/machine-types")
      return send(response, 200, { machineTypes: MACHINE_TYPES });
    if (request.method === "GET" && url.pathname === "/v1/machines") {
      const label = url.searchParams.get("label");
      const listed = [...machines.values()].filter((machine) => label === null || label in machine.labels);
      return send(response, 200, { machines: listed.map(machineAnswer) });
    }
    if (request.method === "POST" && url.pathname === "/v1/machines") {
      const wanted = (await body(request)) as {
        type: string;
        count: number;
        labels: Record<string, string>;
        sshPublicKey: string;
      };
      if (!MACHINE_TYPES.some((type) => type.id === wanted.type))
        return send(response, 400, { error: `unknown machine type ${wanted.type}` });
      const free = bed.hosts.filter((host) => !busy(host)).slice(0, wanted.count);
      if (free.length === 0) return send(response, 409, { error: "no capacity" });
      const created: FakeMachine[] = [];
      for (const host of free) {
        await writeFile(authorizedKeys(host), `${original.get(host)}${wanted.sshPublicKey}\n`);
        const machine: FakeMachine = {
          id: `m-${randomBytes(4).toString("hex")}`,
          type: wanted.type,
          state: "provisioning",
          host,
          labels: wanted.labels,
          createdAt: new Date().toISOString(),
          reads: 0,
        };
        machines.set(machine.id, machine);
        created.push(machine);
      }
      return send(response, 201, { machines: created.map(machineAnswer) });
    }
    const match = /^\/v1\/machines\/([^/]+)$/.exec(url.pathname);
    const machine = match ? machines.get(decodeURIComponent(match[1] ?? "")) : undefined;
    if (!machine) return send(response, 404, { error: "no such machine" });
    if (request.method === "GET") {
      machine.reads += 1;
      if (machine.state === "provisioning" && machine.reads > 1) machine.state = "running";
      return send(response, 200, machineAnswer(machine));
    }
    if (request.method === "DELETE") {
      if (machine.state !== "deleted") {
        machine.state = "deleted";
        await writeFile(authorizedKeys(machine.host), original.get(machine.host) ?? "");
      }
      return send(response, 204);
    }
    return send(response, 405, { error: "method not allowed" });
  };

  const server = createServer((request, response) => {
    handle(request, response).catch((error: unknown) => send(response, 500, { error: String(error) }));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    apiKey,
    requests,
    machinesLeft: () =>
      [...machines.values()]
        .filter((machine) => machine.state !== "deleted")
        .map((machine) => `${machine.id} (${machine.state}) on ${machine.host.host}`),
    async [Symbol.asyncDispose]() {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      for (const [host, text] of original) await writeFile(authorizedKeys(host), text);
    },
  };
}
