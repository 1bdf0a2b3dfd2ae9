/**
 * The fault switches a fake cloud API turns on for the fault matrix ({@link FaultController}), kept
 * once: each fake calls `take…` where its real API would fail that way, and answers as its own API
 * documents the failure. A switch left off changes nothing, so the fake's other tests see the API as
 * it normally answers.
 */
import type { FakeRestAnswer } from "./fake-rest.js";
import type { BillingInstance, FaultController } from "./fault-matrix.js";

/** The switches, as the matrix flips them and as the fake reads them. */
export interface FakeFaultSwitches
  extends Required<
    Pick<
      FaultController,
      | "rateLimitNext"
      | "loseNextCreateAnswer"
      | "partialDeleteNext"
      | "refuseDeleteWhileProvisioning"
      | "breakListShape"
    >
  > {
  /** Every instance the fake ever created, at the price it bills an hour (the fake pushes each). */
  readonly created: BillingInstance[];
  /** Whether the list answers are of an unknown shape now. */
  readonly listShapeBroken: boolean;
  /** The 429 answer for this request while a storm lasts (`answer` is the API's own 429 body), else undefined. */
  takeRateLimit(answer: FakeRestAnswer): FakeRestAnswer | undefined;
  /** True once after `loseNextCreateAnswer`: this create's answer is lost (the instance is still made). */
  takeLostCreateAnswer(): boolean;
  /** True once after `partialDeleteNext`: this batch delete answers 207 with its first instance refused. */
  takePartialDelete(): boolean;
  /** True for each of the next refused deletes: this delete is refused as of an instance still provisioning. */
  takeDeleteRefusal(): boolean;
}

/** Fresh switches, all off. */
export function fakeFaultSwitches(): FakeFaultSwitches {
  let storm = { count: 0, retryAfterSeconds: 0 };
  let loseCreateAnswer = false;
  let partialDelete = false;
  let deleteRefusals = 0;
  let listShapeBroken = false;
  return {
    created: [],
    get listShapeBroken() {
      return listShapeBroken;
    },
    rateLimitNext(count, retryAfterSeconds) {
      storm = { count, retryAfterSeconds };
    },
    loseNextCreateAnswer() {
      loseCreateAnswer = true;
    },
    partialDeleteNext() {
      partialDelete = true;
    },
    refuseDeleteWhileProvisioning(count) {
      deleteRefusals = count;
    },
    breakListShape(broken) {
      listShapeBroken = broken;
    },
    takeRateLimit(answer) {
      if (storm.count <= 0) return undefined;
      storm.count -= 1;
      return { ...answer, headers: { ...answer.headers, "retry-after": String(storm.retryAfterSeconds) } };
    },
    takeLostCreateAnswer() {
      const lost = loseCreateAnswer;
      loseCreateAnswer = false;
      return lost;
    },
    takePartialDelete() {
      const partial = partialDelete;
      partialDelete = false;
      return partial;
    },
    takeDeleteRefusal() {
      if (deleteRefusals <= 0) return false;
      deleteRefusals -= 1;
      return true;
    },
  };
}
