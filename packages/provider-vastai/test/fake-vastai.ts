/**
 * A fake Vast.ai for tests: msw handlers for the REST API the provider uses, answering with the
 * documented shapes (the JSON under `fixtures/`). The offer search really evaluates the query JSON's
 * operators over the fixture offers; rented asks leave the market; instances boot on their second
 * lookup. Every request is recorded; unhandled requests fail the test (the deprecated v0 instance list
 * is not served).
 *
 * Where each shape and behaviour comes from:
 * - `fixtures/offers.json`: `POST /api/v0/bundles/` results (https://docs.vast.ai/api-reference/openapi.yaml,
 *   search offers: the example offer's fields). A bid search (`type: "bid"`) prices at the minimum bid
 *   ("bid (interruptible): uses minimum bid price", same page): `dph_total` there is `min_bid` plus the
 *   offer's charges beyond its base price (`dph_total − dph_base`). `gpu_frac` ("fraction of the total GPU
 *   resources being offered") < 1 is a partial rental whose `cpu_ram` is the whole machine's.
 *   `addOffer` lists one more: a fixture offer with some fields changed, in the same shape. The
 *   `geolocation` filter compares the offer's two-letter country code ("Two letter country code. Works
 *   with operators =, !=, in, notin": vast-cli's `search offers` help,
 *   https://github.com/vast-ai/vast-cli/blob/master/vast.py).
 * - `fixtures/instance.json`: an instance of `GET /api/v1/instances/` (paged 25 at a time with
 *   `after_token` → `next_token`, as vast-cli's `_fetch_all_instances_v1` reads it:
 *   https://github.com/vast-ai/vast-cli/blob/master/vast.py) and `GET /api/v0/instances/{id}/`
 *   (https://docs.vast.ai/api-reference/openapi/yaml/show_instance.yaml). A port exposed before Docker
 *   maps it is listed as `{"22/tcp": null}`: the "null port map" real accounts show while loading.
 * - `fixtures/errors.json`: the error shape `{success, error, msg}` and the 429 bodies of
 *   https://docs.vast.ai/api-reference/rate-limits-and-errors (no `Retry-After`); `invalid_price` is in
 *   the create call's 400 answer (openapi.yaml, create instance). That a too-low bid still creates the
 *   instance, stopped, naming it in the refusal, and that an unknown key answers 404 on every endpoint,
 *   are what real accounts do (issue 19), not documented.
 * - Rate limits: per endpoint and per key, "a minimum interval between requests" (rate-limits page);
 *   creates are one per 4.5 s with a 12 s penalty. The fake runs them scaled down 1:100 by default
 *   (`rateLimit`), so tests take milliseconds.
 * - The fault matrix's faults (`faults`): a 429 storm answers the rate-limits page's 429 body with the
 *   `Retry-After` the matrix asks for; a create whose answer is lost rents the ask and answers a
 *   gateway's 502; an unknown list shape names the list `results` (no `instances`); an outbid
 *   interruptible instance is stopped (`actual_status` "exited"), and a stopped instance keeps its data
 *   ("all of your data on the instance is preserved", https://docs.vast.ai/cli/reference/stop-instance.md),
 *   so it bills its disk until destroyed; the boot watchdog destroys every instance whose `onstart` armed one.
 * - `POST /api/v0/instances/{id}/ssh/`: attach a key to one instance
 *   (https://docs.vast.ai/api-reference/openapi/yaml/attach_ssh.yaml); `GET /api/v0/users/current/`:
 *   the key's user (openapi.yaml, show user).
 */
import { type BillingInstance, type FaultController, faultSwitches } from "@skyward/testing";
import { HttpResponse, http } from "msw";
import { type SetupServer, setupServer } from "msw/node";
import errors from "./fixtures/errors.json" with { type: "json" };
import instanceTemplate from "./fixtures/instance.json" with { type: "json" };
import market from "./fixtures/offers.json" with { type: "json" };

/** The API key the fake accepts. */
export const TEST_API_KEY = "vast_test_5ecret_key_abcdef0123";

/**
 * The provider's create spacing for tests against this fake: its defaults (Vast.ai's 4.5 s plus the
 * provider's 10 % margin, and the 12 s penalty) scaled 1:100, as the fake's `rateLimit` is.
 */
export const SCALED_CREATE_LIMITS = {
  createIntervalMs: 49.5,
  rateLimitPenaltyMs: 120,
  // Vast.ai's other documented limits (search 10 a minute, get one per 2 s, list one per 1 s, destroy
  // one per 3 s), scaled 1:100 likewise.
  rateLimits: {
    search: { requests: 10, perSeconds: 0.6 },
    get: { requests: 1, perSeconds: 0.02 },
    list: { requests: 1, perSeconds: 0.01 },
    destroy: { requests: 1, perSeconds: 0.03 },
  },
} as const;

