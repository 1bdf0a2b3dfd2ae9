/**
 * The fault matrix itself: run in a child vitest against the in-memory fake provider, well wired and
 * wired or behaving wrongly in one way each, it must pass the first and fail each of the others
 * exactly where the fault shows.
 */
import { describe, expect, it } from "vitest";
import { suiteFailures } from "../test/fixtures/suite-failures.js";
import { FAULT_CELLS } from "./fault-matrix.js";

const FINAL = "leaves 0 instances billing and 0 over the price cap";

describe("runFaultMatrix", () => {
  it("passes a well-wired provider and fails each broken wiring exactly where it breaks", async () => {
    const { failures, passed } = await suiteFailures(
      "test/fixtures/fault-matrix-fakes.vitest.config.ts",
      "fault matrix: ",
      200_000,
    );
    expect(failures).toEqual({
      "well-wired": [],
      // The pool judged the offer by its spot price; the instance bills on demand, above the cap.
      "on-demand-past-the-spot-cap": [FINAL],
      // Nothing ends the orphan of a killed client, and the run leaves it billing.
      "terminate-does-nothing": [FAULT_CELLS["client-killed-after-create"], FINAL],
      // Neither declared not applicable nor given its switch: the cell fails, never skips.
      "undeclared-cell": [FAULT_CELLS["partial-delete"]],
      "declared-but-implemented": [
        `${FAULT_CELLS["instance-reclaimed"]}: not applicable — said not to apply, yet the fake reclaims`,
      ],
    });
    expect(passed).toBeGreaterThan(30);
  }, 240_000);
});
