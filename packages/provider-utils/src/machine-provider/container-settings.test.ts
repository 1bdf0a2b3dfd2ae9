import { describe, expect, it } from "vitest";
import { z } from "zod";
import { containerSettingsSchema } from "./container-settings.js";

const schema = containerSettingsSchema({
  /** The API key, documented again by the provider. */
  apiKey: z.string().min(1).optional(),
  diskGb: z.number().int().default(50),
});

describe("containerSettingsSchema", () => {
  it("holds the HTTP settings, the containers' ones and the provider's, with their defaults", () => {
    expect(schema.parse({ apiKey: "k", keysDirectory: "/keys", env: { A: "1" } })).toEqual({
      apiKey: "k",
      maxRetries: 4,
      retryDelayMs: 1000,
      requestTimeoutMs: 30_000,
      env: { A: "1" },
      keysDirectory: "/keys",
      diskGb: 50,
    });
    expect(schema.parse({})).toMatchObject({ env: {}, diskGb: 50 });
  });

  it("refuses every other key by name, and checks each one it holds", () => {
    const unknown = schema.safeParse({ diskGB: 10 });
    expect(unknown.error?.issues).toMatchObject([{ code: "unrecognized_keys", keys: ["diskGB"] }]);
    const wrong = schema.safeParse({ env: { "1A": "x" }, diskGb: 1.5, maxRetries: -1 });
    expect(wrong.error?.issues.map((issue) => issue.path.join("."))).toEqual(
      expect.arrayContaining(["env.1A", "diskGb", "maxRetries"]),
    );
  });
});