/** One request the fake received. */
export interface RecordedRequest {
  readonly method: string;
  readonly url: URL;
  readonly authorization: string | null;
  readonly body: unknown;
  /** When it arrived (`Date.now()`). */
  readonly at: number;
}

/** An instance as the fake keeps it. */
export interface FakeInstance {
  id: number;
  askId: number;
  body: Record<string, unknown>;
  lookups: number;
  state: "loading" | "running" | "exited";
  /** Public keys attached to this instance (`POST /instances/{id}/ssh/`). */
  keys: string[];
  /** A foreign instance's whole answer, listed as it is (odd shapes included). */
  raw?: Record<string, unknown>;
  /** Where its sshd answers, when the test gave one (a test-bed host). */
  endpoint?: { host: string; port: number };
}

/** Where instances' SSH answers, and what happens when keys are attached and instances destroyed. */
export interface FakeVastOptions {
  /** The address and port of a new instance's sshd; default the offer's documentation address. */
  sshEndpoint?: (instance: FakeInstance) => { host: string; port: number };
  /** Called when a key is attached to an instance. */
  onAttachKey?: (instance: FakeInstance, key: string) => Promise<void> | void;
  /** Called when an instance is destroyed. */
  onDestroy?: (instance: FakeInstance) => Promise<void> | void;
}

