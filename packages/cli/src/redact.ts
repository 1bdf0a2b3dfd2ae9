/**
 * Keeps secrets out of the terminal. Providers are supposed to never print an API key, but the CLI
 * also runs third-party provider code and prints their error messages: every byte it writes goes
 * through a {@link Redactor} (core's, shared with the pool's log file) that knows the secrets of this
 * run (credential-looking environment variables, credential-looking provider settings, private keys)
 * and masks them.
 */
import type { Redactor } from "@skyward/core/contract";

export { REDACTED, Redactor } from "@skyward/core/contract";

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
