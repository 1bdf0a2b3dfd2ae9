import { describe, expect, it } from "vitest";
import { SKYWARD_TAGS } from "../tags.js";
import { labelTags } from "./label-tags.js";

describe("labelTags", () => {
  const labels = labelTags("acme");
  const cluster = { offer: { id: "acme:42" }, poolId: "my pool" } as never;

  it("writes the name, the offer and the pool without blanks, and reads them back", () => {
    const label = labels.label("skyward-1a2b3c4d-0", cluster);
    expect(label).toBe("skyward-1a2b3c4d-0 acme:42 mypool");
    expect(labels.name(label)).toBe("skyward-1a2b3c4d-0");
    expect(labels.tags(label)).toMatchObject({
      [SKYWARD_TAGS.cluster]: "skyward-1a2b3c4d",
      [SKYWARD_TAGS.offer]: "acme:42",
      [SKYWARD_TAGS.pool]: "mypool",
      "acme:label": label,
    });
  });

  it("a label of another shape carries no tags but itself", () => {
    expect(labels.tags("my own box")).toEqual({ "acme:label": "my own box" });
    expect(labels.tags(null)).toEqual({});
  });
});
