import { describe, expect, it } from "vitest";
import { CALL_OPTION_FIELDS, checkCallOptions } from "./call-options.js";

describe("checkCallOptions: a call's options", () => {
  it("accepts the fields each verb takes", () => {
    checkCallOptions(undefined, CALL_OPTION_FIELDS.run);
    checkCallOptions({ target: 1, signal: new AbortController().signal }, CALL_OPTION_FIELDS.run);
    checkCallOptions({ ordered: false }, CALL_OPTION_FIELDS.stream);
    checkCallOptions({ signal: undefined }, CALL_OPTION_FIELDS.wait);
  });

  it("refuses a field the verb does not take, naming it", () => {
    expect(() => checkCallOptions({ node: 2 }, CALL_OPTION_FIELDS.run)).toThrow(
      /options: unknown field "node" \(expected target, signal\)/,
    );
    expect(() => checkCallOptions({ target: 0 }, CALL_OPTION_FIELDS.wait)).toThrow(/unknown field "target"/);
    expect(() => checkCallOptions({ orderd: false }, CALL_OPTION_FIELDS.stream)).toThrow(
      /unknown field "orderd"/,
    );
  });

  it("refuses a signal that is no AbortSignal, an ordered that is no boolean, and options that are no object", () => {
    expect(() => checkCallOptions({ signal: new AbortController() }, CALL_OPTION_FIELDS.wait)).toThrow(
      /options.signal: expected an AbortSignal/,
    );
    expect(() => checkCallOptions({ ordered: "no" }, CALL_OPTION_FIELDS.stream)).toThrow(/options.ordered/);
    expect(() => checkCallOptions(2, CALL_OPTION_FIELDS.run)).toThrow(/options: expected an object/);
  });
});
