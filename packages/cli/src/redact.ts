/**
 * Keeps secrets out of the terminal. Providers are supposed to never print an API key, but the CLI
 * also runs third-party provider code and prints their error messages: every byte it writes goes
 * through a {@link Redactor} that knows the secrets of this run (credential-looking environment
 * variables, credential-looking provider settings, private keys) and masks them.
 */

/** Environment variable names that hold credentials (`RUNPOD_API_KEY`, `AWS_SECRET_ACCESS_KEY`, …). */
const SECRET_ENV_NAME = /(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH)/i;
/** Setting names that hold credentials (`apiKey`, `api_key`, `token`, `privateKey`, …). */
const SECRET_SETTING_NAME = /(?:key|token|secret|password|passwd|credential|auth)/i;
/** Shorter values are not masked: too likely to match ordinary output. */
const MIN_SECRET_LENGTH = 6;

/** What replaces a secret in output. */
export const REDACTED = "[redacted]";

/** Masks known secrets in text. */
export class Redactor {
  readonly #secrets = new Set<string>();

  /** Remembers `value` as a secret when it is long enough to be one. */
  add(value: string): void {
    const trimmed = value.trim();
    if (trimmed.length >= MIN_SECRET_LENGTH) this.#secrets.add(trimmed);
  }

  /** Remembers the values of credential-looking environment variables. */
  addEnvironment(env: NodeJS.ProcessEnv): void {
    for (const [name, value] of Object.entries(env)) {
      if (value !== undefined && SECRET_ENV_NAME.test(name)) this.add(value);
    }
  }

  /** Remembers every string under a credential-looking key of a settings object, at any depth. */
  addSettings(settings: unknown): void {
    const visit = (value: unknown, secret: boolean): void => {
      if (typeof value === "string") {
        if (secret) this.add(value);
      } else if (Array.isArray(value)) {
        for (const item of value) visit(item, secret);
      } else if (typeof value === "object" && value !== null) {
        for (const [key, item] of Object.entries(value)) visit(item, secret || SECRET_SETTING_NAME.test(key));
      }
    };
    visit(settings, false);
  }

  /** `text` with every known secret replaced by {@link REDACTED}; longest first, so no part survives. */
  redact(text: string): string {
    let out = text;
    for (const secret of [...this.#secrets].sort((a, b) => b.length - a.length)) {
      if (out.includes(secret)) out = out.split(secret).join(REDACTED);
    }
    return out;
  }
}

type Write = typeof process.stdout.write;

/**
 * Routes every write to `stream` through `redactor` — the CLI's own output and whatever provider code
 * prints with `console`. Returns a function that restores the original `write`.
 */
export function redactStream(stream: NodeJS.WriteStream, redactor: Redactor): () => void {
  const original = stream.write;
  const write = function (this: NodeJS.WriteStream, chunk: unknown, ...rest: unknown[]): boolean {
    const text = typeof chunk === "string" ? chunk : Buffer.from(chunk as Uint8Array).toString("utf8");
    return (original as (...args: unknown[]) => boolean).call(this, redactor.redact(text), ...rest);
  };
  stream.write = write as Write;
  return () => {
    stream.write = original;
  };
}
