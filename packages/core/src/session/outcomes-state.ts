/**
 * What `collected()` hands over, and the outcomes an attached pool received without handing them
 * over before it was detached again: sealed into the pool's state file like the token (AES-256-GCM
 * with the user's pools key: the values are user data), so the next attach's `collected()` has them.
 */

import { decodeFrame, encodeFrame, type WireValue } from "../protocol/protocol.js";
import {
  type DetachedPoolState,
  type DetachedTask,
  openToken,
  readPoolState,
  sealToken,
  writePoolState,
} from "./state.js";

/** What every {@link CollectedResult} has. */
interface CollectedBase {
  readonly taskId: string;
  readonly name: string;
  readonly node: number;
  /**
   * A streaming task's items that reached no client before the attach — yielded while detached, or
   * after — in order; empty for other tasks. Items the worker had sent before the pool was detached
   * are not repeated.
   */
  readonly items: readonly unknown[];
  /** Items the worker could not keep while detached (over `pool.detach({ keepItemsBytes })`); 0 when none. */
  readonly dropped: number;
}

/** The outcome of a task that was on a worker when its pool was detached. */
export type CollectedResult =
  | (CollectedBase & {
      readonly ok: true;
      readonly value: unknown;
    })
  | (CollectedBase & {
      readonly ok: false;
      /** The exception's type (`ValueError`…), `lost` when the worker no longer knew the task. */
      readonly errorType: string;
      readonly message: string;
    });

/**
 * Records in pool `id`'s state file (just written by its detach) what an attach had not handed over
 * yet: `outcomes` sealed, and `tasks` (still without an outcome, on their workers) beside those of
 * the detach.
 */
export async function carryOver(
  id: string,
  pending: { readonly outcomes: readonly CollectedResult[]; readonly tasks: readonly DetachedTask[] },
): Promise<void> {
  if (pending.outcomes.length === 0 && pending.tasks.length === 0) return;
  const state = await readPoolState(id);
  if (!state) throw new Error(`pool ${id}'s state file is gone`);
  const known = new Set(state.tasks.map((task) => task.taskId));
  const plain = pending.outcomes.map((outcome) =>
    // A stream's end has no value: left out, since the wire has no `undefined`.
    outcome.ok && outcome.value === undefined ? { ...outcome, value: null, end: true } : outcome,
  );
  const bytes = Buffer.concat(
    encodeFrame([{ t: "subresult", id: "outcomes", sub: 0, value: plain as unknown as WireValue }]),
  );
  await writePoolState({
    ...state,
    tasks: [...pending.tasks.filter((task) => !known.has(task.taskId)), ...state.tasks],
    ...(pending.outcomes.length > 0 ? { outcomes: await sealToken(bytes.toString("base64")) } : {}),
  });
}

/** The outcomes an earlier attach did not hand over (none: empty). */
export async function openOutcomes(state: DetachedPoolState): Promise<CollectedResult[]> {
  if (state.outcomes === undefined) return [];
  const [message] = decodeFrame(Buffer.from(await openToken(state.outcomes), "base64"));
  const outcomes = (message as unknown as { value: (CollectedResult & { end?: true })[] }).value;
  return outcomes.map(({ end, ...outcome }) =>
    end ? ({ ...outcome, value: undefined } as CollectedResult) : (outcome as CollectedResult),
  );
}
