/**
 * `secrets` on a spec: the environment variables a task needs that must never be written anywhere
 * (tokens, passwords). The spec names each one and says where its value comes from; the values are
 * read on the client when the pool starts (`pool/secret-values.ts`) and travel to the workers only
 * over their authenticated connection. This module only validates the shape: it reads nothing.
 */
import { z } from "zod";

/** Where a secret's value comes from: the client's environment, a file on the client, or the value itself. */
export type SecretSource =
  /** The client's environment variable of this name, read at pool start. */
  | { readonly env: string }
  /** The contents of this file on the client (one trailing newline dropped), read at pool start. */
  | { readonly file: string }
  /** The value itself (from code: never written in `skyward.toml`). */
  | { readonly value: string };

/** One secret as written: its value as a string, or where to read it. */
export type SecretInput = string | SecretSource;

/** `secrets` as written: environment variable name → value or source. */
export type SecretsInput = Readonly<Record<string, SecretInput>>;

/** `secrets` validated: environment variable name → source. */
export type Secrets = Readonly<Record<string, SecretSource>>;

/** Names a task can read from `os.environ`; `SKYWARD_*` is the runtime's own. */
const SECRET_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

const SOURCE_SHAPE = 'expected a string, { env: "NAME" }, { file: "path" } or { value: "…" }';

/** One source, read by hand: a failure says what was expected, never what was given (it may be the secret). */
function readSource(source: unknown): SecretSource | undefined {
  if (typeof source === "string") return { value: source };
  if (typeof source !== "object" || source === null || Array.isArray(source)) return undefined;
  const entries = Object.entries(source);
  const [key, value] = entries[0] ?? [];
  if (entries.length !== 1 || typeof value !== "string") return undefined;
  if (key === "env" && SECRET_NAME.test(value)) return { env: value };
  if (key === "file" && value !== "") return { file: value };
  if (key === "value") return { value };
  return undefined;
}

const sourceSchema = z.unknown().transform((source, context): SecretSource => {
  const read = readSource(source);
  if (read) return Object.freeze(read);
  context.addIssue({ code: "custom", message: SOURCE_SHAPE });
  return z.NEVER;
});

/** Validates `secrets` into {@link Secrets}: a plain value becomes `{ value }`. */
export const secretsSchema = z
  .record(z.string(), sourceSchema, { error: "expected a table of secret names" })
  .superRefine((secrets, context) => {
    for (const name of Object.keys(secrets)) {
      if (!SECRET_NAME.test(name)) {
        context.addIssue({
          code: "custom",
          path: [name],
          message: "expected an environment variable name (letters, digits and _, not starting with a digit)",
        });
      } else if (name.startsWith("SKYWARD_")) {
        context.addIssue({ code: "custom", path: [name], message: "SKYWARD_* names are the runtime's own" });
      }
    }
  })
  .transform(
    (secrets): Secrets =>
      Object.freeze(Object.fromEntries(Object.entries(secrets).map(([name, source]) => [name, source]))),
  );

/** A secret's source in words, for errors and docs (never its value). */
export function describeSecretSource(source: SecretSource): string {
  if ("env" in source) return `the environment variable ${source.env}`;
  if ("file" in source) return `the file ${JSON.stringify(source.file)}`;
  return "a value given in code";
}
