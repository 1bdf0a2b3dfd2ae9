/**
 * A fake Vast.ai for tests: msw handlers for the REST API the provider uses, answering with the
 * documented shapes (the JSON under `fixtures/`). The offer search really evaluates the query JSON's
 * operators over the fixture offers; rented asks leave the market; instances boot on their second
 * lookup. Every request is recorded; unhandled requests fail the test.
 */
import { HttpResponse, http } from "msw";
import { type SetupServer, setupServer } from "msw/node";
import errors from "./fixtures/errors.json" with { type: "json" };
import instanceTemplate from "./fixtures/instance.json" with { type: "json" };
import market from "./fixtures/offers.json" with { type: "json" };

/** The API key the fake accepts. */
export const TEST_API_KEY = "vast_test_5ecret_key_abcdef0123";

/** One request the fake received. */
export interface RecordedRequest {
  readonly method: string;
  readonly url: URL;
  readonly authorization: string | null;
  readonly body: unknown;
}

/** An instance as the fake keeps it. */
export interface FakeInstance {
  id: number;
  askId: number;
  body: Record<string, unknown>;
  lookups: number;
  state: "loading" | "running" | "exited";
}

/** The fake, its state and its controls. */
export interface FakeVast {
  readonly server: SetupServer;
  readonly requests: RecordedRequest[];
  readonly instances: Map<number, FakeInstance>;
  /** Asks rented (or taken away by someone else): no longer offered. */
  readonly rented: Set<number>;
  /** Public keys registered on the account. */
  readonly accountKeys: string[];
  /** Answers the next `count` requests with `response()` instead of handling them. */
  interrupt(count: number, response: () => Response): void;
  /** The requests to a path (`/api/v0/bundles/`), optionally of one method. */
  to(path: string | RegExp, method?: string): RecordedRequest[];
  reset(): void;
}

type Offer = (typeof market.offers)[number];
type Condition = Record<string, unknown>;

/** Whether an offer satisfies one field's operators (`{"gte": 4}`, `{"in": [...]}`), as Vast.ai's search does. */
function satisfies(value: unknown, condition: Condition): boolean {
  return Object.entries(condition).every(([operator, operand]) => {
    switch (operator) {
      case "eq":
        return value === operand;
      case "neq":
        return value !== operand;
      case "gt":
        return typeof value === "number" && value > Number(operand);
      case "gte":
        return typeof value === "number" && value >= Number(operand);
      case "lt":
        return typeof value === "number" && value < Number(operand);
      case "lte":
        return typeof value === "number" && value <= Number(operand);
      case "in":
        return Array.isArray(operand) && operand.includes(value);
      case "notin":
        return Array.isArray(operand) && !operand.includes(value);
      default:
        throw new Error(`the fake does not know operator ${operator}`);
    }
  });
}

const NOT_FILTERS = new Set(["order", "limit", "type", "allocated_storage", "disable_bundling"]);

function search(query: Record<string, unknown>, rented: Set<number>): Offer[] {
  const matching = market.offers.filter(
    (offer) =>
      !rented.has(offer.id) &&
      Object.entries(query).every(
        ([field, condition]) =>
          NOT_FILTERS.has(field) ||
          satisfies((offer as Record<string, unknown>)[field], condition as Condition),
      ),
  );
  const [[field, direction] = ["score", "desc"]] = (query.order as [string, string][] | undefined) ?? [];
  matching.sort((a, b) => {
    const left = Number((a as Record<string, unknown>)[field]);
    const right = Number((b as Record<string, unknown>)[field]);
    return direction === "asc" ? left - right : right - left;
  });
  return matching.slice(0, Number(query.limit ?? 64));
}

function instanceView(instance: FakeInstance): Record<string, unknown> {
  const offer = market.offers.find((entry) => entry.id === instance.askId);
  const running = instance.state === "running";
  return {
    ...instanceTemplate,
    id: instance.id,
    label: instance.body.label ?? null,
    actual_status: instance.state,
    cur_state: running ? "running" : "stopped",
    intended_status: instance.state === "exited" ? "stopped" : "running",
    onstart: instance.body.onstart ?? null,
    image_uuid: instance.body.image,
    is_bid: instance.body.price !== undefined,
    dph_total: instance.body.price ?? offer?.dph_total,
    gpu_name: offer?.gpu_name,
    num_gpus: offer?.num_gpus,
    machine_id: offer?.machine_id,
    public_ipaddr: running ? offer?.public_ipaddr : "",
    ssh_host: running ? `ssh${instance.id % 9}.vast.ai` : null,
    ssh_port: running ? 10_000 + (instance.id % 1000) : null,
    ports: running
      ? { "22/tcp": [{ HostIp: "0.0.0.0", HostPort: String(40_000 + (instance.id % 1000)) }] }
      : {},
  };
}

