/**
 * Keeps secrets out of output: a {@link Redactor} knows the secrets of a run (credential-looking
 * environment variables and settings, tokens, private keys) and masks them in any text. The pool's
 * log file and the `skyward` CLI both write through one.
 */
import type { SkywardEvent } from "./events.js";

/** Environment variable names that hold credentials (`RUNPOD_API_KEY`, `AWS_SECRET_ACCESS_KEY`, `HF_TOKEN`…). */
const SECRET_ENV_NAME = /(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH)/i;
/** Setting names that hold credentials (`apiKey`, `api_key`, `token`, `privateKey`, …). */
const SECRET_SETTING_NAME = /(?:key|token|secret|password|passwd|credential|auth)/i;
/** Shorter values are not masked: too likely to match ordinary output. */
const MIN_SECRET_LENGTH = 6;
/** Settings are walked this deep at most (and each object once), so any object graph is safe to pass. */
const MAX_SETTINGS_DEPTH = 8;

/** What replaces a secret in output. */
export const REDACTED = "[redacted]";

/** True when an environment variable of this name holds a credential. */
export function isSecretEnvironmentName(name: string): boolean {
  return SECRET_ENV_NAME.test(name);
}

/** Masks known secrets in text. */
export class Redactor {
  readonly #secrets = new Set<string>();
  #sorted: string[] | undefined;

  /**
   * Remembers `value` as a secret when it is long enough to be one; a secret declared as one (a
   * spec's `secrets`) passes `minimumLength` 1, so it is masked whatever its length.
   */
  add(value: string, minimumLength = MIN_SECRET_LENGTH): void {
    const trimmed = value.trim();
    if (trimmed.length >= Math.max(1, minimumLength) && !this.#secrets.has(trimmed)) {
      this.#secrets.add(trimmed);
      this.#sorted = undefined;
    }
  }

  /** Remembers the values of credential-looking environment variables. */
  addEnvironment(env: Readonly<Record<string, string | undefined>>): void {
    for (const [name, value] of Object.entries(env)) {
      if (value !== undefined && isSecretEnvironmentName(name)) this.add(value);
    }
  }

  /** Remembers every string under a credential-looking key of a settings object, at any depth. */
  addSettings(settings: unknown): void {
    const seen = new Set<object>();
    const visit = (value: unknown, secret: boolean, depth: number): void => {
      if (typeof value === "string") {
        if (secret) this.add(value);
        return;
      }
      if (typeof value !== "object" || value === null || depth > MAX_SETTINGS_DEPTH || seen.has(value))
        return;
      seen.add(value);
      if (Array.isArray(value)) {
        for (const item of value) visit(item, secret, depth + 1);
      } else {
        for (const [key, item] of Object.entries(value)) {
          visit(item, secret || SECRET_SETTING_NAME.test(key), depth + 1);
        }
      }
    };
    visit(settings, false, 0);
  }

  /** `text` with every known secret replaced by {@link REDACTED}; longest first, so no part survives. */
  redact(text: string): string {
    if (this.#secrets.size === 0) return text;
    this.#sorted ??= [...this.#secrets].sort((a, b) => b.length - a.length);
    let out = text;
    for (const secret of this.#sorted) {
      if (out.includes(secret)) out = out.split(secret).join(REDACTED);
    }
    return out;
  }
}

/**
 * `event` with `redact` applied to the free text it carries — an error's message, why a node was
 * lost or preempted, a provider's progress detail, why the pool scales, a failed task's message, an
 * output line — and the same object when it carries none (task starts, metrics, costs: the hot path
 * copies nothing).
 */
export function maskEventText(event: SkywardEvent, redact: (text: string) => string): SkywardEvent {
  switch (event.type) {
    case "error":
      return { ...event, message: redact(event.message) };
    case "node.lost":
    case "scaling":
      return { ...event, reason: redact(event.reason) };
    case "node.preempted":
      return event.reason === undefined ? event : { ...event, reason: redact(event.reason) };
    case "provision.progress":
      return event.detail === undefined ? event : { ...event, detail: redact(event.detail) };
    case "task.failed":
      return { ...event, error: { ...event.error, message: redact(event.error.message) } };
    case "log":
      return { ...event, line: redact(event.line) };
    default:
      return event;
  }
}
