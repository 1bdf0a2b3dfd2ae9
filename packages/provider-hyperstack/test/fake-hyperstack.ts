/**
 * A fake of Hyperstack's Infrahub API, serving on loopback, built from the documented request and answer
 * shapes (`fixtures.ts` names the page of each): flavors, the pricebook, images, environments, key pairs,
 * virtual machines and their firewall rules. It checks what the real API checks (the `api_key` header,
 * that the environment, key pair, flavor and image exist in the right region, stock) and keeps its
 * state in memory.
 *
 * Given a test bed, it hands out real machines: each new VM gets a free test-bed host, its floating IP
 * is that host's address, and the key pair's public key is authorised on the host, as Hyperstack puts
 * it on a new VM; deleting the VM takes the key away again. Without one, floating IPs are documentation
 * addresses nothing answers on.
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
import { errors, flavorGroups, imageGroups, pricebook } from "./fixtures.js";

/** One request the fake received. */
export interface RecordedRequest {
  readonly method: string;
  readonly path: string;
  readonly query: URLSearchParams;
  readonly body: unknown;
  /** The `api_key` header as sent (a secret of the test; compared, never printed). */
  readonly apiKey: string | undefined;
}

interface FakeEnvironment {
  id: number;
  name: string;
  region: string;
  created_at: string;
}

interface FakeKeypair {
  id: number;
  name: string;
  environment: string;
  public_key: string;
  created_at: string;
}

/** A VM as the fake keeps it. */
export interface FakeVm {
  id: number;
  name: string;
  environment: FakeEnvironment;
  flavorName: string;
  imageName: string;
  keyName: string;
  labels: string[];
  userData: string;
  securityRules: Record<string, unknown>[];
  status: "CREATING" | "ACTIVE" | "DELETING";
  reads: number;
  floatingIp: string;
  fixedIp: string;
  host: TestbedHost | undefined;
  createdAt: string;
  payload: Record<string, unknown>;
}

/** A running fake. */
export interface FakeHyperstack extends AsyncDisposable {
  /** The API root to give the provider as `apiUrl` (`http://127.0.0.1:PORT/v1`). */
  readonly apiUrl: string;
  /** The API key it accepts. */
  readonly apiKey: string;
  readonly requests: RecordedRequest[];
  readonly vms: Map<number, FakeVm>;
  /** Flavors (by name) out of stock: creating a VM of one fails as the real API does. */
  readonly outOfStock: Set<string>;
  /**
   * What the fake does beside the defaults: the most items a list page holds (whatever was asked), a
   * VM being created refusing to be deleted, and random public ports given whatever was asked.
   */
  readonly state: {
    maxPageSize: number;
    refuseDeleteWhileCreating: boolean;
    randomizePorts: boolean;
    /** How many more creates are made but answered 502, as if the answer were lost on the way. */
    loseCreateAnswers: number;
    /** Whether the list of VMs answers a shape the documentation does not show. */
    unknownVmList: boolean;
    /** Whether lists answer every item on every page, with no count (an API that ignores `page`). */
    ignorePaging: boolean;
  };
  /** The fault matrix's switches (a 429 storm, refusals to delete) and every VM created, at what it bills an hour. */
  readonly switches: FakeFaultSwitches;
  /** Hyperstack takes the VM back (its host lost): it is gone. */
  reclaim(id: string): Promise<void>;
  /** Runs each VM's boot watchdog as if its time were up with no worker: one whose user data arms it is deleted. */
  fireBootWatchdogs(): Promise<void>;
  /** What Skyward left: environments, key pairs and VMs not deleted, in words. */
  leftovers(): string[];
  /** Requests as `METHOD path`, optionally only those whose path matches. */
  calls(path?: RegExp): string[];
}

const FLAVORS = flavorGroups.flatMap((group) => group.flavors);
const IMAGES = imageGroups.flatMap((group) => group.images);

