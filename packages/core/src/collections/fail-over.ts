/**
 * Promoting a copy of the collections when the node that held them is lost (docs/protocol.md,
 * "Distributed collections"). One try can fail without anything being wrong for good: the node
 * with the copy is stopped for a moment (SIGSTOP, a stalled host) and answers nothing, or it is
 * lost itself while being asked. So the client tries again, in rounds, each one epoch newer than
 * the last, until a copy is promoted, no node has one, or its patience runs out.
 */
import { setTimeout as sleep } from "node:timers/promises";
import type { CollectionsAddress, WireValue } from "../protocol/protocol.js";
import { CLIENT_OWNER } from "./operation.js";
import { type HeadConnection, RemoteCollections } from "./remote.js";

/** A node of the pool as failing over needs it: its index and its connection, when it has one. */
export interface FailOverNode {
  readonly index: number;
  readonly connection?: HeadConnection | undefined;
}

/** How hard {@link failOver} tries. */
export interface FailOverOptions {
  /**
   * How long to go on trying, in milliseconds (default 120 s). Longer than a node's liveness
   * deadline, so that a node that answers nothing is either heard from or lost by then.
   */
  readonly patienceMs?: number;
  /** How long one node may take to answer one ask, in milliseconds (default 10 s). */
  readonly askTimeoutMs?: number;
  /** The wait after the first round that promoted nothing, doubled each round up to 8 s (default 500 ms). */
  readonly backoffMs?: number;
  /** The pool is going away: stop trying. */
  readonly signal?: AbortSignal;
  /** A round promoted nothing (`reason`): the next starts in `retryInMs`. */
  readonly onRetry?: (reason: string, retryInMs: number) => void;
}

/** A copy promoted (the node and where it serves them), or why none could be. */
export type FailOverOutcome =
  | { readonly promoted: true; readonly node: number; readonly address: CollectionsAddress }
  | { readonly promoted: false; readonly reason: string };

/** What a node answers to `$replica`: the epoch and seq of the copy it holds. */
interface CopyHeld {
  readonly epoch: number;
  readonly seq: number;
}

function isCopyHeld(value: unknown): value is CopyHeld {
  const copy = value as Partial<CopyHeld> | null;
  return typeof copy?.epoch === "number" && typeof copy.seq === "number";
}

function isAddress(value: unknown): value is CollectionsAddress {
  const address = value as Partial<CollectionsAddress> | null;
  return typeof address?.addr === "string" && typeof address.port === "number";
}

/**
 * One request to a node, on a listener of its own let go once answered (a pool loses many nodes);
 * rejected after `timeoutMs` without an answer.
 */
export async function askNode(
  connection: HeadConnection,
  request: WireValue[],
  timeoutMs = Number.POSITIVE_INFINITY,
): Promise<WireValue> {
  const ask = new RemoteCollections(() => connection);
  const pending = ask.apply(CLIENT_OWNER, request);
  const timer = Number.isFinite(timeoutMs)
    ? setTimeout(() => pending.cancel(`no answer within ${timeoutMs / 1000} s`), timeoutMs)
    : undefined;
  try {
    return await pending.answer;
  } finally {
    clearTimeout(timer);
    ask.close("answered");
  }
}

/** One round's result: promoted, or why not — with `retry` when another round could change that. */
type RoundOutcome =
  | FailOverOutcome
  | { readonly promoted: false; readonly reason: string; readonly retry: true };

/**
 * The node that held the collections (`lost`, in epoch `epoch`) is gone from the client's view —
 * it may still run, cut off from the client only. Each round fences every other open node at a
 * new epoch and asks how new its copy is (`["$replica", epoch]`): from then on it refuses the lost
 * holder's copies, so that holder acknowledges nothing more, and the copies compared hold every
 * write it acknowledged. The newest (by epoch, then seq) is promoted in that epoch (`$promote`),
 * and answers where it serves them now; if it fails to, another node holding a copy as new is.
 * A round where a node answered nothing promotes nothing (that node may hold the newest copy) and
 * is tried again after a pause; a later round's epoch supersedes a promotion a silent node applies
 * late. `nodes` is read each round: a node lost meanwhile is no longer asked.
 */
