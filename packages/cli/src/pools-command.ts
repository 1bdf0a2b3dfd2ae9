/**
 * `skyward pools`, `skyward status ID` and `skyward attach ID`: the pools detached with
 * `pool.detach()` (their state files under `$SKYWARD_HOME/pools/`), a closer look at one, and picking
 * one up to collect what its tasks did.
 */
import { attach, type DetachedPool, detachedPools, type Provider } from "@skyward/core";
import { loadConfig } from "@skyward/core/config";
import type { CommandContext } from "./command-context.js";
import { formatAge, formatPrice, valueJson } from "./format.js";
import { loadProviders, selectProviderEntries } from "./providers.js";
import { renderTable } from "./table.js";
import { UsageError } from "./usage-error.js";

/** The help text of `skyward pools`. */
export const POOLS_HELP = `Usage: skyward pools [--json]

Lists the pools detached with pool.detach() ($SKYWARD_HOME/pools/): nodes (running/total), the tasks
whose outcomes wait for "skyward attach", when it was detached, its TTL and its cost since. It reads
the state files only (no provider is asked): it takes no --provider nor --timeout.

  --json               print the pools as JSON
`;

/** The help text of `skyward status`. */
export const STATUS_HELP = `Usage: skyward status ID [--json]

Shows one detached pool: its nodes and whether their workers run, tasks waiting, TTL and cost. It
reads the state file only (a remote worker shows as "remote"): it takes no --provider nor --timeout.

  --json               print it as JSON
`;

/** The help text of `skyward attach`. */
export const ATTACH_HELP = `Usage: skyward attach ID [--provider NAME] [--timeout SECONDS] [--close] [--json]

Picks a detached pool up: waits for the outcomes of the tasks it was detached with and prints them
(each is handed over once), then detaches it again, or with --close stops its workers.

  --provider NAME      the provider to reach a pool's workers through: a [providers.NAME] entry of
                       skyward.toml (or ~/.skyward/defaults.toml), or a built-in type (default: the one
                       entry of the pool's provider type; a pool on Local takes none)
  --timeout SECONDS    give up reconnecting to the workers after this long (default: 30 per worker);
                       waiting for the tasks' outcomes once reconnected is not limited
  --close              stop the pool once its outcomes are in
  --json               print the outcomes as JSON lines

Ctrl-C while waiting for the outcomes detaches the pool again (with --close too): its tasks go on.
`;

function nodesCell(pool: DetachedPool): string {
  // Remote workers are known alive only by reaching them (attach): their count alone is shown.
  if (pool.nodes.some((node) => node.alive === null)) return String(pool.nodes.length);
  return `${pool.nodes.filter((node) => node.alive).length}/${pool.nodes.length}`;
}

function costCell(pool: DetachedPool): string {
  return pool.costSinceDetached === null ? "-" : `$${formatPrice(pool.costSinceDetached)}`;
}

/** `skyward pools`. */
export async function poolsCommand(context: CommandContext, flags: { json: boolean }): Promise<number> {
  const pools = await detachedPools();
  if (flags.json) {
    context.out(`${JSON.stringify(pools, null, 2)}\n`);
    return 0;
  }
  if (pools.length === 0) {
    context.out("No detached pools.\n");
    return 0;
  }
  const now = Date.now();
  context.out(
    `${renderTable(
      [
        { header: "POOL", cell: (pool: DetachedPool) => pool.id },
        { header: "PROVIDER", cell: (pool) => pool.provider },
        { header: "TYPE", cell: (pool) => pool.instanceType },
        { header: "NODES", cell: nodesCell, align: "right" },
        { header: "TASKS", cell: (pool) => String(pool.tasks), align: "right" },
        { header: "DETACHED", cell: (pool) => `${formatAge(now - pool.detachedAt)} ago` },
        { header: "TTL", cell: (pool) => `${pool.ttl}s` },
        { header: "$/H", cell: (pool) => formatPrice(pool.hourlyRate), align: "right" },
        { header: "COST", cell: costCell, align: "right" },
      ],
      pools,
    )}\n`,
  );
  return 0;
}

async function find(id: string): Promise<DetachedPool> {
  const pool = (await detachedPools()).find((entry) => entry.id === id);
  if (!pool) throw new UsageError(`no detached pool "${id}" (see "skyward pools")`);
  return pool;
}

/** `skyward status ID`. */
export async function statusCommand(
  context: CommandContext,
  id: string,
  flags: { json: boolean },
): Promise<number> {
  const pool = await find(id);
  if (flags.json) {
    context.out(`${JSON.stringify(pool, null, 2)}\n`);
    return 0;
  }
  const now = Date.now();
  context.out(
    [
      `pool ${pool.id} · ${pool.provider} · ${pool.region} · ${pool.instanceType}`,
      `detached ${formatAge(now - pool.detachedAt)} ago · ttl ${pool.ttl}s · ${pool.tasks} task${pool.tasks === 1 ? "" : "s"} waiting for attach · cost since ${costCell(pool)}`,
      ...(pool.budgetDeadline === null
        ? []
        : [
            pool.budgetDeadline > now
              ? `budget runs out in ${formatAge(pool.budgetDeadline - now)}: the workers stop then unless attached`
              : "budget ran out: the workers stopped unless a pool attached",
          ]),
      renderTable(
        [
          {
            header: "NODE",
            cell: (node: DetachedPool["nodes"][number]) => String(node.index),
            align: "right",
          },
          { header: "INSTANCE", cell: (node) => node.instanceId },
          { header: "PID", cell: (node) => String(node.pid), align: "right" },
          {
            header: "WORKER",
            cell: (node) => (node.alive === null ? "remote" : node.alive ? "running" : "gone"),
          },
        ],
        pool.nodes,
      ),
      "",
    ].join("\n"),
  );
  return pool.nodes.every((node) => node.alive !== false) ? 0 : 1;
}

