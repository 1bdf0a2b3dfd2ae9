/**
 * A fake Google Compute Engine (and the Cloud Billing Catalog's SKU list) for tests: an HTTP server on
 * 127.0.0.1 answering the REST calls `@google-cloud/compute` makes, with the documented request and
 * response shapes (see `fixtures.ts` for the data and the pages each shape comes from). It keeps VMs,
 * firewall rules and operations in memory and records every request. It checks what Compute Engine
 * checks and the provider relies on: the bearer token, known machine and accelerator types, GPUs only
 * with `onHostMaintenance: TERMINATE`, unique names, spot only with `provisioningModel: SPOT`.
 *
 * Reference pages: instances (https://cloud.google.com/compute/docs/reference/rest/v1/instances;
 * insert, get, list, aggregatedList, delete), operations
 * (https://cloud.google.com/compute/docs/reference/rest/v1/zoneOperations/wait,
 * https://cloud.google.com/compute/docs/reference/rest/v1/globalOperations/wait), firewalls
 * (https://cloud.google.com/compute/docs/reference/rest/v1/firewalls), errors
 * (https://cloud.google.com/compute/docs/api/how-tos/api-requests-responses#handling_api_responses).
 */
import { createPublicKey, verify } from "node:crypto";
import { type FakeRestRequest, startFakeRestServer } from "@skyward/testing";
import { BASE, DEFAULT_SERVICE_ACCOUNT, googleError, type Operation, send } from "./fake-gce-answers.js";
import { billedPrice, insertRefusal, matchesFilter } from "./fake-gce-checks.js";
import { gpuQuotas } from "./fake-gce-quotas.js";
import { otherApiAnswer } from "./fake-google-apis.js";
import { acceleratorTypes, machineTypes, PROJECT, ZONES } from "./fixtures.js";

export { DEFAULT_SERVICE_ACCOUNT } from "./fake-gce-answers.js";

export { PROJECT } from "./fixtures.js";

/** The access token the fake accepts (as `GCP({ accessToken })` or `GOOGLE_OAUTH_ACCESS_TOKEN`). */
export const TEST_ACCESS_TOKEN = "ya29.fake-gce-token-0123456789abcdef";

/** One request the fake received. */
export interface RecordedRequest {
  readonly method: string;
  readonly path: string;
  readonly query: URLSearchParams;
  readonly authorization: string | undefined;
  readonly body: Record<string, unknown> | undefined;
}

/** A VM as the fake keeps it: the Instance resource. */
export type FakeInstance = Record<string, unknown> & {
  name: string;
  zone: string;
  status: string;
  labels?: Record<string, string>;
};