/** The fake, its state and its controls. */
export interface FakeVast {
  readonly server: SetupServer;
  readonly requests: RecordedRequest[];
  readonly instances: Map<number, FakeInstance>;
  /** Asks rented (or taken away by someone else): no longer offered. */
  readonly rented: Set<number>;
  /** Public keys registered on the account (pushed by Vast.ai onto every instance of the account). */
  readonly accountKeys: string[];
  /** The create endpoint's rate limit; default the real 4.5 s / 12 s scaled 1:100. */
  rateLimit: { intervalMs: number; penaltyMs: number };
  /** Minimum bids raised since the search (by ask id): a lower bid is refused, the instance created stopped. */
  readonly minBidNow: Map<number, number>;
  /**
   * Lists one more offer until `reset`: the fixture offer `base` (an id of `fixtures/offers.json`) with
   * `fields` changed (`id`, `dph_total`, `cpu_ram`…); its ask and machine id are its new `id`.
   */
  addOffer(base: number, fields: Partial<Offer> & { id: number }): void;
  /** Adds an instance someone else made, answered as given (`ports: null`…). */
  addForeignInstance(raw: Record<string, unknown>): void;
  /** Page size of `GET /api/v1/instances/`. */
  pageSize: number;
  /** Answers the next `count` requests with `response()` instead of handling them. */
  interrupt(count: number, response: () => Response): void;
  /**
   * The fault matrix's controller (`runFaultMatrix` of @skyward/testing): what bills (every instance not
   * destroyed: a stopped one still pays for its disk), what was ever created, and its faults.
   */
  readonly faults: FaultController;
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

/** The country code of an offer's geolocation (`"Texas, US"` → `US`), which the search's `geolocation` filter compares. */
function countryOf(geolocation: unknown): string | undefined {
  return typeof geolocation === "string" ? geolocation.split(",").at(-1)?.trim().toUpperCase() : undefined;
}

const NOT_FILTERS = new Set(["order", "limit", "type", "allocated_storage", "disable_bundling"]);

function search(query: Record<string, unknown>, rented: Set<number>, offers: readonly Offer[]): Offer[] {
  // A bid search prices each offer at its minimum bid: `dph_total` = `min_bid` + the charges beyond the base price.
  const priced =
    query.type === "bid"
      ? offers.map((offer) => ({
          ...offer,
          dph_total: Math.round((offer.min_bid + offer.dph_total - offer.dph_base) * 10_000) / 10_000,
        }))
      : offers;
  const matching = priced.filter(
    (offer) =>
      !rented.has(offer.id) &&
      Object.entries(query).every(
        ([field, condition]) =>
          NOT_FILTERS.has(field) ||
          satisfies(
            field === "geolocation"
              ? countryOf(offer.geolocation)
              : (offer as Record<string, unknown>)[field],
            condition as Condition,
          ),
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

function instanceView(instance: FakeInstance, offers: readonly Offer[]): Record<string, unknown> {
  const offer = offers.find((entry) => entry.id === instance.askId);
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
    public_ipaddr: running ? (instance.endpoint?.host ?? offer?.public_ipaddr) : "",
    ssh_host: running ? `ssh${instance.id % 9}.vast.ai` : null,
    ssh_port: running ? 10_000 + (instance.id % 1000) : null,
    // While loading, the exposed port is listed unmapped: a null port map.
    ports: running
      ? {
          "22/tcp": [
            { HostIp: "0.0.0.0", HostPort: String(instance.endpoint?.port ?? 40_000 + (instance.id % 1000)) },
          ],
        }
      : { "22/tcp": null },
  };
}

/** Creates the fake; `server.listen({ onUnhandledFrame: "error" })` starts it, `server.close()` stops it. */
export function startFakeVast(options: FakeVastOptions = {}): FakeVast {
  const requests: RecordedRequest[] = [];
  const instances = new Map<number, FakeInstance>();
  const rented = new Set<number>();
  const accountKeys: string[] = [];
  const interruptions: (() => Response)[] = [];
  /** The offers `addOffer` listed, after the fixture's (read live: a test may push onto those). */
  const added: Offer[] = [];
  const offers = (): Offer[] => [...market.offers, ...added];
  let nextInstance = 31_000_001;
  /** Every instance rented, at what it bills: the bid, else the ask's on-demand price. */
  const created: BillingInstance[] = [];
  const switches = faultSwitches(errors.rateLimited);
  let lastCreate = Number.NEGATIVE_INFINITY;
  let refusedUntil = 0;

  const fake: FakeVast = {
    server: undefined as unknown as SetupServer,
    requests,
    instances,
    rented,
    accountKeys,
    rateLimit: { intervalMs: 45, penaltyMs: 120 },
    minBidNow: new Map(),
    pageSize: 25,
    addOffer(base, fields) {
      const template = market.offers.find((entry) => entry.id === base);
      if (!template) throw new Error(`no fixture offer ${base}`);
      added.push({
        ...template,
        ask_contract_id: fields.id,
        machine_id: fields.id,
        ...fields,
      });
    },
    addForeignInstance(raw) {
      instances.set(Number(raw.id), {
        id: Number(raw.id),
        askId: 0,
        body: {},
        lookups: 0,
        state: "running",
        keys: [],
        raw,
      });
    },
    faults: {
      live: () =>
        [...instances.values()].map((instance) => ({
          id: String(instance.id),
          hourlyPrice: billed(instance),
        })),
      created: () => [...created],
      ...switches.controller,
      // An outbid interruptible instance is stopped, not destroyed: it bills its disk until it is.
      reclaim(id) {
        const instance = instances.get(Number(id));
        if (instance) instance.state = "exited";
      },
      // The onstart watchdog destroys an instance whose worker never started (see onstart-script.ts).
      fireBootWatchdogs() {
        for (const instance of [...instances.values()])
          if (String(instance.body.onstart ?? "").includes("without a running Skyward worker"))
            instances.delete(instance.id);
      },
    },
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
      fake.rateLimit = { intervalMs: 45, penaltyMs: 120 };
      fake.minBidNow.clear();
      fake.pageSize = 25;
      added.length = 0;
      lastCreate = Number.NEGATIVE_INFINITY;
      refusedUntil = 0;
      created.length = 0;
      switches.reset();
    },
  };
  const billed = (instance: FakeInstance) =>
    Number(instance.body.price ?? offers().find((offer) => offer.id === instance.askId)?.dph_total ?? 0);

  /** Records the request, then answers an interruption or a 401 before `handle` runs. */
  const guarded =
    (
      handle: (
        request: Request,
        body: unknown,
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
      const text = await request.text();
      const body: unknown = text ? JSON.parse(text) : undefined;
      requests.push({
        method: request.method,
        url: new URL(request.url),
        authorization: request.headers.get("authorization"),
        body,
        at: Date.now(),
      });
      const interruption = interruptions.shift();
      if (interruption) return interruption();
      const storm = switches.rateLimited();
      if (storm) return storm;
      // An unknown key is answered 404 on every endpoint, as by real accounts.
      if (request.headers.get("authorization") !== `Bearer ${TEST_API_KEY}`)
        return HttpResponse.json(errors.badKey, { status: 404 });
      return handle(request, body, params);
    };

  const API = "https://console.vast.ai/api/v0";
  const server = setupServer(
    http.post(
      `${API}/bundles/`,
      guarded((_request, body) => {
        const query = body as Record<string, unknown>;
        if (query.type !== "on-demand" && query.type !== "bid")
          return HttpResponse.json(
            { success: false, error: "invalid_args", msg: "bad type" },
            { status: 400 },
          );
        return HttpResponse.json({ offers: search(query, rented, offers()) });
      }),
    ),
    http.get(
      `${API}/users/current/`,
      guarded(() => HttpResponse.json({ id: 456, username: "skyward-test", email: "test@example.com" })),
    ),
    http.put(
      `${API}/asks/:id/`,
      guarded((_request, body, params) => {
        // One create per interval per key; one too early is refused and starts a penalty.
        const now = Date.now();
        const tooSoon = now < refusedUntil || now - lastCreate < fake.rateLimit.intervalMs;
        lastCreate = now;
        if (tooSoon) {
          refusedUntil = now + fake.rateLimit.penaltyMs;
          return HttpResponse.json(errors.rateLimited, { status: 429 });
        }
        const askId = Number(params.id);
        const offer = offers().find((entry) => entry.id === askId);
        if (!offer || rented.has(askId))
          return HttpResponse.json({ ...errors.askGone, ask_id: askId }, { status: 410 });
        const request = body as Record<string, unknown>;
        const id = nextInstance;
        const minimum = fake.minBidNow.get(askId) ?? offer.min_bid;
        if (request.price !== undefined && Number(request.price) < minimum) {
          // The instance is created all the same, stopped: it bills for its disk until destroyed.
          nextInstance += 1;
          instances.set(id, { id, askId, body: request, lookups: 0, state: "exited", keys: [] });
          created.push({ id: String(id), hourlyPrice: Number(request.price) });
          const msg = errors.bidTooLow.msg
            .replace("%BID%", String(request.price))
            .replace("%MIN%", String(minimum))
            .replace("%ID%", String(id));
          return HttpResponse.json({ ...errors.bidTooLow, msg, new_contract: id }, { status: 400 });
        }
        rented.add(askId);
        nextInstance += 1;
        const instance: FakeInstance = { id, askId, body: request, lookups: 0, state: "loading", keys: [] };
        if (options.sshEndpoint) instance.endpoint = options.sshEndpoint(instance);
        instances.set(id, instance);
        created.push({ id: String(id), hourlyPrice: billed(instance) });
        return switches.createAnswer(HttpResponse.json({ success: true, new_contract: id }));
      }),
    ),
    http.get(
      "https://console.vast.ai/api/v1/instances/",
      guarded((request) => {
        const url = new URL(request.url);
        const after = Number(url.searchParams.get("after_token") ?? "0");
        const limit = Math.min(fake.pageSize, Number(url.searchParams.get("limit") ?? "25"));
        const sorted = [...instances.values()]
          .sort((a, b) => a.id - b.id)
          .filter((entry) => entry.id > after);
        const page = sorted.slice(0, limit);
        const last = page.at(-1);
        // A shape the provider does not know: the list under another name.
        if (switches.listBroken)
          return HttpResponse.json({ results: page.map((entry) => entry.id), next_token: null });
        return HttpResponse.json({
          instances: page.map((entry) => entry.raw ?? instanceView(entry, offers())),
          total_instances: instances.size,
          next_token: sorted.length > limit && last ? String(last.id) : null,
        });
      }),
    ),
    http.post(
      `${API}/instances/:id/ssh/`,
      guarded(async (_request, body, params) => {
        const instance = instances.get(Number(params.id));
        if (!instance) return HttpResponse.json(errors.instanceGone, { status: 404 });
        const key = String((body as Record<string, unknown>).ssh_key);
        instance.keys.push(key);
        await options.onAttachKey?.(instance, key);
        return HttpResponse.json({ success: true, msg: "SSH key attached successfully" });
      }),
    ),
    http.get(
      `${API}/instances/:id/`,
      guarded((_request, _body, params) => {
        const instance = instances.get(Number(params.id));
        if (!instance) return HttpResponse.json({ instances: null });
        if (instance.raw) return HttpResponse.json({ instances: instance.raw });
        instance.lookups += 1;
        if (instance.lookups >= 2 && instance.state === "loading") instance.state = "running";
        return HttpResponse.json({ instances: instanceView(instance, offers()) });
      }),
    ),
    http.delete(
      `${API}/instances/:id/`,
      guarded(async (_request, _body, params) => {
        const instance = instances.get(Number(params.id));
        if (!instance) return HttpResponse.json(errors.instanceGone, { status: 404 });
        instances.delete(instance.id);
        // The machine is the market's again.
        rented.delete(instance.askId);
        await options.onDestroy?.(instance);
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