/** Creates the fake; `server.listen({ onUnhandledFrame: "error" })` starts it, `server.close()` stops it. */
export function startFakeVast(): FakeVast {
  const requests: RecordedRequest[] = [];
  const instances = new Map<number, FakeInstance>();
  const rented = new Set<number>();
  const accountKeys: string[] = [];
  const interruptions: (() => Response)[] = [];
  let nextInstance = 31_000_001;

  const fake: FakeVast = {
    server: undefined as unknown as SetupServer,
    requests,
    instances,
    rented,
    accountKeys,
    interrupt(count, response) {
      for (let index = 0; index < count; index += 1) interruptions.push(response);
    },
    to(path, method) {
      return requests.filter(
        (request) =>
          (typeof path === "string" ? request.url.pathname === path : path.test(request.url.pathname)) &&
          (method === undefined || request.method === method),
      );
    },
    reset() {
      requests.length = 0;
      instances.clear();
      rented.clear();
      accountKeys.length = 0;
      interruptions.length = 0;
      nextInstance = 31_000_001;
    },
  };

  /** Records the request, then answers an interruption or a 401 before `handle` runs. */
  const guarded =
    (
      handle: (
        request: Request,
        body: unknown,
        params: Record<string, string | readonly string[] | undefined>,
      ) => Response,
    ) =>
    async ({
      request,
      params,
    }: {
      request: Request;
      params: Record<string, string | readonly string[] | undefined>;
    }) => {
      const text = await request.text();
      const body: unknown = text ? JSON.parse(text) : undefined;
      requests.push({
        method: request.method,
        url: new URL(request.url),
        authorization: request.headers.get("authorization"),
        body,
      });
      const interruption = interruptions.shift();
      if (interruption) return interruption();
      if (request.headers.get("authorization") !== `Bearer ${TEST_API_KEY}`)
        return HttpResponse.json(errors.unauthorized, { status: 401 });
      return handle(request, body, params);
    };

  const API = "https://console.vast.ai/api/v0";
  const server = setupServer(
    http.post(
      `${API}/bundles/`,
      guarded((_request, body) =>
        HttpResponse.json({ offers: search(body as Record<string, unknown>, rented) }),
      ),
    ),
    http.put(
      `${API}/asks/:id/`,
      guarded((_request, body, params) => {
        const askId = Number(params.id);
        const offer = market.offers.find((entry) => entry.id === askId);
        if (!offer || rented.has(askId))
          return HttpResponse.json({ ...errors.askGone, ask_id: askId }, { status: 410 });
        rented.add(askId);
        const id = nextInstance;
        nextInstance += 1;
        instances.set(id, { id, askId, body: body as Record<string, unknown>, lookups: 0, state: "loading" });
        return HttpResponse.json({ success: true, new_contract: id });
      }),
    ),
    http.get(
      `${API}/instances/`,
      guarded(() =>
        HttpResponse.json({
          instances_found: instances.size,
          instances: [...instances.values()].map(instanceView),
        }),
      ),
    ),
    http.get(
      `${API}/instances/:id/`,
      guarded((_request, _body, params) => {
        const instance = instances.get(Number(params.id));
        if (!instance) return HttpResponse.json({ instances: null });
        instance.lookups += 1;
        if (instance.lookups >= 2 && instance.state === "loading") instance.state = "running";
        return HttpResponse.json({ instances: instanceView(instance) });
      }),
    ),
    http.delete(
      `${API}/instances/:id/`,
      guarded((_request, _body, params) => {
        if (!instances.delete(Number(params.id)))
          return HttpResponse.json(errors.instanceGone, { status: 404 });
        return HttpResponse.json({ success: true });
      }),
    ),
    http.post(
      `${API}/ssh/`,
      guarded((_request, body) => {
        const key = String((body as Record<string, unknown>).ssh_key);
        if (accountKeys.includes(key)) return HttpResponse.json(errors.duplicateKey, { status: 400 });
        accountKeys.push(key);
        return HttpResponse.json({
          success: true,
          key: {
            id: accountKeys.length,
            user_id: 456,
            public_key: key,
            created_at: "2026-01-01T12:00:00Z",
            deleted_at: null,
          },
        });
      }),
    ),
  );
  (fake as { server: SetupServer }).server = server;
  return fake;
}
