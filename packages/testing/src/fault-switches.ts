/**
 * The switches of a fake cloud API's {@link FaultController} that every fake implements alike — a 429
 * storm, a create answer lost, a list of an unknown shape — so each fake only says where they act: its
 * request guard answers {@link FaultSwitches.rateLimited} first, its create handler passes its answer
 * through {@link FaultSwitches.createAnswer}, its list handler reads {@link FaultSwitches.listBroken}.
 */
import type { FaultController } from "./fault-matrix.js";

/** What {@link faultSwitches} returns. */
export interface FaultSwitches {
  /** The three hooks of the controller, for the fake's `faults`. */
  readonly controller: Required<
    Pick<FaultController, "rateLimitNext" | "loseNextCreateAnswer" | "breakListShape">
  >;
  /** While true, the fake's list of instances answers a shape the provider does not know. */
  readonly listBroken: boolean;
  /** The 429 (with `Retry-After`) that answers this request while a storm lasts; undefined otherwise. */
  rateLimited(): Response | undefined;
  /** `answer` — or, once after `loseNextCreateAnswer`, a gateway's 502 (the create was done all the same). */
  createAnswer(answer: Response): Response;
  /** Every switch off. */
  reset(): void;
}

/**
 * The switches of a fake whose 429 answers `body` (the API's documented rate-limit answer), sent as
 * `contentType`.
 */
export function faultSwitches(body: unknown, contentType = "application/json"): FaultSwitches {
  const storm = { count: 0, retryAfterSeconds: 0 };
  let loseCreate = false;
  let listBroken = false;
  return {
    controller: {
      rateLimitNext(count, retryAfterSeconds) {
        Object.assign(storm, { count, retryAfterSeconds });
      },
      loseNextCreateAnswer() {
        loseCreate = true;
      },
      breakListShape(broken) {
        listBroken = broken;
      },
    },
    get listBroken() {
      return listBroken;
    },
    rateLimited() {
      if (storm.count <= 0) return undefined;
      storm.count -= 1;
      const headers = { "content-type": contentType, "Retry-After": String(storm.retryAfterSeconds) };
      return new Response(JSON.stringify(body), { status: 429, headers });
    },
    createAnswer(answer) {
      if (!loseCreate) return answer;
      loseCreate = false;
      return new Response("Bad Gateway", { status: 502 });
    },
    reset() {
      Object.assign(storm, { count: 0, retryAfterSeconds: 0 });
      loseCreate = false;
      listBroken = false;
    },
  };
}
