/**
 * The safeguards the base owns, each written once over a {@link MachineAdapter}: lists that read
 * every page and fail loudly, deletes that go on until every machine is gone, creates that never
 * leave an unknown machine behind, and the market loop that never launches above the price cap or
 * at an unknown price.
 */
import { ConfigurationError } from "@skyward/core";
import type { Cluster, Instance } from "@skyward/core/contract";
import { abortableSleep } from "../http/request-pacer.js";
import { SKYWARD_TAGS, skywardTags } from "../tags.js";
import type { MachineAdapter, MachineClusterData, MachineDeleteOutcome } from "./adapter.js";
import { MachineProviderError, machineErrorKind } from "./errors.js";
import { launchAcrossMarkets } from "./market-loop.js";
import { launchableMarketsByZone } from "./zonal-markets.js";

/** The most pages a list reads: a cursor that never ends is an API fault, not an endless account. */
const MAX_PAGES = 1000;

/**
 * Every machine of the account, every page read, each machine once; an answer that is not a page
 * throws. A page of machines all listed before ends the list, as `readNumberedPages` does: an
 * API that ignores the page asked answers the same machines again (and a next page number each time).
 */
export async function listAllMachines<Machine, ClusterData extends MachineClusterData>(
  adapter: MachineAdapter<Machine, ClusterData>,
  signal: AbortSignal,
): Promise<Machine[]> {
  const machines = new Map<string, Machine>();
  const seen = new Set<string>();
  let cursor: string | undefined;
  for (let page = 0; page < MAX_PAGES; page += 1) {
    const answer = await adapter.listPage(cursor, signal);
    if (!Array.isArray(answer?.machines))
      throw failure(
        adapter,
        "unknown-answer",
        `${adapter.label}'s list of instances was not understood: no list of machines`,
      );
    const ids = answer.machines.map((machine) => adapter.idOf(machine));
    const repeated = ids.length > 0 && ids.every((id) => machines.has(id));
    answer.machines.forEach((machine, index) => {
      const id = ids[index] as string;
      if (!machines.has(id)) machines.set(id, machine);
    });
    if (answer.next === undefined || repeated) return [...machines.values()];
    if (seen.has(answer.next))
      throw failure(
        adapter,
        "unavailable",
        `${adapter.label}'s list of instances repeats page "${answer.next}"`,
      );
    seen.add(answer.next);
    cursor = answer.next;
  }
  throw failure(
    adapter,
    "unavailable",
    `${adapter.label}'s list of instances has more than ${MAX_PAGES} pages`,
  );
}

function failure(
  adapter: { readonly name: string },
  kind: MachineProviderError["kind"],
  message: string,
): MachineProviderError {
  return new MachineProviderError({ provider: adapter.name, kind, message });
}

/** A delete's outcome from the error a one-at-a-time delete threw. */
function outcomeOf(error: unknown): MachineDeleteOutcome {
  const kind = machineErrorKind(error);
  return kind === "gone" ? "gone" : kind === "busy" ? "busy" : { error };
}

/**
 * Deletes `ids` until each is gone: accepted or already gone counts, a refusal for now (`busy`: still
 * provisioning) is tried again with a growing wait until the adapter's `deleteTimeoutMs`, every other
 * refusal is reported — after the other machines were deleted, so one failure strands nothing else.
 * A {@link ConfigurationError} (no key, say) is thrown at once: every other delete would fail alike.
 */
export async function deleteUntilGone<Machine, ClusterData extends MachineClusterData>(
  adapter: MachineAdapter<Machine, ClusterData>,
  ids: Iterable<string>,
  signal: AbortSignal,
): Promise<void> {
  let pending = [...new Set(ids)].filter((id) => adapter.isMachineId?.(id) ?? true);
  const deadline = Date.now() + (adapter.deleteTimeoutMs ?? 600_000);
  let delay = adapter.deleteRetryDelayMs ?? 5000;
  const errors: string[] = [];
  while (pending.length > 0) {
    const outcomes = new Map<string, MachineDeleteOutcome>();
    if ("one" in adapter.delete) {
      for (const id of pending) {
        try {
          await adapter.delete.one(id, signal);
          outcomes.set(id, "deleted");
        } catch (error) {
          if (signal.aborted) throw signal.reason;
          // Settings the user must fix (no key) fail every delete alike: say that, not "may still bill".
          if (ConfigurationError.isInstance(error)) throw error;
          outcomes.set(id, outcomeOf(error));
        }
      }
    } else {
      const answered = await adapter.delete.batch(pending, signal);
      for (const id of pending)
        outcomes.set(id, answered.get(id) ?? { error: new Error("no result for it") });
    }
    const busy: string[] = [];
    for (const [id, outcome] of outcomes) {
      if (outcome === "busy") busy.push(id);
      else if (outcome === "deleted" || outcome === "gone") adapter.forget?.(id);
      else if (typeof outcome === "object")
        errors.push(
          `${id}: ${outcome.error instanceof Error ? outcome.error.message : String(outcome.error)}`,
        );
    }
    pending = busy;
    if (pending.length === 0) break;
    if (Date.now() + delay > deadline) {
      errors.push(
        ...pending.map(
          (id) =>
            `${id}: still refused to be deleted (provisioning?) after ${Math.round((adapter.deleteTimeoutMs ?? 600_000) / 1000)} s`,
        ),
      );
      break;
    }
    await abortableSleep(delay, signal);
    delay = Math.min(delay * 2, 30_000);
  }
  if (errors.length > 0)
    throw failure(
      adapter,
      "unavailable",
      `${adapter.label} did not delete ${errors.length} instance${errors.length > 1 ? "s" : ""}, which may still bill — run \`skyward down\` again or delete them in ${adapter.label}'s console: ${errors.join("; ")}`,
    );
}

