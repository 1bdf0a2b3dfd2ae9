/**
 * The fault matrix: a vitest `describe` block that drives a provider through the faults a cloud API
 * really has — a 429 storm, a create accepted but its answer lost, a 207 partial batch delete, a
 * refusal to delete while provisioning, a list answer of an unknown shape, an instance reclaimed while
 * it runs, the client killed right after create — through the provider's fake API, which injects them
 * through a small {@link FaultController}. Every cell checks that no instance is left billing, that no
 * instance was ever created above `maxHourlyCost`, and, where the fault must end in an error, that the
 * error says what failed. A cell the provider's API cannot have is declared not applicable, with the
 * reason; the last test prints one line: `fault matrix: <provider>: N cells, 0 instances left billing,
 * 0 cap exceeded`, and fails unless both counts are 0.
 */
import {
  type PoolSpec,
  type Provider,
  options as resolvePoolOptions,
  spec as resolveSpec,
  type SpecInput,
} from "@skyward/core";
import {
  type Cluster,
  clusterFromInstance,
  type Instance,
  type Offer,
  offerPrice,
  offerQuery,
  type ProviderCallOptions,
  resolvePoolSpec,
} from "@skyward/core/contract";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { recordFaultMatrixRun } from "./fault-matrix-record.js";

/** An instance as the fake API bills it. */
export interface BillingInstance {
  readonly id: string;
  /** What it bills an hour: the price of the market it was launched on. */
  readonly hourlyPrice: number;
}

/**
 * What the fake API of a provider under the matrix implements: what bills, what was ever created, and
 * one switch per fault. A fault the API cannot have is left out, and its cell declared not applicable
 * ({@link FaultMatrixOptions.notApplicable}).
 */
export interface FaultController {
  /** The instances that bill now (not deleted, not being deleted). */
  live(): readonly BillingInstance[] | Promise<readonly BillingInstance[]>;
  /** Every instance the API ever created, deleted ones included, at the price it bills (those made before the matrix started are not judged). */
  created(): readonly BillingInstance[] | Promise<readonly BillingInstance[]>;
  /** Answers the next `count` requests with HTTP 429 and `Retry-After: retryAfterSeconds`. */
  rateLimitNext?(count: number, retryAfterSeconds: number): void;
  /** Makes the next create: the API accepts it and makes the instance, but the answer is lost (a 5xx or a dropped connection). */
  loseNextCreateAnswer?(): void;
  /** Makes the next batch delete answer 207: the first instance of the batch refused, the others deleted. */
  partialDeleteNext?(): void;
  /** Refuses the next `count` deletes as the API refuses an instance still provisioning. */
  refuseDeleteWhileProvisioning?(count: number): void;
  /** While `broken`, lists of instances answer a shape the provider does not know. */
  breakListShape?(broken: boolean): void;
  /** The cloud takes the instance back (spot reclaimed, host lost): it is gone and bills no more. */
  reclaim?(id: string): void | Promise<void>;
  /**
   * Lets the boot watchdog of every instance fire, as if its time had passed with no worker started:
   * an instance whose create armed one ends its own billing; the others stay.
   */
  fireBootWatchdogs?(): void | Promise<void>;
}

/** The cells, by name. */
export const FAULT_CELLS = {
  "rate-limit-storm": "a 429 storm with Retry-After",
  "create-answer-lost": "a create accepted but its answer lost",
  "partial-delete": "a 207 partial batch delete",
  "delete-refused-while-provisioning": "a refusal to delete while provisioning",
  "unknown-list-shape": "a list answer of an unknown shape",
  "instance-reclaimed": "an instance reclaimed mid-task (spot)",
  "client-killed-after-create": "the client killed after create",
} as const;

/** One cell of the fault matrix: a fault a cloud API can answer with (see {@link FAULT_CELLS}). */
export type FaultCell = keyof typeof FAULT_CELLS;

/** The cells that inject a fault into a cloud API's answers. */
const API_CELLS = [
  "rate-limit-storm",
  "create-answer-lost",
  "partial-delete",
  "delete-refused-while-provisioning",
  "unknown-list-shape",
] as const satisfies readonly FaultCell[];

/**
 * The five cells about a cloud API's answers, each declared not applicable for `reason`: for a
 * provider that calls no cloud API (`SSH`, `Local`), in its {@link FaultMatrixOptions.notApplicable}.
 */