/** The fake, its state and its controls. */
export interface FakeGce {
  /** `http://127.0.0.1:PORT`: the provider's `apiEndpoint` and `billingEndpoint`. */
  readonly endpoint: string;
  readonly requests: RecordedRequest[];
  /** VMs by `zone/name`. */
  readonly instances: Map<string, FakeInstance>;
  /** Firewall rules by name. */
  readonly firewalls: Map<string, Record<string, unknown>>;
  /**
   * Markets out of capacity: `"spot"`, `"on-demand"` or `"ZONE MACHINE-TYPE MARKET"`; an insert
   * there ends in the documented `ZONE_RESOURCE_POOL_EXHAUSTED` operation error.
   */
  readonly exhausted: Set<string>;
  /** Addresses handed to new VMs in turn (natIP and networkIP), round robin; none set: 10.128.0.N. */
  addresses: string[];
  /** How many `get`s a new VM answers STAGING before RUNNING. Default 1. */
  stagingGets: number;
  /**
   * Service accounts whose self-signed JWTs (RS256, `iss` the account's email) the fake accepts as
   * bearer tokens, by email: the public half of the key in the account's key file
   * (https://google.aip.dev/auth/4111).
   */
  readonly serviceAccounts: Map<string, string>;
  /**
   * GPU quota limits: `GPUS_ALL_REGIONS` (the project's, all regions and markets) and `REGION METRIC`
   * (`us-central1 NVIDIA_T4_GPUS`, `us-central1 PREEMPTIBLE_NVIDIA_T4_GPUS`). Unset: 64. The live VMs'
   * GPUs are their usage; `regions.get` and `projects.get` report both, and an insert past one is
   * refused at once with HTTP 403 `quotaExceeded`, as Compute Engine does.
   */
  readonly quotaLimits: Map<string, number>;
  /**
   * The project's `enable-oslogin` metadata: with OS Login on, a VM ignores `ssh-keys` unless its own
   * metadata says `enable-oslogin=FALSE` (https://cloud.google.com/compute/docs/oslogin/set-up-oslogin).
   */
  osLoginProject: boolean;
  /**
   * When set, the Cloud Billing Catalog refuses a request without `x-goog-user-project`, as it does
   * for user credentials with no quota project
   * (https://cloud.google.com/docs/authentication/adc-troubleshooting/user-creds).
   */
  billingNeedsQuotaProject: boolean;
  /**
   * When set, the organisation policy `constraints/compute.requireOsLogin` is enforced on the project:
   * Resource Manager's `getEffectiveOrgPolicy` says so, and VMs ignore their own `enable-oslogin`
   * (https://cloud.google.com/compute/docs/oslogin/manage-oslogin-in-an-org).
   */
  requireOsLoginPolicy: boolean;
  /** Service accounts (emails) IAM answers 404 for: they do not exist. */
  readonly missingServiceAccounts: Set<string>;
  /** Service accounts the caller lacks `iam.serviceAccounts.actAs` on (testIamPermissions grants nothing). */
  readonly actAsDenied: Set<string>;
  /** The `x-goog-user-project` header of every Catalog request, in order (undefined: none). */
  readonly billingQuotaProjects: (string | undefined)[];
  /**
   * The fault matrix's switches (`@skyward/testing`'s `runFaultMatrix`): 429s to answer next, as
   * Compute Engine answers a project over its API rate (reason `rateLimitExceeded`,
   * https://cloud.google.com/compute/api-quota); the next insert made but answered 503, its answer
   * lost; while `brokenListShape`, `aggregatedList` answers a shape Compute Engine never sends (no
   * `kind`, the VMs under an unknown field); and every VM ever created with the hourly price it bills
   * (the price tag the insert carries).
   */
  readonly faults: {
    rateLimited: number;
    loseNextInsertAnswer: boolean;
    brokenListShape: boolean;
    /**
     * How long an insert takes before its VM exists and the answer comes (Compute Engine answers an
     * insert once the VM resource is made); 0, the default: at once.
     */
    insertDelayMs: number;
    readonly created: { readonly id: string; readonly hourlyPrice: number }[];
  };
  /** Whether a VM's guest agent takes its `ssh-keys` metadata (so a key in it logs in). */
  acceptsSshKeys(instance: FakeInstance): boolean;
  /** Forgets requests, VMs, rules and exhaustion. */
  reset(): void;
  close(): Promise<void>;
}

