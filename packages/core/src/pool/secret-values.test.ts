import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ConfigurationError } from "../errors/errors.js";
import { spec } from "../spec/spec.js";
import { resolveSecretValues } from "./secret-values.js";

let directory: string;

beforeEach(async () => {
  directory = await mkdtemp(join(tmpdir(), "skyward-secrets-"));
});

afterEach(async () => {
  await rm(directory, { recursive: true, force: true });
});

async function refusal(attempt: Promise<unknown>): Promise<ConfigurationError> {
  const error = await attempt.then(
    () => undefined,
    (thrown: unknown) => thrown,
  );
  if (!ConfigurationError.isInstance(error))
    throw new Error(`expected a ConfigurationError, got ${String(error)}`);
  return error;
}

describe("reading the secrets' values on the client", () => {
  it("reads each source: the environment, a file (its last newline dropped), a value", async () => {
    const file = join(directory, "db-password");
    await writeFile(file, "file-value-1\n");
    const validated = spec({
      secrets: { HF_TOKEN: { env: "SOME_TOKEN" }, DB_PASSWORD: { file }, API_KEY: "literal-value" },
    });
    const values = await resolveSecretValues([validated], { environment: { SOME_TOKEN: "env-value-1" } });
    expect(values.of(validated.secrets)).toEqual({
      HF_TOKEN: "env-value-1",
      DB_PASSWORD: "file-value-1",
      API_KEY: "literal-value",
    });
    expect([...values.values].sort()).toEqual(["env-value-1", "file-value-1", "literal-value"]);
    expect(values.of(spec({}).secrets)).toEqual({});
  });

  it("refuses every secret that cannot be read, by name, never quoting a value", async () => {
    const validated = spec({
      secrets: {
        HF_TOKEN: { env: "UNSET_TOKEN" },
        DB_PASSWORD: { file: join(directory, "missing") },
        EMPTY: { env: "EMPTY_TOKEN" },
        FINE: { env: "SET_TOKEN" },
      },
    });
    const error = await refusal(
      resolveSecretValues([validated], { environment: { EMPTY_TOKEN: "", SET_TOKEN: "set-value-9" } }),
    );
    expect(error.issues).toEqual([
      {
        path: "secrets.HF_TOKEN",
        message: "secret HF_TOKEN: the environment variable UNSET_TOKEN is not set",
      },
      {
        path: "secrets.DB_PASSWORD",
        message: `secret DB_PASSWORD: the file ${JSON.stringify(join(directory, "missing"))} cannot be read (ENOENT)`,
      },
      { path: "secrets.EMPTY", message: "secret EMPTY: the environment variable EMPTY_TOKEN is empty" },
    ]);
    expect(error.message).not.toContain("set-value-9");
  });

  it("names the spec of a secret when there are several specs", async () => {
    const first = spec({});
    const second = spec({ secrets: { WANDB_API_KEY: { env: "UNSET_WANDB" } } });
    const error = await refusal(resolveSecretValues([first, second], { environment: {} }));
    expect(error.issues.map((issue) => issue.path)).toEqual(["specs[1].secrets.WANDB_API_KEY"]);
  });
});