/**
 * The provider a pool on `pool.provider` is reached through: the one entry `--provider` names, else
 * the one `[providers.*]` entry of the pool's type, from the project's skyward.toml and the
 * home's defaults.toml (the CLI's `cwd` and `home`). Undefined for a `Local` pool.
 */
async function attachProvider(
  context: CommandContext,
  pool: DetachedPool,
  requested: readonly string[] | undefined,
): Promise<Provider | undefined> {
  if (pool.provider === "local") {
    if (requested !== undefined)
      throw new UsageError(
        `pool ${pool.id} runs on Local, reached on this machine: --provider applies to pools on other providers`,
      );
    return undefined;
  }
  const config = await loadConfig({
    cwd: context.cwd,
    ...(context.home !== undefined ? { home: context.home } : {}),
  });
  for (const entry of Object.values(config.providers)) context.redactor.addSettings(entry.settings);
  const entries =
    requested === undefined
      ? Object.values(config.providers).filter((entry) => entry.type === pool.provider)
      : selectProviderEntries(config, requested);
  if (entries.length !== 1) {
    const found = entries.map((entry) => `"${entry.name}"`).join(", ");
    throw new UsageError(
      requested === undefined
        ? `pool ${pool.id} runs on "${pool.provider}": expected exactly one [providers.*] entry of type "${pool.provider}" in skyward.toml to reach it through, found ${entries.length === 0 ? "none" : `${entries.length} (${found})`}; name one with --provider NAME`
        : `--provider expects one provider to reach pool ${pool.id} through, received ${entries.length} (${found})`,
    );
  }
  const [entry] = entries as [(typeof entries)[number]];
  const { loaded, skipped } = await loadProviders([entry], context.cwd);
  if (skipped[0]) throw new Error(`${skipped[0].name}: ${skipped[0].reason}`);
  const provider = (loaded[0] as (typeof loaded)[number]).provider;
  if (provider.name !== pool.provider) {
    throw new UsageError(
      `--provider ${entry.name} is a "${provider.name}" provider, but pool ${pool.id} runs on "${pool.provider}"`,
    );
  }
  return provider;
}

/** `promise`'s value, or undefined once `signal` is aborted first. */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T | undefined> {
  if (signal.aborted) return Promise.resolve(undefined);
  return new Promise<T | undefined>((resolve, reject) => {
    const onAbort = () => resolve(undefined);
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(error);
      },
    );
  });
}

/** `skyward attach ID`. */
export async function attachCommand(
  context: CommandContext,
  id: string,
  flags: {
    close: boolean;
    json: boolean;
    /** `--provider`: the entry to reach a non-`Local` pool through. */
    providers?: readonly string[] | undefined;
    /** `--timeout`: how long reconnecting may take, seconds. */
    timeoutSeconds?: number | undefined;
  },
): Promise<number> {
  const detached = await find(id);
  const provider = await attachProvider(context, detached, flags.providers);
  const signal =
    flags.timeoutSeconds === undefined
      ? context.signal
      : AbortSignal.any([context.signal, AbortSignal.timeout(flags.timeoutSeconds * 1000)]);
  const pool = await attach(id, {
    options: { console: false },
    signal,
    // Ctrl-C must not stop a pool the user asked only to look at: it is detached again below.
    handleSignals: false,
    ...(provider !== undefined ? { provider } : {}),
  });
  let failed = 0;
  let interrupted = false;
  // A pool that closes itself while attached (its budget ran out) is neither detached again nor closed here.
  let spent: string | undefined;
  pool.on("budget.exceeded", (event) => {
    spent = `its budget of $${event.budget} is spent ($${event.total.toFixed(4)} so far)`;
  });
  try {
    const outcomes = await untilAborted(pool.collected(), context.signal);
    if (outcomes === undefined) {
      // Its outcomes not in yet: the pool is detached again (--close too), its tasks going on.
      interrupted = true;
      context.err("skyward: interrupted while waiting for the pool's tasks\n");
      failed += 1;
    }
    for (const outcome of outcomes ?? []) {
      if (!outcome.ok) failed += 1;
      if (flags.json) context.out(`${valueJson(outcome)}\n`);
      else {
        const streamed =
          outcome.items.length + outcome.dropped > 0
            ? ` (${outcome.items.length} item${outcome.items.length === 1 ? "" : "s"} kept${outcome.dropped > 0 ? `, ${outcome.dropped} dropped` : ""})`
            : "";
        const what = `${outcome.ok ? valueJson(outcome.value) : `${outcome.errorType}: ${outcome.message}`}${streamed}`;
        context.out(
          `${outcome.taskId}  node ${outcome.node}  ${outcome.name}  ${outcome.ok ? "ok" : "failed"}  ${what}\n`,
        );
      }
    }
  } finally {
    if (pool.state === "shutting_down" || pool.state === "destroyed") {
      await pool.close();
      failed += 1;
      context.err(`skyward: pool ${id} closed itself${spent ? `: ${spent}` : ""}; its workers are stopped\n`);
    } else if (flags.close && !interrupted) await pool.close();
    else
      context.err(`pool ${await pool.detach()} detached again ("skyward attach ${id} --close" stops it)\n`);
  }
  return failed === 0 ? 0 : 1;
}
