import { describe, expect, it } from "vitest";
import { environmentList, environmentRecord } from "./environment-list.js";

describe("environment lists", () => {
  it("a record becomes key/value pairs in its order, and reads back the same", () => {
    const variables = { SKYWARD_CLUSTER: "skyward-1a2b", PUBLIC_KEY: "ssh-ed25519 AAAA", EMPTY: "" };
    const list = environmentList(variables);
    expect(list).toEqual([
      { key: "SKYWARD_CLUSTER", value: "skyward-1a2b" },
      { key: "PUBLIC_KEY", value: "ssh-ed25519 AAAA" },
      { key: "EMPTY", value: "" },
    ]);
    expect(environmentRecord(list)).toEqual(variables);
  });

  it("an API's missing list is an empty environment, and a repeated key keeps its last value", () => {
    expect(environmentRecord(null)).toEqual({});
    expect(environmentRecord(undefined)).toEqual({});
    const repeated = [
      { key: "A", value: "1" },
      { key: "A", value: "2" },
    ];
    expect(environmentRecord(repeated)).toEqual({ A: "2" });
  });
});