export async function failOver(
  nodes: () => readonly FailOverNode[],
  lost: number,
  epoch: number,
  options: FailOverOptions = {},
): Promise<FailOverOutcome> {
  const patienceMs = options.patienceMs ?? 120_000;
  const askTimeoutMs = options.askTimeoutMs ?? 10_000;
  let backoffMs = options.backoffMs ?? 500;
  const started = performance.now();
  for (let round = 1; ; round += 1) {
    const outcome = await promoteOnce(nodes(), lost, epoch + round, askTimeoutMs);
    if (outcome.promoted || !("retry" in outcome)) return outcome;
    const elapsed = performance.now() - started;
    if (options.signal?.aborted)
      return { promoted: false, reason: `${outcome.reason}; the pool is going away` };
    if (elapsed + backoffMs > patienceMs)
      return {
        promoted: false,
        reason: `${outcome.reason} (${round} tries over ${Math.round(elapsed / 1000)} s)`,
      };
    options.onRetry?.(outcome.reason, backoffMs);
    await sleep(backoffMs, undefined, { signal: options.signal }).catch(() => undefined);
    backoffMs = Math.min(backoffMs * 2, 8_000);
  }
}

async function promoteOnce(
  nodes: readonly FailOverNode[],
  lost: number,
  next: number,
  askTimeoutMs: number,
): Promise<RoundOutcome> {
  const candidates = nodes.filter((node) => node.index !== lost && node.connection?.isOpen);
  if (candidates.length === 0)
    return { promoted: false, reason: "no other node is connected to hold a copy" };
  const answers = await Promise.all(
    candidates.map(async (node) => {
      try {
        const copy = await askNode(node.connection as HeadConnection, ["$replica", next], askTimeoutMs);
        return { node, copy: isCopyHeld(copy) ? copy : undefined };
      } catch (error) {
        return { node, silent: (error as Error).message };
      }
    }),
  );
  const silent = answers.flatMap((answer) => ("silent" in answer ? [answer] : []));
  if (silent.length > 0)
    return {
      promoted: false,
      retry: true,
      reason: `${silent.map((answer) => `node ${answer.node.index}`).join(", ")} did not say whether it holds a copy (${silent[0]?.silent})`,
    };
  const copies = answers
    .flatMap((answer) => ("copy" in answer && answer.copy ? [{ node: answer.node, copy: answer.copy }] : []))
    .sort((a, b) => b.copy.epoch - a.copy.epoch || b.copy.seq - a.copy.seq);
  const newest = copies[0]?.copy;
  if (!newest)
    return {
      promoted: false,
      reason: `no other node holds a copy (${candidates.map((node) => `node ${node.index}`).join(", ")} answered that they hold none)`,
    };
  const failures: string[] = [];
  // Only a copy as new as the newest: an older one lacks writes the lost holder acknowledged.
  for (const { node } of copies.filter(
    ({ copy }) => copy.epoch === newest.epoch && copy.seq === newest.seq,
  )) {
    try {
      const address = await askNode(
        node.connection as HeadConnection,
        ["$promote", lost, next],
        askTimeoutMs,
      );
      if (isAddress(address))
        return {
          promoted: true,
          node: node.index,
          address: { epoch: next, ...(address as CollectionsAddress) },
        };
      failures.push(`node ${node.index} could not serve them`);
    } catch (error) {
      failures.push(`node ${node.index}: ${(error as Error).message}`);
    }
  }
  return {
    promoted: false,
    retry: true,
    reason: `promoting the newest copy failed (${failures.join("; ")})`,
  };
}

/**
 * The client's verdict that `node` is gone, told to the holder of the collections (`$lost`): if
 * that node held the copy, the holder answers alone from then on (until another node has the copy)
 * instead of holding every write for it.
 */
export function tellNodeLost(holder: HeadConnection | undefined, node: number): void {
  if (holder?.isOpen) void askNode(holder, ["$lost", node]).catch(() => undefined);
}