export function apiCellsNotApplicable(reason: string): Partial<Record<FaultCell, string>> {
  return Object.fromEntries(API_CELLS.map((cell) => [cell, reason]));
}

/** Options of {@link runFaultMatrix}. */
export interface FaultMatrixOptions {
  /** The provider as the printed line names it (`"tensordock"`). */
  name: string;
  /** Creates the provider under test (again for the client-killed cell: a new process). */
  create: () => Provider | Promise<Provider>;
  /** The fault controller of the fake API; called in each cell, after the caller's `beforeAll`. */
  faults: () => FaultController;
  /** The spec (without `provider`) whose cheapest offer every cell provisions; its price becomes `maxHourlyCost`. */
  spec?: Omit<SpecInput, "provider">;
  /** Adjusts the resolved pool spec handed to `prepare`. */
  prepareSpec?: (spec: PoolSpec) => PoolSpec | Promise<PoolSpec>;
  /** Cells the provider's API cannot have, each with the reason (`"deletes one instance a call"`). */
  notApplicable?: Partial<Record<FaultCell, string>>;
  /**
   * What ends the billing of instances whose client died after create: the provider's boot watchdog
   * (`fireBootWatchdogs` of the controller), or `skyward down` (a new provider object lists them and
   * terminates them). Default `"boot-watchdog"`.
   */
  clientKilled?: "boot-watchdog" | "skyward-down";
  /** 429s of the storm; default 3, each with `Retry-After: 1`. */
  stormRequests?: number;
  /** Deadline of each provider call and of each cell, milliseconds; default 60000. */
  timeoutMs?: number;
}

/** The hook of the controller each cell needs. */
const HOOKS: Readonly<Record<FaultCell, keyof FaultController | undefined>> = {
  "rate-limit-storm": "rateLimitNext",
  "create-answer-lost": "loseNextCreateAnswer",
  "partial-delete": "partialDeleteNext",
  "delete-refused-while-provisioning": "refuseDeleteWhileProvisioning",
  "unknown-list-shape": "breakListShape",
  "instance-reclaimed": "reclaim",
  "client-killed-after-create": undefined,
};

/** The message of an error, or the value in words. */
function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** The error `action` rejected with; fails when it resolved. */
async function rejection(action: Promise<unknown>, what: string): Promise<unknown> {
  try {
    await action;
  } catch (error) {
    return error;
  }
  throw new Error(`${what} succeeded; the fault must end in an error that says what failed`);
}

/**
 * Runs the fault matrix against a provider; see the module comment. Call it at the top level of a
 * test file, after whatever starts the fake API.
 */