/** Counts creates per cluster, to bound them per pool, and hands out node indices whose names are free. */
export class CreateBudget {
  readonly #counts = new Map<string, { next: number; creates: number; taken: ReadonlySet<string> }>();

  /** Whether the cluster's machine names are known here: this provider object prepared it, or looked them up. */
  knows(clusterId: string): boolean {
    return this.#counts.has(clusterId);
  }

  /** Starts counting the cluster, its machines already named `taken` (none for one just prepared). */
  start(clusterId: string, taken: Iterable<string> = []): void {
    if (!this.#counts.has(clusterId))
      this.#counts.set(clusterId, { next: 0, creates: 0, taken: new Set(taken) });
  }

  /** The next node index of the cluster; with `nameOf`, one whose name no machine of it has. */
  nextIndex(clusterId: string, nameOf?: (index: number) => string): number {
    const entry = this.#entry(clusterId);
    while (nameOf && entry.taken.has(nameOf(entry.next))) entry.next += 1;
    entry.next += 1;
    return entry.next - 1;
  }

  /** Counts one create request of the cluster; false once it has used up `limit`. */
  spend(clusterId: string, limit: number): boolean {
    const entry = this.#entry(clusterId);
    if (entry.creates >= limit) return false;
    entry.creates += 1;
    return true;
  }

  forget(clusterId: string): void {
    this.#counts.delete(clusterId);
  }

  #entry(clusterId: string) {
    this.start(clusterId);
    return this.#counts.get(clusterId) as { next: number; creates: number; taken: ReadonlySet<string> };
  }
}

/** What the adapter's `create` is asked: one machine of the cluster, by its unique name. */
type CreateRequest<Machine, ClusterData extends MachineClusterData> = Parameters<
  MachineAdapter<Machine, ClusterData>["create"]
>[0];

/**
 * Creates one machine so that a request the API accepted but whose answer was lost (no answer, a
 * 5xx) never becomes an unknown machine: with an idempotency token the same request is sent again;
 * without one, the machine is first looked for by its unique name. At most `maxCreateAttempts` tries.
 */
async function createOnce<Machine, ClusterData extends MachineClusterData>(
  adapter: MachineAdapter<Machine, ClusterData>,
  request: CreateRequest<Machine, ClusterData>,
  budget: CreateBudget,
): Promise<Machine> {
  const attempts = adapter.maxCreateAttempts ?? 3;
  const limit = adapter.maxCreatesPerCluster ?? 50;
  let lastError: unknown;
  /** A create failed where the API may have carried it out: its machine may exist, not listed yet. */
  let mayExist = false;
  for (let attempt = 0; attempt < attempts; attempt += 1) {
    if (attempt > 0 && !adapter.idempotencyToken) {
      const found = await findByName(adapter, request.name, request.signal);
      if (found !== undefined) return found;
    }
    if (!budget.spend(request.cluster.id, limit))
      throw failure(
        adapter,
        "unavailable",
        `${adapter.label}: this pool has sent ${limit} create requests, the most it may; not creating ${request.name}`,
      );
    try {
      return await adapter.create(request);
    } catch (error) {
      if (request.signal.aborted) throw request.signal.reason;
      // Only a failure that may have happened after the API took the request is tried again: no
      // answer, a 5xx, an answer not understood (the machine may exist: it is looked for first).
      const kind = machineErrorKind(error);
      if (kind !== "unavailable" && kind !== "unknown-answer") {
        // A refusal after a create that may have been carried out (the capacity it took, say): moving on
        // to another market would make a second machine and leave this one billing unseen.
        if (mayExist && !adapter.idempotencyToken) return awaitLostCreate(adapter, request, error);
        throw error;
      }
      mayExist = true;
      lastError = error;
    }
  }
  if (!adapter.idempotencyToken) {
    const found = await findByName(adapter, request.name, request.signal);
    if (found !== undefined) return found;
  }
  throw lastError;
}

