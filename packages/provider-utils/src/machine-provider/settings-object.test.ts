import { describe, expect, expectTypeOf, it } from "vitest";
import { z } from "zod";
import { sshUserSchema } from "./machine-settings.js";
import { machineSettingsObject } from "./settings-object.js";

type Seam = (address: { id: string }) => { host: string; port: number };

describe("machineSettingsObject", () => {
  const schema = machineSettingsObject<Seam>()("https://api.example.com/v1", {
    region: z.string({ error: "expected a region" }).optional(),
    sshUser: sshUserSchema("ubuntu"),
  });

  it("holds the base's fields with their defaults and the provider's own", () => {
    expect(schema.parse({ region: "EU" })).toMatchObject({
      apiUrl: "https://api.example.com/v1",
      maxRetries: 4,
      region: "EU",
      sshUser: "ubuntu",
    });
    expect(schema.parse({ apiUrl: "https://example.test/api//" }).apiUrl).toBe("https://example.test/api");
  });

  it("refuses an unknown key by name, and each field's bad value with its own message", () => {
    const unknown = schema.safeParse({ regoin: "EU" });
    expect(unknown.success).toBe(false);
    expect(unknown.error?.issues[0]).toMatchObject({ code: "unrecognized_keys", keys: ["regoin"] });
    const bad = schema.safeParse({ region: 3, sshAddress: "10.0.0.1" });
    expect(bad.error?.issues.map(({ path, message }) => [path.join("."), message])).toEqual([
      ["sshAddress", "expected a function (for tests only)"],
      ["region", "expected a region"],
    ]);
  });

  it("types the input as the settings a user writes: the seam's function, the provider's fields", () => {
    expectTypeOf<z.input<typeof schema>["sshAddress"]>().toEqualTypeOf<Seam | undefined>();
    expectTypeOf<z.input<typeof schema>["region"]>().toEqualTypeOf<string | undefined>();
  });
});
