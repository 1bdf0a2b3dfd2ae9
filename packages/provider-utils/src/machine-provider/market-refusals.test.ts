import { describe, expect, it } from "vitest";
import { z } from "zod";
import { answerNumberFields, answerTextFields } from "./answer-fields.js";
import { errorTable, LEFT_TO_STATUS } from "./error-table.js";
import { MARKET_REFUSALS } from "./market-refusals.js";

const classify = errorTable([LEFT_TO_STATUS, { kind: "busy", words: /being created/i }, ...MARKET_REFUSALS]);
const refused = (message: string, statusCode = 400) => classify({ statusCode, message, answer: null });

describe("MARKET_REFUSALS", () => {
  it("tells capacity refusals by the words marketplaces use", () => {
    for (const message of [
      "Not enough GPUs on this host",
      "NOT_ENOUGH_RESOURCE",
      "GPU out of stock",
      "sold out",
      "flavor unavailable",
      "instance type not available",
      "no available hostnodes",
      "no capacity in FIN-01",
      "insufficient resources",
      "Insufficient GPU count",
      "no GPUs left",
      "no hosts",
      "no inventory",
    ])
      expect(refused(message), message).toBe("capacity");
  });

  it("tells quota and account refusals apart", () => {
    expect(refused("quota exceeded")).toBe("quota");
    expect(refused("VM limit reached")).toBe("quota");
    expect(refused("Insufficient balance")).toBe("account");
    expect(refused("insufficient funds")).toBe("account");
    expect(refused("payment required")).toBe("account");
  });

  it("comes after the provider's own rules and leaves the rest to the status", () => {
    expect(refused("VM is being created, no capacity")).toBe("busy");
    expect(refused("sold out", 503)).toBeUndefined();
    expect(refused("bad disk size")).toBeUndefined();
  });
});

describe("answerTextFields and answerNumberFields", () => {
  it("declare each key with the answer schema's default", () => {
    const schema = z.object({ ...answerTextFields("a", "b"), ...answerNumberFields("n", "m") });
    expect(schema.parse({ a: "x", b: null, n: "3", m: "many" })).toEqual({ a: "x", b: "", n: 3, m: null });
    expect(schema.parse({})).toEqual({ a: "", b: "", n: null, m: null });
  });
});
