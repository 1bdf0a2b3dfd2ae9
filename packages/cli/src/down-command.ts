/**
 * `skyward down`: terminates the live instances of one pool, or all of them, then removes what those
 * pools shared at their providers (the providers' `cleanup`).
 */
import { forgetDetachedPool } from "@skyward/core";
import { clusterFromInstance, type PoolResource } from "@skyward/core/contract";
import { type CommandContext, useProviders } from "./command-context.js";
import { poolOf } from "./format.js";
import {
  type ListedInstance,
  listLiveInstances,
  printInstances,
  reportListing,
} from "./instances-command.js";
import { describeError } from "./providers.js";
import { UsageError } from "./usage-error.js";

/** The flags of `skyward down`, parsed. */
export interface DownFlags {
  readonly pool: string | undefined;
  readonly all: boolean;
  readonly providers: readonly string[] | undefined;
  readonly yes: boolean;
  readonly json: boolean;
  /** How long to wait for terminated instances to end before their pools' shared resources go. */
  readonly waitSeconds: number;
}

/** How long `down` waits, by default, for terminated instances to end (`--wait`). */
export const DEFAULT_DOWN_WAIT_SECONDS = 180;

/** The help text of `skyward down`. */
export const DOWN_HELP = `Usage: skyward down (--pool ID | --all) [--provider A,B] [--yes] [--wait SECONDS]

Terminates live instances Skyward started: those of one pool (the POOL column of "skyward instances"),
or all of them, and forgets a detached pool whose instances it all terminated ("skyward pools" no
longer lists it). Asks first when run in a terminal. Then removes what those pools shared at the
provider (an AWS security group and key pair, the key's file under ~/.skyward/keys), also for pools
whose instances are already gone (a client that was killed never ran its teardown).

  --pool ID            only this pool (a pool or cluster id)
  --all                every instance and pool Skyward started
  --provider A,B       providers to ask: [providers.NAME] entries of skyward.toml or aws, gcp, hyperstack, novita, runpod, tensordock, vastai, verda
  --yes, -y            do not ask
  --json               print what was terminated and removed as JSON
  --wait SECONDS       wait this long for terminated instances to end before removing what their
                       pools shared; what is still in use then is listed (default ${DEFAULT_DOWN_WAIT_SECONDS})
  --timeout SECONDS    give up after this long (default 60 plus --wait)
`;

/** What `down` did to one shared resource of a pool. */
interface ResourceOutcome {
  readonly providerName: string;
  readonly resource: PoolResource;
  /** Why it was left; undefined when it was removed. */
  readonly reason: string | undefined;
}