/** Starts the fake on 127.0.0.1 (a free port). */
export async function startFakeGce(): Promise<FakeGce> {
  const instances = new Map<string, FakeInstance>();
  const firewalls = new Map<string, Record<string, unknown>>();
  const operations = new Map<string, Operation>();
  const exhausted = new Set<string>();
  const stagingLeft = new Map<string, number>();
  let nextId = 1;
  let nextAddress = 2;

  const operation = (type: string, target: string, zone: string | undefined, error?: Operation["error"]) => {
    const id = nextId++;
    const name = `operation-${Date.now()}-${id}`;
    const now = new Date().toISOString();
    const op: Operation = {
      kind: "compute#operation",
      id: String(9_000_000 + id),
      name,
      operationType: type,
      targetLink: target,
      // The first answer is RUNNING, as Compute Engine's is; `wait` then finds it DONE.
      status: "RUNNING",
      progress: 0,
      insertTime: now,
      startTime: now,
      ...(zone ? { zone: `${BASE}/zones/${zone}` } : {}),
      selfLink: zone ? `${BASE}/zones/${zone}/operations/${name}` : `${BASE}/global/operations/${name}`,
      ...(error ? { error } : {}),
    };
    operations.set(name, op);
    return op;
  };

  const finish = (op: Operation) => {
    op.status = "DONE";
    op.progress = 100;
    op.endTime = new Date().toISOString();
    return op;
  };

  const fake: FakeGce = {
    endpoint: "",
    requests: [],
    instances,
    firewalls,
    exhausted,
    serviceAccounts: new Map(),
    quotaLimits: new Map(),
    osLoginProject: false,
    billingNeedsQuotaProject: false,
    requireOsLoginPolicy: false,
    faults: {
      rateLimited: 0,
      loseNextInsertAnswer: false,
      brokenListShape: false,
      insertDelayMs: 0,
      created: [],
    },
    missingServiceAccounts: new Set(),
    actAsDenied: new Set(),
    billingQuotaProjects: [],
    acceptsSshKeys(instance) {
      const items = ((instance.metadata as { items?: { key: string; value: string }[] } | undefined)?.items ??
        []) as { key: string; value: string }[];
      const own = items.find((item) => item.key === "enable-oslogin")?.value?.toUpperCase();
      if (fake.requireOsLoginPolicy) return false;
      return own !== undefined ? own !== "TRUE" : !fake.osLoginProject;
    },
    addresses: [],
    stagingGets: 1,
    reset() {
      fake.requests.length = 0;
      instances.clear();
      firewalls.clear();
      operations.clear();
      exhausted.clear();
      stagingLeft.clear();
      fake.quotaLimits.clear();
      fake.osLoginProject = false;
      fake.billingNeedsQuotaProject = false;
      fake.requireOsLoginPolicy = false;
      fake.faults.rateLimited = 0;
      fake.faults.loseNextInsertAnswer = false;
      fake.faults.brokenListShape = false;
      fake.faults.insertDelayMs = 0;
      fake.missingServiceAccounts.clear();
      fake.actAsDenied.clear();
      fake.billingQuotaProjects.length = 0;
      fake.addresses = [];
      fake.stagingGets = 1;
    },
    close: async () => undefined,
  };

  const { quotasOf, refusal: quotaRefusal } = gpuQuotas(instances, fake.quotaLimits);

  const insertInstance = (zone: string, body: Record<string, unknown>) => {
    const refused = insertRefusal(zone, body, (name) => instances.has(`${zone}/${name}`));
    if (refused) return refused;
    const name = String(body.name ?? "");
    const machineType = String(body.machineType ?? "")
      .split("/")
      .pop();
    const scheduling = (body.scheduling ?? {}) as Record<string, unknown>;
    const spot = scheduling.provisioningModel === "SPOT";
    const market = spot ? "spot" : "on-demand";
    const target = `${BASE}/zones/${zone}/instances/${name}`;
    // Quotas are checked at once, before any operation: HTTP 403, reason quotaExceeded
    // (https://cloud.google.com/compute/docs/troubleshooting/troubleshooting-quota).
    const overQuota = quotaRefusal(zone, body, spot);
    if (overQuota) return overQuota;
    if (exhausted.has(market) || exhausted.has(`${zone} ${machineType} ${market}`)) {
      // https://cloud.google.com/compute/docs/troubleshooting/troubleshooting-resource-availability
      const op = operation("insert", target, zone, {
        errors: [
          {
            code: "ZONE_RESOURCE_POOL_EXHAUSTED",
            message: `The zone 'projects/${PROJECT}/zones/${zone}' does not have enough resources available to fulfill the request. Try a different zone, or try again later.`,
          },
        ],
      });
      return send(op);
    }
    const address =
      fake.addresses.length > 0
        ? (fake.addresses[(nextAddress - 2) % fake.addresses.length] as string)
        : `10.128.0.${nextAddress}`;
    nextAddress += 1;
    const networkInterfaces = ((body.networkInterfaces ?? []) as Record<string, unknown>[]).map(
      (nic, index) => ({
        kind: "compute#networkInterface",
        network: `${BASE}/${String(nic.network ?? "global/networks/default")}`,
        subnetwork: `${BASE}/regions/${zone.replace(/-[a-z]$/, "")}/subnetworks/default`,
        networkIP: address,
        name: `nic${index}`,
        stackType: "IPV4_ONLY",
        accessConfigs: ((nic.accessConfigs ?? []) as Record<string, unknown>[]).map((config) => ({
          kind: "compute#accessConfig",
          type: config.type ?? "ONE_TO_ONE_NAT",
          name: config.name ?? "External NAT",
          natIP: address,
          networkTier: "PREMIUM",
        })),
      }),
    );
    const instance: FakeInstance = {
      ...body,
      kind: "compute#instance",
      id: String(4_000_000_000 + nextId++),
      creationTimestamp: new Date().toISOString(),
      name,
      zone: `${BASE}/zones/${zone}`,
      machineType: `${BASE}/zones/${zone}/machineTypes/${machineType}`,
      status: "STAGING",
      networkInterfaces,
      scheduling: { ...scheduling, ...(spot ? { preemptible: false } : {}) },
      cpuPlatform: "Intel Broadwell",
      selfLink: target,
      labels: (body.labels ?? {}) as Record<string, string>,
      labelFingerprint: "42WmSpB8rSM=",
      metadata: {
        kind: "compute#metadata",
        fingerprint: "Tpqx_uZ-tWQ=",
        ...((body.metadata ?? {}) as object),
      },
    };
    instances.set(`${zone}/${name}`, instance);
    stagingLeft.set(`${zone}/${name}`, fake.stagingGets);
    fake.faults.created.push({ id: String(name), hourlyPrice: billedPrice(instance) });
    if (fake.faults.loseNextInsertAnswer) {
      fake.faults.loseNextInsertAnswer = false;
      return googleError(503, "The service is currently unavailable.", "backendError");
    }
    return send(operation("insert", target, zone));
  };

  /** The fake token, or a self-signed JWT of a known service account, correctly signed and unexpired. */
  const authorized = (header: string | undefined): boolean => {
    if (header === `Bearer ${TEST_ACCESS_TOKEN}`) return true;
    const [head, payload, signature] = (header ?? "").replace(/^Bearer /, "").split(".");
    if (!head || !payload || !signature) return false;
    try {
      const claims = JSON.parse(Buffer.from(payload, "base64url").toString("utf8")) as {
        iss?: string;
        exp?: number;
      };
      const key = fake.serviceAccounts.get(claims.iss ?? "");
      if (!key || (claims.exp ?? 0) * 1000 < Date.now()) return false;
      return verify(
        "RSA-SHA256",
        Buffer.from(`${head}.${payload}`),
        createPublicKey(key),
        Buffer.from(signature, "base64url"),
      );
    } catch {
      return false;
    }
  };

  /**
   * Compute Engine's own guard: a VM past its `maxRunDuration` is deleted (`instanceTerminationAction:
   * DELETE`) or stopped, whatever else is running (https://cloud.google.com/compute/docs/instances/limit-vm-runtime).
   */
  const enforceRunDurations = () => {
    for (const [key, instance] of instances) {
      const scheduling = instance.scheduling as
        | { maxRunDuration?: { seconds?: string }; instanceTerminationAction?: string }
        | undefined;
      const seconds = Number(scheduling?.maxRunDuration?.seconds ?? Number.NaN);
      if (!Number.isFinite(seconds)) continue;
      if (Date.now() - Date.parse(String(instance.creationTimestamp)) < seconds * 1000) continue;
      if (scheduling?.instanceTerminationAction === "DELETE") instances.delete(key);
      else instance.status = "TERMINATED";
    }
  };

  const handle = async (request: FakeRestRequest) => {
    enforceRunDurations();
    const { path, method, query } = request;
    const body = request.body as Record<string, unknown> | undefined;
    if (!authorized(request.headers.authorization))
      return googleError(
        401,
        "Request is missing required authentication credential. Expected OAuth 2 access token, login cookie or other valid authentication credential.",
        "required",
      );

    if (fake.faults.rateLimited > 0) {
      fake.faults.rateLimited -= 1;
      return googleError(429, "Rate Limit Exceeded", "rateLimitExceeded");
    }

    const other = otherApiAnswer(fake, request);
    if (other) return other;

    const prefix = `/compute/v1/projects/${PROJECT}/`;
    if (!path.startsWith(prefix) && path !== `/compute/v1/projects/${PROJECT}`)
      return googleError(404, `The resource '${path}' was not found`, "notFound");
    const parts = path.slice(prefix.length).split("/");

    // Project and Region resources with their quotas:
    // https://cloud.google.com/compute/docs/reference/rest/v1/projects/get,
    // https://cloud.google.com/compute/docs/reference/rest/v1/regions/get.
    if (method === "GET" && path === `/compute/v1/projects/${PROJECT}`)
      return send({
        kind: "compute#project",
        name: PROJECT,
        defaultServiceAccount: DEFAULT_SERVICE_ACCOUNT,
        quotas: quotasOf(),
        selfLink: BASE,
      });
    if (method === "GET" && parts[0] === "regions" && parts[1] && parts.length === 2)
      return send({
        kind: "compute#region",
        name: parts[1],
        status: "UP",
        quotas: quotasOf(parts[1]),
        selfLink: `${BASE}/regions/${parts[1]}`,
      });

    if (method === "GET" && parts.length === 1 && parts[0] === "zones")
      return send({ kind: "compute#zoneList", items: ZONES, selfLink: `${BASE}/zones` });

    if (method === "GET" && parts[0] === "aggregated" && parts[1] === "instances") {
      // https://cloud.google.com/compute/docs/reference/rest/v1/instances/aggregatedList
      if (fake.faults.brokenListShape)
        return send({
          resources: [...instances.values()].filter((vm) => matchesFilter(vm, query.get("filter"))),
        });
      const items: Record<string, unknown> = {};
      for (const zone of ZONES) {
        const found = [...instances.values()].filter(
          (instance) =>
            instance.zone.endsWith(`/${zone.name}`) && matchesFilter(instance, query.get("filter")),
        );
        items[`zones/${zone.name}`] =
          found.length > 0
            ? { instances: found }
            : {
                warning: {
                  code: "NO_RESULTS_ON_PAGE",
                  message: `There are no results for scope 'zones/${zone.name}' on this page.`,
                  data: [{ key: "scope", value: `zones/${zone.name}` }],
                },
              };
      }
      return send({
        kind: "compute#instanceAggregatedList",
        id: `projects/${PROJECT}/aggregated/instances`,
        items,
        selfLink: `${BASE}/aggregated/instances`,
      });
    }

    if (parts[0] === "global" && parts[1] === "firewalls") {
      const name = parts[2];
      const target = `${BASE}/global/firewalls/${name ?? ""}`;
      if (method === "GET" && !name)
        return send({
          kind: "compute#firewallList",
          items: [...firewalls.values()],
          selfLink: `${BASE}/global/firewalls`,
        });
      if (method === "POST" && !name && body) {
        const ruleName = String(body.name ?? "");
        if (firewalls.has(ruleName))
          return googleError(
            409,
            `The resource 'projects/${PROJECT}/global/firewalls/${ruleName}' already exists`,
            "alreadyExists",
          );
        if (!Array.isArray(body.allowed) || (!body.sourceRanges && !body.sourceTags))
          return googleError(
            400,
            "Invalid value for field 'resource': a firewall needs allowed and sources.",
            "invalid",
          );
        firewalls.set(ruleName, {
          ...body,
          kind: "compute#firewall",
          id: String(7_000_000 + nextId++),
          creationTimestamp: new Date().toISOString(),
          network: `${BASE}/${String(body.network ?? "global/networks/default")}`,
          priority: 1000,
          selfLink: `${BASE}/global/firewalls/${ruleName}`,
        });
        return send(operation("insert", `${BASE}/global/firewalls/${ruleName}`, undefined));
      }
      if (name && !firewalls.has(name))
        return googleError(
          404,
          `The resource 'projects/${PROJECT}/global/firewalls/${name}' was not found`,
          "notFound",
        );
      if (method === "GET" && name) return send(firewalls.get(name));
      if (method === "DELETE" && name) {
        firewalls.delete(name);
        return send(operation("delete", target, undefined));
      }
    }

    if (parts[0] === "global" && parts[1] === "operations" && parts[2]) {
      const op = operations.get(parts[2]);
      if (!op)
        return googleError(
          404,
          `The resource 'projects/${PROJECT}/global/operations/${parts[2]}' was not found`,
          "notFound",
        );
      return send(finish(op));
    }

    if (parts[0] === "zones" && parts[1]) {
      const zone = parts[1];
      if (!ZONES.some((entry) => entry.name === zone))
        return googleError(400, `Invalid value for field 'zone': '${zone}'. Unknown zone.`, "invalid");
      const collection = parts[2];
      const name = parts[3];
      if (method === "GET" && collection === "machineTypes" && !name) {
        // Paged by 5 (maxResults and pageToken: https://cloud.google.com/compute/docs/reference/rest/v1/machineTypes/list).
        const all = machineTypes(zone);
        const start = Number(query.get("pageToken") || "0");
        const end = start + Math.min(5, Number(query.get("maxResults") || "500"));
        return send({
          kind: "compute#machineTypeList",
          items: all.slice(start, end),
          ...(end < all.length ? { nextPageToken: String(end) } : {}),
          selfLink: `${BASE}/zones/${zone}/machineTypes`,
        });
      }
      if (method === "GET" && collection === "acceleratorTypes" && !name)
        return send({
          kind: "compute#acceleratorTypeList",
          items: acceleratorTypes(zone),
          selfLink: `${BASE}/zones/${zone}/acceleratorTypes`,
        });
      if (collection === "operations" && name) {
        const op = operations.get(name);
        if (!op)
          return googleError(
            404,
            `The resource 'projects/${PROJECT}/zones/${zone}/operations/${name}' was not found`,
            "notFound",
          );
        return send(finish(op));
      }
      if (collection === "instances") {
        if (method === "POST" && !name && body) {
          if (fake.faults.insertDelayMs > 0)
            await new Promise((resolve) => setTimeout(resolve, fake.faults.insertDelayMs));
          return insertInstance(zone, body);
        }
        if (method === "GET" && !name) {
          const items = [...instances.values()].filter(
            (instance) => instance.zone.endsWith(`/${zone}`) && matchesFilter(instance, query.get("filter")),
          );
          return send({
            kind: "compute#instanceList",
            items,
            selfLink: `${BASE}/zones/${zone}/instances`,
          });
        }
        const key = `${zone}/${name ?? ""}`;
        const instance = instances.get(key);
        if (!instance)
          return googleError(
            404,
            `The resource 'projects/${PROJECT}/zones/${zone}/instances/${name}' was not found`,
            "notFound",
          );
        if (method === "GET") {
          const left = stagingLeft.get(key) ?? 0;
          if (instance.status === "STAGING") {
            if (left <= 0) instance.status = "RUNNING";
            else stagingLeft.set(key, left - 1);
          }
          return send(instance);
        }
        if (method === "DELETE") {
          // The VM is STOPPING while the delete runs, then gone.
          instance.status = "STOPPING";
          setTimeout(() => instances.delete(key), 50).unref();
          return send(operation("delete", instance.selfLink as string, zone));
        }
      }
    }
    return googleError(404, `The fake has no ${method} ${path}`, "notFound");
  };

  const server = await startFakeRestServer({
    record: ({ method, path, query, headers, body }): RecordedRequest => ({
      method,
      path,
      query,
      authorization: headers.authorization,
      body: body as Record<string, unknown> | undefined,
    }),
    handle,
    failed: (error) => googleError(500, (error as Error).message, "backendError"),
  });
  Object.assign(fake, { endpoint: server.origin, requests: server.requests, close: () => server.close() });
  return fake;
}

/** What Skyward left in the fake: live VMs (by zone/name) and firewall rules. */
export function fakeLeftovers(fake: FakeGce): string[] {
  return [
    ...[...fake.instances.entries()].map(([key, instance]) => `instance ${key} (${instance.status})`),
    ...[...fake.firewalls.keys()].map((name) => `firewall ${name}`),
  ].sort();
}

/** Every endpoint of the GCP provider pointed at the fake: Compute Engine, Cloud Billing, IAM, Resource Manager. */
export function fakeEndpoints(fake: Pick<FakeGce, "endpoint">) {
  return {
    apiEndpoint: fake.endpoint,
    billingEndpoint: fake.endpoint,
    iamEndpoint: fake.endpoint,
    resourceManagerEndpoint: fake.endpoint,
  };
}

/** The settings of a provider driven against the fake: its project, its access token, every endpoint. */
export function fakeGcpSettings(fake: Pick<FakeGce, "endpoint">) {
  return { project: PROJECT, accessToken: TEST_ACCESS_TOKEN, ...fakeEndpoints(fake) };
}
