import { describe, expect, it } from "vitest";
import { errorTable, LEFT_TO_STATUS } from "./error-table.js";

const classify = errorTable([
  LEFT_TO_STATUS,
  { status: [403], kind: "account" },
  { code: ["no_such_instance"], kind: "gone" },
  { status: [400], words: /sold out/i, kind: "capacity" },
]);

const failure = (statusCode: number | undefined, message: string, answer: unknown = undefined) => ({
  statusCode,
  message,
  answer,
});

describe("errorTable", () => {
  it("gives the kind of the first rule whose conditions all hold", () => {
    expect(classify(failure(403, "forbidden"))).toBe("account");
    expect(classify(failure(400, "GPU sold out"))).toBe("capacity");
    expect(classify(failure(400, "whatever", { error: "no_such_instance" }))).toBe("gone");
  });

  it("leaves to the status what no rule or a kind-less rule matches", () => {
    expect(classify(failure(404, "sold out"))).toBeUndefined();
    expect(classify(failure(503, "sold out"))).toBeUndefined();
    expect(classify(failure(undefined, "sold out"))).toBeUndefined();
    expect(classify(failure(429, "x", { error: "no_such_instance" }))).toBeUndefined();
    expect(classify(failure(400, "bad disk size"))).toBeUndefined();
  });

  it("reads the code from the answer's error field only", () => {
    expect(classify(failure(400, "no_such_instance", { error: 3 }))).toBeUndefined();
  });
});