export function runFaultMatrix(options: FaultMatrixOptions): void {
  const timeoutMs = options.timeoutMs ?? 60_000;
  const notApplicable = options.notApplicable ?? {};
  const callOptions = (): ProviderCallOptions => ({ signal: AbortSignal.timeout(timeoutMs) });

  describe(`fault matrix: ${options.name}`, () => {
    let provider: Provider;
    let poolSpec: PoolSpec;
    let offer: Offer | undefined;
    let cap = Number.POSITIVE_INFINITY;
    let cellsRun = 0;
    /** Instances the fake made before the matrix (another suite's, on a shared fake): not the matrix's to judge. */
    let earlier = new Set<string>();
    const clusters: Cluster[] = [];
    const suffix = Math.random().toString(16).slice(2, 8);

    const controller = (): FaultController => options.faults();
    const liveIds = async () => (await controller().live()).map((instance) => instance.id).sort();

    /** A new cluster on the cheapest offer, capped at its price. */
    const prepare = async (on: Provider = provider): Promise<Cluster> => {
      if (!offer) throw new Error("no priced offer for the spec (see the first test)");
      const spec = options.prepareSpec ? await options.prepareSpec(poolSpec) : poolSpec;
      const cluster = await on.prepare({
        ...callOptions(),
        spec,
        offer,
        poolId: `fm${clusters.length}${suffix}`,
      });
      clusters.push(cluster);
      return cluster;
    };
    const provision = async (cluster: Cluster, count = 1, on: Provider = provider) =>
      on.provision({ ...callOptions(), cluster, count });
    /** Terminates and tears down, as a pool's close does; the cell then expects nothing billing. */
    const close = async (cluster: Cluster, instances: readonly Instance[], on: Provider = provider) => {
      await on.terminate({ ...callOptions(), cluster, ids: instances.map((instance) => instance.id) });
      await on.teardown({ ...callOptions(), cluster });
    };
    const expectNothingBilling = async () =>
      expect(await liveIds(), "instances left billing after the cell").toEqual([]);

    const applicable = (Object.keys(FAULT_CELLS) as FaultCell[]).filter(
      (name) => notApplicable[name] === undefined,
    );

    beforeAll(async () => {
      provider = await options.create();
      earlier = new Set((await controller().created()).map((instance) => instance.id));
      // A provider none of whose cells apply (nothing it makes bills) is asked for no offer.
      if (applicable.length === 0) return;
      const unpriced = resolvePoolSpec(resolveSpec({ ...options.spec, provider }), resolvePoolOptions({}));
      const query = offerQuery(unpriced);
      const priced = (await provider.offers({ ...callOptions(), query }))
        .map((entry) => ({ entry, price: offerPrice(entry, query.allocation) }))
        .filter((candidate): candidate is { entry: Offer; price: number } => candidate.price !== null)
        .sort((a, b) => a.price - b.price);
      offer = priced[0]?.entry;
      // The cheapest offer's price is the cap: a dearer market (on demand after spot) must be refused.
      cap = Math.min(priced[0]?.price ?? Number.POSITIVE_INFINITY, unpriced.maxHourlyCost ?? Infinity);
      poolSpec = { ...unpriced, maxHourlyCost: cap };
    }, timeoutMs);

    afterAll(async () => {
      controller().breakListShape?.(false);
      controller().rateLimitNext?.(0, 0);
      for (const cluster of clusters)
        await provider?.teardown({ ...callOptions(), cluster }).catch(() => undefined);
    }, timeoutMs);

    /** One cell: declared not applicable (with its reason, and then without its hook), or run. */
    const cell = (name: FaultCell, body: (faults: FaultController) => Promise<void>) => {
      const reason = notApplicable[name];
      if (reason !== undefined) {
        it(`${FAULT_CELLS[name]}: not applicable — ${reason}`, () => {
          expect(reason.trim(), "a cell declared not applicable says why").not.toBe("");
          const hook = HOOKS[name];
          if (hook)
            expect(
              controller()[hook],
              `the fake implements ${hook}, so ${name} applies: remove it from notApplicable`,
            ).toBeUndefined();
        });
        return;
      }
      it(
        FAULT_CELLS[name],
        async () => {
          const hook = HOOKS[name];
          if (hook && typeof controller()[hook] !== "function")
            throw new Error(
              `the fake's fault controller has no ${hook}: implement it, or declare ${name} not applicable with the reason`,
            );
          await body(controller());
          await expectNothingBilling();
          cellsRun += 1;
        },
        timeoutMs,
      );
    };

    it("the spec has a priced offer (when a cell applies), whose price becomes maxHourlyCost", () => {
      if (applicable.length === 0) return;
      expect(offer, "the matrix needs a priced offer for its spec").toBeDefined();
      expect(Number.isFinite(cap)).toBe(true);
    });

    cell("rate-limit-storm", async (faults) => {
      const cluster = await prepare();
      faults.rateLimitNext?.(options.stormRequests ?? 3, 1);
      // The storm is ridden out: the client waits as Retry-After asks and the pool gets its machine.
      const instances = await provision(cluster);
      expect(instances.length).toBe(1);
      // A storm that outlasts every retry ends in an error that says the API refused for its rate.
      faults.rateLimitNext?.(1000, 0);
      try {
        const error = await rejection(
          provider.getInstance({ ...callOptions(), cluster, id: (instances[0] as Instance).id }),
          "a lookup through a 429 storm that never ends",
        );
        expect(messageOf(error)).toMatch(/429|rate.?limit|too many requests/i);
      } finally {
        faults.rateLimitNext?.(0, 0);
      }
      await close(cluster, instances);
    });

    cell("create-answer-lost", async (faults) => {
      const cluster = await prepare();
      const before = (await faults.created()).length;
      faults.loseNextCreateAnswer?.();
      const instances = await provision(cluster);
      const made = (await faults.created()).slice(before).map((instance) => instance.id);
      // The accepted create is found again (idempotency token or unique name), never a second machine.
      expect(made, "the API made exactly the instances provision returned").toEqual(
        instances.map((instance) => instance.id),
      );
      await close(cluster, instances);
    });

    cell("partial-delete", async (faults) => {
      const cluster = await prepare();
      const instances = await provision(cluster, 2);
      expect(instances.length, "the partial delete needs two instances in one batch").toBe(2);
      faults.partialDeleteNext?.();
      const ids = instances.map((instance) => instance.id);
      const error = await rejection(
        provider.terminate({ ...callOptions(), cluster, ids }),
        "a terminate whose batch delete answered 207 with a refusal",
      );
      const refused = (await liveIds()).filter((id) => ids.includes(id));
      expect(refused.length, "one instance of the batch was refused").toBe(1);
      expect(messageOf(error), "the error names the instance not deleted").toContain(refused[0]);
      await close(cluster, instances);
    });

    cell("delete-refused-while-provisioning", async (faults) => {
      const cluster = await prepare();
      const instances = await provision(cluster);
      faults.refuseDeleteWhileProvisioning?.(2);
      // Refusals for now are tried again until the instance is gone.
      await close(cluster, instances);
    });

    cell("unknown-list-shape", async (faults) => {
      const cluster = await prepare();
      const instances = await provision(cluster);
      faults.breakListShape?.(true);
      try {
        const error = await rejection(
          provider.teardown({ ...callOptions(), cluster }),
          "a teardown whose list of instances came in an unknown shape",
        );
        // Never "no instances": the error says the list was not understood.
        expect(messageOf(error)).toMatch(/list|instances|machines/i);
        expect(messageOf(error)).toMatch(/understood|unknown|expected|invalid|shape/i);
        if (provider.listInstances)
          await rejection(provider.listInstances(callOptions()), "listInstances with an unknown list shape");
      } finally {
        faults.breakListShape?.(false);
      }
      await close(cluster, instances);
    });

    cell("instance-reclaimed", async (faults) => {
      const cluster = await prepare();
      const instances = await provision(cluster);
      const [reclaimed] = instances as [Instance];
      await faults.reclaim?.(reclaimed.id);
      // What the pool's watch asks: the node is gone, never still running.
      const found = await provider.getInstance({ ...callOptions(), cluster, id: reclaimed.id });
      expect(found === null || found.status === "terminated", `getInstance is ${found?.status}`).toBe(true);
      await close(cluster, instances);
    });

    cell("client-killed-after-create", async (faults) => {
      const cluster = await prepare();
      const instances = await provision(cluster);
      const ids = instances.map((instance) => instance.id);
      // The client dies here: nothing of this provider object runs again.
      if ((options.clientKilled ?? "boot-watchdog") === "boot-watchdog") {
        if (!faults.fireBootWatchdogs)
          throw new Error(
            'clientKilled is "boot-watchdog" but the fake has no fireBootWatchdogs: implement it, or say "skyward-down"',
          );
        await faults.fireBootWatchdogs();
        expect(
          (await liveIds()).filter((id) => ids.includes(id)),
          "the boot watchdog armed at create ends the instance",
        ).toEqual([]);
      } else {
        // `skyward down` from a new process: it knows only what the provider lists.
        const fresh = await options.create();
        const listed = (await fresh.listInstances?.(callOptions())) ?? [];
        const mine = listed.filter((instance) => ids.includes(instance.id));
        expect(mine.map((instance) => instance.id).sort(), "listInstances finds the orphans").toEqual(
          [...ids].sort(),
        );
        for (const instance of mine)
          await fresh.terminate({
            ...callOptions(),
            cluster: clusterFromInstance(fresh.name, instance),
            ids: [instance.id],
          });
      }
      await provider.teardown({ ...callOptions(), cluster });
    });

    it("leaves 0 instances billing and 0 over the price cap", async () => {
      const left = await liveIds();
      const over = (await controller().created()).filter(
        (instance) => !earlier.has(instance.id) && instance.hourlyPrice > cap + 1e-9,
      );
      console.log(
        `fault matrix: ${options.name}: ${cellsRun} cells, ${left.length} instances left billing, ${over.length} cap exceeded`,
      );
      await recordFaultMatrixRun({
        name: options.name,
        cells: cellsRun,
        applicable: applicable.length,
        notApplicable: Object.keys(notApplicable).length,
        leftBilling: left.length,
        capExceeded: over.length,
      });
      expect(left, "instances left billing").toEqual([]);
      expect(
        over.map((instance) => `${instance.id} at $${instance.hourlyPrice}/h`),
        `created above maxHourlyCost $${cap}/h`,
      ).toEqual([]);
    });
  });
}
