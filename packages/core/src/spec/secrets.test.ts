import { describe, expect, it } from "vitest";
import { ConfigurationError } from "../errors/errors.js";
import { contentHash } from "./image.js";
import { spec } from "./spec.js";

function issuesOf(attempt: () => unknown): { path: string; message: string }[] {
  try {
    attempt();
  } catch (error) {
    if (ConfigurationError.isInstance(error)) return [...error.issues];
    throw error;
  }
  throw new Error("expected a ConfigurationError");
}

describe("secrets on the spec", () => {
  it("keeps each secret's source, a plain value becoming { value }", () => {
    const validated = spec({
      secrets: {
        HF_TOKEN: { env: "HF_TOKEN" },
        DB_PASSWORD: { file: "~/.db-password" },
        API_KEY: "literal-1",
      },
    });
    expect(validated.secrets).toEqual({
      HF_TOKEN: { env: "HF_TOKEN" },
      DB_PASSWORD: { file: "~/.db-password" },
      API_KEY: { value: "literal-1" },
    });
    expect(spec({}).secrets).toEqual({});
  });

  it("refuses names a task cannot read from its environment, and the runtime's own", () => {
    expect(issuesOf(() => spec({ secrets: { "HF-TOKEN": "x", SKYWARD_TOKEN: "y" } }))).toEqual([
      { path: "secrets.HF-TOKEN", message: expect.stringMatching(/environment variable name/) },
      { path: "secrets.SKYWARD_TOKEN", message: "SKYWARD_* names are the runtime's own" },
    ]);
  });

  it("refuses a source of another shape without echoing what was given", () => {
    const issues = issuesOf(() =>
      spec({ secrets: { HF_TOKEN: { env: "HF_TOKEN", file: "hf-looking-value" } as never } }),
    );
    expect(issues.map((issue) => issue.path)).toEqual(["secrets.HF_TOKEN"]);
    expect(JSON.stringify(issues)).not.toContain("hf-looking-value");
    expect(issuesOf(() => spec({ secrets: { A: 42 as never } }))[0]?.path).toBe("secrets.A");
  });

  it("is no part of the image: the image's hash is the same with or without secrets", () => {
    const plain = spec({ image: { pip: ["numpy"] } });
    const withSecrets = spec({ image: { pip: ["numpy"] }, secrets: { HF_TOKEN: "one-value" } });
    expect(contentHash(withSecrets.image, "1.0.0")).toBe(contentHash(plain.image, "1.0.0"));
  });
});