/** Runs `skyward down`; resolves with the exit code. */
export async function downCommand(context: CommandContext, flags: DownFlags): Promise<number> {
  if (flags.all === (flags.pool !== undefined)) {
    throw new UsageError("down needs either --pool ID or --all");
  }
  const { loaded, skipped, order } = await useProviders(context, flags.providers);
  const { instances, failed, partial } = await listLiveInstances(context, loaded);
  // Nothing could be asked: "No live instances." would be a guess, and there is nothing to clean up.
  if (reportListing(context, loaded, skipped, failed, partial, order)) return 1;
  const inPool = (row: ListedInstance) =>
    poolOf(row.instance) === flags.pool || row.instance.tags["skyward:cluster"] === flags.pool;
  const targets = flags.all ? instances : instances.filter(inPool);
  const incomplete = skipped.length + failed.length + partial.length > 0;
  // Providers whose listing missed some of their instances: what they listed is terminated, but their
  // pools are not forgotten nor their shared resources removed (the missed instances may use them).
  const unlisted = new Set([...failed, ...partial].map((entry) => entry.name));
  if (targets.length === 0) {
    if (!flags.json)
      context.out(flags.all ? "No live instances.\n" : `No live instances in pool ${flags.pool}.\n`);
  } else {
    if (!flags.json) printInstances(context, targets);
    if (!flags.yes && context.interactive) {
      const answer = await context.ask(
        `Terminate ${targets.length} instance${targets.length === 1 ? "" : "s"}? [y/N] `,
      );
      if (!/^y(es)?$/i.test(answer.trim())) {
        context.err("Nothing terminated.\n");
        return 1;
      }
    }
  }

  // One terminate call per provider and cluster.
  const groups = new Map<string, ListedInstance[]>();
  for (const row of targets) {
    const key = JSON.stringify([row.providerName, row.instance.tags["skyward:cluster"] ?? ""]);
    groups.set(key, [...(groups.get(key) ?? []), row]);
  }
  const terminated: ListedInstance[] = [];
  const notTerminated: ListedInstance[] = [];
  let failures = 0;
  await Promise.all(
    [...groups.values()].map(async (rows) => {
      const first = rows[0] as ListedInstance;
      const ids = rows.map((row) => row.instance.id);
      try {
        await first.provider.terminate({
          cluster: clusterFromInstance(first.provider.name, first.instance),
          ids,
          signal: context.signal,
        });
        terminated.push(...rows);
      } catch (error) {
        failures += rows.length;
        notTerminated.push(...rows);
        context.err(
          `skyward: could not terminate ${ids.join(", ")} at ${first.providerName}: ${describeError(error)}\n`,
        );
      }
    }),
  );
  if (!flags.json) {
    for (const row of terminated) {
      context.out(
        `Terminated ${row.instance.id} (${row.providerName}, pool ${poolOf(row.instance) || "-"})\n`,
      );
    }
  }
  await forgetTerminatedPools(
    context,
    terminated,
    [...notTerminated, ...instances.filter((row) => unlisted.has(row.providerName))],
    flags.json,
  );

  // Then what the pools shared at each provider that has any (a dead client's teardown never ran).
  const outcomes: ResourceOutcome[] = [];
  await Promise.all(
    loaded.map(async ({ name, provider }) => {
      // A provider that could not list all it has (already reported) is not asked again.
      if (!provider.cleanup || unlisted.has(name)) return;
      try {
        const result = await provider.cleanup({
          signal: context.signal,
          pools: flags.all ? "all" : [flags.pool as string],
          waitSeconds: flags.waitSeconds,
        });
        for (const resource of result.removed)
          outcomes.push({ providerName: name, resource, reason: undefined });
        for (const { reason, ...resource } of result.left)
          outcomes.push({ providerName: name, resource, reason });
      } catch (error) {
        failures += 1;
        context.err(`skyward: could not clean up at ${name}: ${describeError(error)}\n`);
      }
    }),
  );
  outcomes.sort(
    (a, b) =>
      a.providerName.localeCompare(b.providerName) ||
      a.resource.poolId.localeCompare(b.resource.poolId) ||
      a.resource.kind.localeCompare(b.resource.kind) ||
      a.resource.id.localeCompare(b.resource.id),
  );
  const left = outcomes.filter((outcome) => outcome.reason !== undefined);
  if (flags.json) {
    const output = [
      ...terminated.map((row) => ({
        provider: row.providerName,
        id: row.instance.id,
        pool: poolOf(row.instance),
      })),
      ...outcomes.map(({ providerName, resource, reason }) => ({
        provider: providerName,
        id: resource.id,
        pool: resource.poolId,
        resource: resource.kind,
        removed: reason === undefined,
        ...(reason !== undefined ? { reason } : {}),
      })),
    ];
    context.out(`${JSON.stringify(output, null, 2)}\n`);
  } else {
    for (const { providerName, resource, reason } of outcomes) {
      const what = `${resource.kind} ${resource.id} (${providerName}, pool ${resource.poolId})`;
      if (reason === undefined) context.out(`Removed ${what}\n`);
      else context.err(`skyward: left ${what}: ${reason}\n`);
    }
  }
  return failures > 0 || left.length > 0 || incomplete ? 1 : 0;
}

/**
 * A detached pool whose every listed instance was terminated here has no worker left to attach to:
 * its state file goes, or `skyward pools` would list it for ever with a cost that keeps growing.
 */
async function forgetTerminatedPools(
  context: CommandContext,
  terminated: readonly ListedInstance[],
  notTerminated: readonly ListedInstance[],
  json: boolean,
): Promise<void> {
  const kept = new Set(notTerminated.map((row) => poolOf(row.instance)));
  const pools = new Set(terminated.map((row) => poolOf(row.instance)).filter((id) => id && !kept.has(id)));
  for (const id of pools) {
    if ((await forgetDetachedPool(id)) && !json) context.out(`Forgot detached pool ${id}\n`);
  }
}