/**
 * Looks for the machine of a create whose answer was lost until it is listed, up to the adapter's
 * `lostCreateWaitMs`; not found, fails with a kind the market loop does not move on from, naming it.
 */
async function awaitLostCreate<Machine, ClusterData extends MachineClusterData>(
  adapter: MachineAdapter<Machine, ClusterData>,
  request: CreateRequest<Machine, ClusterData>,
  refusal: unknown,
): Promise<Machine> {
  const wait = adapter.lostCreateWaitMs ?? 60_000;
  const deadline = Date.now() + wait;
  let delay = Math.min(1000, wait / 10);
  for (;;) {
    const found = await findByName(adapter, request.name, request.signal);
    if (found !== undefined) return found;
    if (Date.now() + delay > deadline) break;
    await abortableSleep(delay, request.signal);
    delay = Math.min(delay * 2, 10_000);
  }
  throw failure(
    adapter,
    "unavailable",
    `${adapter.label}: a create of ${request.name} may have been carried out (its answer was lost), but ${request.name} was not listed within ${wait / 1000} s and its retry was refused (${refusal instanceof Error ? refusal.message : String(refusal)}); no other machine is made in its place — if it exists, the pool's teardown or \`skyward down\` deletes it by its name`,
  );
}

async function findByName<Machine, ClusterData extends MachineClusterData>(
  adapter: MachineAdapter<Machine, ClusterData>,
  name: string,
  signal: AbortSignal,
): Promise<Machine | undefined> {
  return (await listAllMachines(adapter, signal)).find((machine) => adapter.tags.nameOf(machine) === name);
}

/**
 * Creates `count` machines on the markets the allocation allows (spot first where preferred, then on
 * demand) through the base's market loop ({@link launchAcrossMarkets}), one machine a create: each
 * market's own price checked against `maxHourlyCost` before launching — and the price the API then
 * reports checked again (a machine above the cap is deleted at once, and the next market tried). A
 * market with no known price is never launched on. Machines already made are handed back when a
 * later one fails; with none made, capacity/quota/price refusals end in a {@link NoCapacityError}
 * naming each market.
 */
export async function provisionAcrossMarkets<Machine, ClusterData extends MachineClusterData>(
  adapter: MachineAdapter<Machine, ClusterData>,
  options: { cluster: Cluster<ClusterData>; count: number; signal: AbortSignal; budget: CreateBudget },
): Promise<Instance[]> {
  const { cluster, signal } = options;
  const cap = cluster.spec.maxHourlyCost;
  const spec = cluster.spec;
  if (!options.budget.knows(cluster.id)) {
    // A cluster another provider object made (a pool attached from another process, growing): its
    // machines' names are taken, else a lost create answer would be "found" as the pool's first node.
    const names = (await listAllMachines(adapter, signal)).flatMap((machine) =>
      adapter.tags.read(machine)[SKYWARD_TAGS.cluster] === cluster.id
        ? (adapter.tags.nameOf(machine) ?? [])
        : [],
    );
    options.budget.start(cluster.id, names);
  }
  const name = (index: number) => adapter.tags.name(cluster, index);
  const launched = await launchAcrossMarkets<Instance>({
    provider: adapter.name,
    offer: cluster.offer.instanceType,
    count: options.count,
    // One place a market: the base's APIs launch anywhere the offer is.
    places: launchableMarketsByZone(cluster, [""], () => ({}), adapter.spotAllowed?.(cluster) ?? true),
    signal,
    async launch({ spot, price }) {
      const index = options.budget.nextIndex(cluster.id, name);
      const machine = await createOnce(
        adapter,
        {
          cluster,
          spot,
          hourlyPrice: price,
          name: name(index),
          tags: skywardTags({ cluster: cluster.id, pool: cluster.poolId, offer: cluster.offer.id, spot }),
          idempotencyKey: `${cluster.id}-${index}`,
          watchdogSeconds: Math.ceil(spec.ttl + spec.sshTimeout + spec.bootstrapTimeout),
          signal,
        },
        options.budget,
      );
      const shown = adapter.describe(machine, { identityFile: cluster.specific.identityFile, cluster });
      const instance = Object.freeze({
        ...shown,
        offerId: cluster.offer.id,
        spot,
        hourlyPrice: shown.hourlyPrice ?? price,
      });
      if (cap !== undefined && instance.hourlyPrice > cap) {
        // The API charges more than the offer said (a marketplace moved): never keep it.
        await deleteUntilGone(adapter, [instance.id], signal);
        return {
          items: [],
          refused: new Error(`launched at $${instance.hourlyPrice}/h, over maxHourlyCost $${cap}/h; deleted`),
        };
      }
      return { items: [instance] };
    },
  });
  return launched.flatMap((launch) => launch.items);
}
