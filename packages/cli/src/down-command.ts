/** `skyward down`: terminates the live instances of one pool, or all of them. */
import { clusterFromInstance } from "@skyward/core";
import { type CommandContext, reportSkipped, useProviders } from "./command-context.js";
import { poolOf } from "./format.js";
import { type ListedInstance, listLiveInstances, printInstances } from "./instances-command.js";
import { describeError } from "./providers.js";
import { UsageError } from "./usage-error.js";

/** The flags of `skyward down`, parsed. */
export interface DownFlags {
  readonly pool: string | undefined;
  readonly all: boolean;
  readonly providers: readonly string[] | undefined;
  readonly yes: boolean;
  readonly json: boolean;
}

/** The help text of `skyward down`. */
export const DOWN_HELP = `Usage: skyward down (--pool ID | --all) [--provider A,B] [--yes]

Terminates live instances Skyward started: those of one pool (the POOL column of "skyward instances"),
or all of them. Asks first when run in a terminal.

  --pool ID            only this pool's instances
  --all                every instance Skyward started
  --provider A,B       providers to ask: [providers.NAME] entries of skyward.toml or aws, runpod, vastai
  --yes, -y            do not ask
  --json               print what was terminated as JSON
  --timeout SECONDS    give up after this long (default 60)
`;

/** Runs `skyward down`; resolves with the exit code. */
export async function downCommand(context: CommandContext, flags: DownFlags): Promise<number> {
  if (flags.all === (flags.pool !== undefined)) {
    throw new UsageError("down needs either --pool ID or --all");
  }
  const { loaded, skipped } = await useProviders(context, flags.providers);
  const { instances, failed } = await listLiveInstances(context, loaded);
  reportSkipped(context, [...skipped, ...failed]);
  const targets = flags.all ? instances : instances.filter((row) => poolOf(row.instance) === flags.pool);
  const incomplete = skipped.length + failed.length > 0;
  if (targets.length === 0) {
    if (flags.json) context.out("[]\n");
    else context.out(flags.all ? "No live instances.\n" : `No live instances in pool ${flags.pool}.\n`);
    return incomplete ? 1 : 0;
  }
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

  // One terminate call per provider and cluster.
  const groups = new Map<string, ListedInstance[]>();
  for (const row of targets) {
    const key = JSON.stringify([row.providerName, row.instance.tags["skyward:cluster"] ?? ""]);
    groups.set(key, [...(groups.get(key) ?? []), row]);
  }
  const terminated: ListedInstance[] = [];
  let failures = 0;
  await Promise.all(
    [...groups.values()].map(async (rows) => {
      const first = rows[0] as ListedInstance;
      const ids = rows.map((row) => row.instance.id);
      try {
        await first.provider.terminate(clusterFromInstance(first.provider.name, first.instance), ids, {
          signal: context.signal,
        });
        terminated.push(...rows);
      } catch (error) {
        failures += rows.length;
        context.err(
          `skyward: could not terminate ${ids.join(", ")} at ${first.providerName}: ${describeError(error)}\n`,
        );
      }
    }),
  );
  if (flags.json) {
    const output = terminated.map((row) => ({
      provider: row.providerName,
      id: row.instance.id,
      pool: poolOf(row.instance),
    }));
    context.out(`${JSON.stringify(output, null, 2)}\n`);
  } else {
    for (const row of terminated) {
      context.out(
        `Terminated ${row.instance.id} (${row.providerName}, pool ${poolOf(row.instance) || "-"})\n`,
      );
    }
  }
  return failures > 0 || incomplete ? 1 : 0;
}