/** Starts the fake on 127.0.0.1; with `hosts`, its VMs are those test-bed hosts. */
export async function startFakeHyperstack(
  options: { hosts?: readonly TestbedHost[] } = {},
): Promise<FakeHyperstack> {
  const apiKey = `hs-test-${randomBytes(12).toString("hex")}`;
  const environments = new Map<number, FakeEnvironment>();
  const keypairs = new Map<number, FakeKeypair>();
  const vms = new Map<number, FakeVm>();
  const outOfStock = new Set<string>();
  let nextId = 1000;
  const state = {
    maxPageSize: 100,
    refuseDeleteWhileCreating: false,
    randomizePorts: false,
    loseCreateAnswers: 0,
    unknownVmList: false,
    ignorePaging: false,
  };
  const hosts = await testbedHostPool<number>(options.hosts ?? []);
  const switches = fakeFaultSwitches();

  /** What a VM of `flavor` bills an hour, by the pricebook: per GPU for GPU flavors, per VM for the others. */
  const hourlyPriceOf = (flavor: (typeof FLAVORS)[number]) => {
    const listedPrice = (name: string) => pricebook.find((entry) => entry.name === name)?.value;
    const perGpu = listedPrice(flavor.gpu);
    return perGpu === undefined ? Number(listedPrice(flavor.name) ?? 0) : Number(perGpu) * flavor.gpu_count;
  };

  /** Starts deleting a VM, as `DELETE /core/virtual-machines/{id}` does. */
  const startDeleting = async (vm: FakeVm) => {
    if (vm.status === "DELETING") return;
    vm.status = "DELETING";
    vm.reads = 0;
    await hosts.revoke(vm.id);
  };

  /** Instance_Fields of the VM. https://docs.hyperstack.cloud/docs/api-reference/virtual-machine */
  const instanceFields = (vm: FakeVm) => {
    const flavor = FLAVORS.find((entry) => entry.name === vm.flavorName);
    const active = vm.status === "ACTIVE";
    return {
      id: vm.id,
      name: vm.name,
      status: vm.status,
      environment: {
        id: vm.environment.id,
        name: vm.environment.name,
        org_id: 7,
        region: vm.environment.region,
      },
      image: { name: vm.imageName },
      flavor: flavor
        ? {
            id: flavor.id,
            name: flavor.name,
            cpu: flavor.cpu,
            ram: flavor.ram,
            disk: flavor.disk,
            ephemeral: flavor.ephemeral,
            gpu: flavor.gpu,
            gpu_count: flavor.gpu_count,
            labels: flavor.labels,
            features: {},
          }
        : null,
      os: "Ubuntu",
      keypair: { name: vm.keyName },
      volume_attachments: [],
      security_rules: vm.securityRules,
      power_state: active ? "RUNNING" : "NOSTATE",
      vm_state: active ? "active" : "building",
      fixed_ip: active ? vm.fixedIp : null,
      floating_ip: active ? vm.floatingIp : null,
      floating_ip_status: active ? "ATTACHED" : "ATTACHING",
      port_randomization: state.randomizePorts || vm.payload.enable_port_randomization !== false,
      port_randomization_status: active ? "COMPLETED" : "PENDING",
      callback_url: "",
      locked: false,
      contract_id: null,
      created_at: vm.createdAt,
      labels: vm.labels,
      features: {},
      requires_public_ip: true,
    };
  };

  /** Whether a VM is still there: one being deleted is seen once more (as DELETING), then it is gone. */
  const stillThere = (vm: FakeVm): boolean => {
    if (vm.status !== "DELETING") return true;
    vm.reads += 1;
    if (vm.reads <= 1) return true;
    vms.delete(vm.id);
    void hosts.release(vm.id);
    return false;
  };

  /**
   * One page of a list, as Hyperstack pages environments, key pairs and VMs: `page` and `pageSize` asked,
   * `{page, page_size, count, <items>}` answered (the list-VMs answer's fields, ListVMsResponse; the
   * endpoints: https://infrahub-doc.nexgencloud.com/docs/api-reference/core-resources/environments and
   * its sibling pages), at most `maxPageSize` a page whatever was asked.
   */
  const paged = <Item>(query: URLSearchParams, items: readonly Item[], key: string) => {
    if (state.ignorePaging) return { [key]: items };
    const page = Number(query.get("page") ?? 1);
    const pageSize = Math.min(Number(query.get("pageSize") ?? 10), state.maxPageSize);
    return {
      page,
      page_size: pageSize,
      count: items.length,
      [key]: items.slice((page - 1) * pageSize, page * pageSize),
    };
  };

  const routes = fakeRoutes(
    {
      "GET /core/flavors": ({ query }) => {
        const region = query.get("region");
        const data = flavorGroups
          .filter((group) => region === null || group.region_name === region)
          .map((group) => ({
            ...group,
            flavors: group.flavors.map((entry) => ({
              ...entry,
              stock_available: entry.stock_available && !outOfStock.has(entry.name),
            })),
          }));
        return jsonAnswer(200, { status: true, message: "Getting flavors success", data });
      },
      "GET /pricebook": () => jsonAnswer(200, pricebook),
      "GET /core/images": ({ query }) => {
        const region = query.get("region");
        const images = imageGroups.filter((group) => region === null || group.region_name === region);
        return jsonAnswer(200, { status: true, message: "Getting images success", images });
      },
      "POST /core/environments": ({ body }) => {
        const payload = (body ?? {}) as Record<string, unknown>;
        const name = String(payload.name ?? "");
        const region = String(payload.region ?? "");
        if (!name || name.length > 50)
          return jsonAnswer(400, { ...errors.notFound("name"), message: "invalid name" });
        if (!flavorGroups.some((group) => group.region_name === region))
          return jsonAnswer(400, {
            status: false,
            message: `Invalid region ${region}`,
            error_reason: "bad_request",
          });
        if ([...environments.values()].some((entry) => entry.name === name))
          return jsonAnswer(409, errors.duplicate(`Environment ${name}`));
        const environment = { id: nextId++, name, region, created_at: new Date().toISOString() };
        environments.set(environment.id, environment);
        return jsonAnswer(200, {
          status: true,
          message: "Environment created successfully",
          environment: {
            ...environment,
            org_id: 7,
            features: { network_optimised: false, green_status: "GREEN" },
          },
        });
      },
      "GET /core/environments": ({ query }) =>
        jsonAnswer(200, {
          status: true,
          message: "Getting environments success",
          ...paged(
            query,
            [...environments.values()].map((entry) => ({ ...entry, org_id: 7, features: {} })),
            "environments",
          ),
        }),
      "DELETE /core/environments/:id": (_, { id }) => {
        const environment = environments.get(Number(id));
        if (!environment) return jsonAnswer(404, errors.notFound("Environment"));
        const busy =
          [...vms.values()].some((vm) => vm.environment.id === environment.id) ||
          [...keypairs.values()].some((keypair) => keypair.environment === environment.name);
        if (busy) return jsonAnswer(409, errors.inUse(`Environment ${environment.name}`));
        environments.delete(environment.id);
        return jsonAnswer(200, { status: true, message: "Environment deleted successfully" });
      },
      "POST /core/keypairs": ({ body }) => {
        const payload = (body ?? {}) as Record<string, unknown>;
        const environment = [...environments.values()].find(
          (entry) => entry.name === payload.environment_name,
        );
        if (!environment) return jsonAnswer(404, errors.notFound("Environment"));
        const name = String(payload.name ?? "");
        if (
          [...keypairs.values()].some(
            (entry) => entry.name === name && entry.environment === environment.name,
          )
        )
          return jsonAnswer(409, errors.duplicate(`Keypair ${name}`));
        const publicKey = String(payload.public_key ?? "");
        if (!/^ssh-(ed25519|rsa) /.test(publicKey))
          return jsonAnswer(400, {
            status: false,
            message: "Invalid public key",
            error_reason: "bad_request",
          });
        const keypair = {
          id: nextId++,
          name,
          environment: environment.name,
          public_key: publicKey,
          created_at: new Date().toISOString(),
        };
        keypairs.set(keypair.id, keypair);
        return jsonAnswer(200, {
          status: true,
          message: "Keypair is imported successfully",
          keypair: { ...keypair, environment: { ...environment, features: {} }, fingerprint: "ff:00:4b:02" },
        });
      },
      "GET /core/keypairs": ({ query }) =>
        jsonAnswer(200, {
          status: true,
          message: "Getting keypairs success",
          ...paged(
            query,
            [...keypairs.values()].map((entry) => ({ ...entry, fingerprint: "ff:00:4b:02" })),
            "keypairs",
          ),
        }),
      "DELETE /core/keypair/:id": (_, { id }) => {
        if (!keypairs.delete(Number(id))) return jsonAnswer(404, errors.notFound("Keypair"));
        return jsonAnswer(200, { status: true, message: "Keypair deleted successfully" });
      },
      "POST /core/virtual-machines": async ({ body }) => {
        const payload = (body ?? {}) as Record<string, unknown>;
        const environment = [...environments.values()].find(
          (entry) => entry.name === payload.environment_name,
        );
        if (!environment) return jsonAnswer(404, errors.notFound("Environment"));
        const keypair = [...keypairs.values()].find(
          (entry) => entry.name === payload.key_name && entry.environment === environment.name,
        );
        if (!keypair) return jsonAnswer(404, errors.notFound("Keypair"));
        const flavor = FLAVORS.find(
          (entry) => entry.name === payload.flavor_name && entry.region_name === environment.region,
        );
        if (!flavor) return jsonAnswer(404, errors.notFound(`Flavor ${String(payload.flavor_name)}`));
        if (
          !IMAGES.some(
            (entry) => entry.name === payload.image_name && entry.region_name === environment.region,
          )
        )
          return jsonAnswer(404, errors.notFound(`Image ${String(payload.image_name)}`));
        const count = Number(payload.count ?? 1);
        if (!Number.isInteger(count) || count < 1 || count > 20)
          return jsonAnswer(400, {
            status: false,
            message: "count must be 1 to 20",
            error_reason: "bad_request",
          });
        if (!flavor.stock_available || outOfStock.has(flavor.name)) return jsonAnswer(400, errors.noStock);
        if (hosts.hosts.length > 0 && hosts.free() < count) return jsonAnswer(400, errors.noStock);
        const created: FakeVm[] = [];
        for (let index = 0; index < count; index += 1) {
          const id = nextId++;
          const host = hosts.take(id);
          await hosts.authorize(id, keypair.public_key);
          const vm: FakeVm = {
            id,
            name: count > 1 ? `${String(payload.name)}-${index + 1}` : String(payload.name),
            environment,
            flavorName: flavor.name,
            imageName: String(payload.image_name),
            keyName: keypair.name,
            labels: Array.isArray(payload.labels) ? payload.labels.map(String) : [],
            userData: typeof payload.user_data === "string" ? payload.user_data : "",
            securityRules: (Array.isArray(payload.security_rules) ? payload.security_rules : []).map(
              (rule, at) => ({
                id: id * 100 + at,
                ...(rule as Record<string, unknown>),
                status: "SUCCESS",
              }),
            ),
            status: "CREATING",
            reads: 0,
            floatingIp: host?.host ?? `198.51.100.${(id % 250) + 1}`,
            fixedIp: `10.0.${environment.id % 250}.${(id % 250) + 2}`,
            host,
            createdAt: new Date().toISOString(),
            payload,
          };
          vms.set(id, vm);
          created.push(vm);
          switches.created.push({ id: String(id), hourlyPrice: hourlyPriceOf(flavor) });
        }
        if (state.loseCreateAnswers > 0) {
          state.loseCreateAnswers -= 1;
          return jsonAnswer(502, { status: false, message: "Bad gateway", error_reason: "internal" });
        }
        return jsonAnswer(200, {
          status: true,
          message: "Virtual machine(s) created successfully",
          instances: created.map(instanceFields),
        });
      },
      "GET /core/virtual-machines": ({ query }) => {
        if (state.unknownVmList) return jsonAnswer(200, { status: true, data: { vms: [] } });
        const search = query.get("search");
        const environment = query.get("environment");
        const exact = query.get("exact_environment_match") === "true";
        const listed = [...vms.values()]
          .filter(stillThere)
          .filter((vm) => search === null || vm.name.includes(search) || String(vm.id) === search)
          .filter(
            (vm) =>
              environment === null ||
              (exact ? vm.environment.name === environment : vm.environment.name.includes(environment)),
          );
        return jsonAnswer(200, {
          status: true,
          message: "Getting instances success",
          ...paged(query, listed.map(instanceFields), "instances"),
        });
      },
      "POST /core/virtual-machines/:id/sg-rules": ({ body }, { id }) => {
        const payload = (body ?? {}) as Record<string, unknown>;
        const vm = vms.get(Number(id));
        if (!vm) return jsonAnswer(404, errors.notFound("Virtual machine"));
        const rule = { id: vm.id * 100 + vm.securityRules.length, ...payload, status: "SUCCESS" };
        vm.securityRules.push(rule);
        return jsonAnswer(200, { status: true, message: "Rule added", security_rule: rule });
      },
      "GET /core/virtual-machines/:id": (_, { id }) => {
        const vm = vms.get(Number(id));
        if (!vm) return jsonAnswer(404, errors.notFound("Virtual machine"));
        if (!stillThere(vm)) return jsonAnswer(404, errors.notFound("Virtual machine"));
        if (vm.status === "CREATING") {
          vm.reads += 1;
          if (vm.reads > 1) vm.status = "ACTIVE";
        }
        return jsonAnswer(200, {
          status: true,
          message: "Getting instance success",
          instance: instanceFields(vm),
        });
      },
      "DELETE /core/virtual-machines/:id": async (_, { id }) => {
        const vm = vms.get(Number(id));
        if (!vm) return jsonAnswer(404, errors.notFound("Virtual machine"));
        if (state.refuseDeleteWhileCreating && vm.status === "CREATING") {
          // Time passes between tries: the VM gets on with its creation.
          vm.reads += 1;
          if (vm.reads > 1) vm.status = "ACTIVE";
          return jsonAnswer(400, errors.stillCreating);
        }
        if (switches.takeDeleteRefusal()) return jsonAnswer(400, errors.stillCreating);
        await startDeleting(vm);
        return jsonAnswer(200, { status: true, message: "Virtual machine deleted successfully" });
      },
    },
    ({ method, path }) => jsonAnswer(404, errors.notFound(`${method} ${path}`)),
  );

  const server = await startFakeRestServer({
    prefix: "/v1",
    record: ({ method, path, query, headers, body }): RecordedRequest => ({
      method,
      path,
      query,
      body,
      apiKey: typeof headers.api_key === "string" ? headers.api_key : undefined,
    }),
    handle: (request) =>
      switches.takeRateLimit(jsonAnswer(429, errors.rateLimited)) ??
      (request.headers.api_key === apiKey ? routes(request) : jsonAnswer(401, errors.unauthorized)),
    failed: (error) => jsonAnswer(500, { status: false, message: String(error), error_reason: "internal" }),
  });
  return {
    apiUrl: server.url,
    apiKey,
    requests: server.requests,
    vms,
    outOfStock,
    state,
    switches,
    async reclaim(id) {
      vms.delete(Number(id));
      await hosts.release(Number(id));
    },
    async fireBootWatchdogs() {
      for (const vm of [...vms.values()]) {
        // Armed: the watchdog line, and a self-destruct that deletes through this very API.
        if (
          /# Boot watchdog:/.test(vm.userData) &&
          vm.userData.includes(server.url) &&
          vm.userData.includes('"DELETE"')
        )
          await startDeleting(vm);
      }
    },
    leftovers: () => [
      ...[...environments.values()].map((entry) => `environment ${entry.name}`),
      ...[...keypairs.values()].map((entry) => `keypair ${entry.name}`),
      ...[...vms.values()]
        .filter((entry) => entry.status !== "DELETING")
        .map((entry) => `vm ${entry.id} ${entry.name}`),
    ],
    calls: (path) =>
      server.requests
        .filter((entry) => path === undefined || path.test(entry.path))
        .map((entry) => `${entry.method} ${entry.path}`),
    async [Symbol.asyncDispose]() {
      await server.close();
      await hosts.releaseAll();
    },
  };
}
