/** `skyward instances`: the live instances Skyward started, at every provider (or those given). */
import type { Provider } from "@skyward/core";
import { IncompleteListingError, type Instance } from "@skyward/core/contract";
import { type CommandContext, inAskedOrder, reportSkipped, useProviders } from "./command-context.js";
import { formatAge, formatCost, formatPrice, instanceCost, instanceForOutput, poolOf } from "./format.js";
import { describeError, type LoadedProvider, type SkippedProvider } from "./providers.js";
import { renderTable } from "./table.js";

/** The flags of `skyward instances`, parsed. */
export interface InstancesFlags {
  readonly providers: readonly string[] | undefined;
  readonly json: boolean;
}

/** The help text of `skyward instances`. */
export const INSTANCES_HELP = `Usage: skyward instances [--provider A,B] [--json]

Lists the instances Skyward started that are still alive, at every provider (or those given), with
what each has cost so far (its hourly price times its age), then each pool's running cost: its
instances' hourly prices together and their cost so far. Costs are estimates from the prices Skyward
recorded when it started them, not a bill.

  --provider A,B       providers to ask: [providers.NAME] entries of skyward.toml or aws, gcp, hyperstack, novita, runpod, tensordock, vastai, verda
  --json               print the instances as JSON (private keys left out)
  --timeout SECONDS    give up after this long (default 60)
`;

/** One live instance and the provider it is at. */
export interface ListedInstance {
  /** The provider's name as the user knows it. */
  readonly providerName: string;
  readonly provider: Provider;
  readonly instance: Instance;
}

/**
 * Every live (not terminated) instance Skyward tagged, from each provider's `listInstances`, oldest
 * first per provider; providers that cannot list (or fail to) are returned as failed, and those that
 * could list only in part (`IncompleteListingError`: a region that refused) as partial, their
 * instances found listed.
 */
export async function listLiveInstances(
  context: CommandContext,
  loaded: readonly LoadedProvider[],
): Promise<{ instances: ListedInstance[]; failed: SkippedProvider[]; partial: SkippedProvider[] }> {
  const failed: SkippedProvider[] = [];
  const partial: SkippedProvider[] = [];
  const lists = await Promise.all(
    loaded.map(async ({ name, provider }): Promise<ListedInstance[]> => {
      if (!provider.listInstances) {
        failed.push({ name, reason: "cannot list instances (the provider has no listInstances)" });
        return [];
      }
      const listed = (all: readonly Instance[]) =>
        all
          .filter((instance) => instance.status !== "terminated")
          .map((instance) => {
            if (instance.ssh?.privateKey) context.redactor.add(instance.ssh.privateKey);
            return { providerName: name, provider, instance };
          });
      try {
        return listed(await provider.listInstances({ signal: context.signal }));
      } catch (error) {
        if (!IncompleteListingError.isInstance(error)) {
          failed.push({ name, reason: describeError(error) });
          return [];
        }
        partial.push({ name, reason: describeError(error) });
        return listed(error.found);
      }
    }),
  );
  // Failures in the order the providers are configured, not the order they answered: the same output each run.
  const order = new Map(loaded.map(({ name }, index) => [name, index]));
  const byOrder = (a: SkippedProvider, b: SkippedProvider) =>
    (order.get(a.name) ?? 0) - (order.get(b.name) ?? 0);
  failed.sort(byOrder);
  partial.sort(byOrder);
  const instances = lists
    .flat()
    .sort(
      (a, b) => a.providerName.localeCompare(b.providerName) || a.instance.createdAt - b.instance.createdAt,
    );
  return { instances, failed, partial };
}

/**
 * Reports the providers skipped, failed or listed in part (one line each, on stderr) and, when none
 * could be asked at all, says so; returns true in that case, when a command that lists must not claim
 * there is nothing.
 */
export function reportListing(
  context: CommandContext,
  loaded: readonly LoadedProvider[],
  skipped: readonly SkippedProvider[],
  failed: readonly SkippedProvider[],
  partial: readonly SkippedProvider[],
  /** The providers in the order asked for ({@link useProviders}'s `order`). */
  order: readonly string[],
): boolean {
  reportSkipped(context, inAskedOrder(order, [...skipped, ...failed]));
  for (const entry of partial) context.err(`skyward: ${entry.name} listed in part: ${entry.reason}\n`);
  if (loaded.length > failed.length) return false;
  context.err("skyward: no provider could be asked for its instances\n");
  return true;
}

