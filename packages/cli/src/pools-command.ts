/**
 * `skyward pools`, `skyward status ID` and `skyward attach ID`: the pools detached with
 * `pool.detach()` (their state files under `$SKYWARD_HOME/pools/`), a closer look at one, and picking
 * one up to collect what its tasks did.
 */
import { attach, type DetachedPool, detachedPools } from "@skyward/core";
import type { CommandContext } from "./command-context.js";
import { formatAge, formatPrice } from "./format.js";
import { renderTable } from "./table.js";
import { UsageError } from "./usage-error.js";

/** The help text of `skyward pools`. */
export const POOLS_HELP = `Usage: skyward pools [--json]

Lists the pools detached with pool.detach() ($SKYWARD_HOME/pools/): nodes (running/total), the tasks
whose outcomes wait for "skyward attach", when it was detached, its TTL and its cost since.

  --json               print the pools as JSON
`;

/** The help text of `skyward status`. */
export const STATUS_HELP = `Usage: skyward status ID [--json]

Shows one detached pool: its nodes and whether their workers run, tasks waiting, TTL and cost.

  --json               print it as JSON
`;

/** The help text of `skyward attach`. */
export const ATTACH_HELP = `Usage: skyward attach ID [--close] [--json]

Picks a detached pool up: waits for the outcomes of the tasks it was detached with and prints them
(each is handed over once), then detaches it again, or with --close stops its workers.

  --close              stop the pool once its outcomes are in
  --json               print the outcomes as JSON lines
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

/** `skyward attach ID`. */
export async function attachCommand(
  context: CommandContext,
  id: string,
  flags: { close: boolean; json: boolean },
): Promise<number> {
  await find(id);
  const pool = await attach(id, { options: { console: false }, signal: context.signal });
  let failed = 0;
  try {
    for (const outcome of await pool.collected()) {
      if (!outcome.ok) failed += 1;
      if (flags.json) context.out(`${JSON.stringify(outcome)}\n`);
      else {
        const streamed =
          outcome.items.length + outcome.dropped > 0
            ? ` (${outcome.items.length} item${outcome.items.length === 1 ? "" : "s"} kept${outcome.dropped > 0 ? `, ${outcome.dropped} dropped` : ""})`
            : "";
        const what = `${outcome.ok ? JSON.stringify(outcome.value) : `${outcome.errorType}: ${outcome.message}`}${streamed}`;
        context.out(
          `${outcome.taskId}  node ${outcome.node}  ${outcome.name}  ${outcome.ok ? "ok" : "failed"}  ${what}\n`,
        );
      }
    }
  } finally {
    if (flags.close) await pool.close();
    else
      context.err(`pool ${await pool.detach()} detached again ("skyward attach ${id} --close" stops it)\n`);
  }
  return failed === 0 ? 0 : 1;
}