/** Prints instances as a table. */
export function printInstances(context: CommandContext, instances: readonly ListedInstance[]): void {
  const now = Date.now();
  context.out(
    `${renderTable(
      [
        { header: "PROVIDER", cell: (row: ListedInstance) => row.providerName },
        { header: "INSTANCE", cell: (row) => row.instance.id },
        { header: "STATUS", cell: (row) => row.instance.status },
        { header: "POOL", cell: (row) => poolOf(row.instance) || "-" },
        { header: "SPOT", cell: (row) => (row.instance.spot ? "yes" : "no") },
        { header: "$/H", cell: (row) => formatPrice(row.instance.hourlyPrice), align: "right" },
        { header: "COST", cell: (row) => formatCost(instanceCost(row.instance, now)), align: "right" },
        { header: "AGE", cell: (row) => formatAge(now - row.instance.createdAt), align: "right" },
        { header: "ADDRESS", cell: (row) => row.instance.publicIp ?? row.instance.privateIp ?? "-" },
      ],
      instances,
    )}\n`,
  );
}

/** One pool's running cost, as `skyward instances` sums it up. */
export interface PoolCostRow {
  readonly providerName: string;
  /** The pool (its `skyward:pool` tag, else its cluster), or `-` for instances with neither. */
  readonly pool: string;
  readonly instances: number;
  /** USD per hour of the instances whose price is known, or null when none is. */
  readonly hourlyRate: number | null;
  /** USD so far of those instances, or null when none has a price. */
  readonly total: number | null;
}

/** The live instances' costs summed up per provider and pool, in the order the pools first appear. */
export function poolCosts(instances: readonly ListedInstance[], now: number = Date.now()): PoolCostRow[] {
  const pools = new Map<string, { -readonly [K in keyof PoolCostRow]: PoolCostRow[K] }>();
  for (const { providerName, instance } of instances) {
    const pool = poolOf(instance) || "-";
    const key = `${providerName}\u0000${pool}`;
    let row = pools.get(key);
    if (!row) {
      row = { providerName, pool, instances: 0, hourlyRate: null, total: null };
      pools.set(key, row);
    }
    row.instances += 1;
    const cost = instanceCost(instance, now);
    if (instance.hourlyPrice !== null && cost !== null) {
      row.hourlyRate = (row.hourlyRate ?? 0) + instance.hourlyPrice;
      row.total = (row.total ?? 0) + cost;
    }
  }
  return [...pools.values()];
}

/** Prints each pool's running cost as a table. */
export function printPoolCosts(context: CommandContext, instances: readonly ListedInstance[]): void {
  context.out(
    `${renderTable(
      [
        { header: "POOL", cell: (row: PoolCostRow) => row.pool },
        { header: "PROVIDER", cell: (row) => row.providerName },
        { header: "INSTANCES", cell: (row) => String(row.instances), align: "right" },
        { header: "$/H", cell: (row) => formatPrice(row.hourlyRate), align: "right" },
        { header: "COST", cell: (row) => formatCost(row.total), align: "right" },
      ],
      poolCosts(instances),
    )}\n`,
  );
}

/** Runs `skyward instances`; resolves with the exit code. */
export async function instancesCommand(context: CommandContext, flags: InstancesFlags): Promise<number> {
  const { loaded, skipped, order } = await useProviders(context, flags.providers);
  const { instances, failed, partial } = await listLiveInstances(context, loaded);
  if (reportListing(context, loaded, skipped, failed, partial, order)) return 1;
  if (flags.json) {
    const output = instances.map((row) => instanceForOutput(row.providerName, row.instance));
    context.out(`${JSON.stringify(output, null, 2)}\n`);
  } else if (instances.length === 0) context.out("No live instances.\n");
  else {
    printInstances(context, instances);
    context.out("\n");
    printPoolCosts(context, instances);
  }
  return 0;
}
