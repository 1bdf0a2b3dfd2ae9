/**
 * One error taxonomy for machine-renting APIs: every failed call is a {@link MachineProviderError}
 * whose `kind` says what failed and whose message says what to do about it. Errors are data (the kind,
 * the HTTP status, the scrubbed answer) raised as one class; a provider only says how to tell its
 * answers apart (`classify`), the base decides what each kind means: capacity, quota and price move on
 * to the next market, gone counts as deleted, busy is retried, the rest stop and are reported.
 */
import { answerMessage, ProviderApiError, type ProviderApiErrorOptions } from "../http/provider-http.js";

/**
 * What a failed call means:
 * - `capacity`: nothing free of that kind right now (another market or offer may have some);
 * - `quota`: the account's limit for that kind is reached;
 * - `price`: the price moved above what was offered or allowed (a bid lost, a cap exceeded);
 * - `auth`: the key is missing, wrong or revoked;
 * - `account`: the key is good, but this account may not use this (a pool, a region, a GPU type);
 * - `bad-request`: the request itself was refused (a bad image, size or option);
 * - `gone`: the instance no longer exists (deleted, discontinued, never made);
 * - `busy`: the instance cannot do that yet (deleting one still provisioning): try again shortly;
 * - `rate-limit`: too many requests, even after waiting as the API asked;
 * - `unavailable`: no answer, or the API failed (5xx): it may work later;
 * - `unknown-answer`: the API answered in a shape this provider does not know (never read as "nothing").
 */
export type MachineErrorKind =
  | "capacity"
  | "quota"
  | "price"
  | "auth"
  | "account"
  | "bad-request"
  | "gone"
  | "busy"
  | "rate-limit"
  | "unavailable"
  | "unknown-answer";

/** What a classifier sees of a failed call. */
export interface MachineErrorStructure {
  /** The HTTP status, when an answer came. */
  readonly statusCode: number | undefined;
  /** The message as the HTTP layer wrote it (with the API's own message at its end). */
  readonly message: string;
  /** The error answer's body (scrubbed of the key). */
  readonly answer: unknown;
}

/** Tells a provider's failed calls apart; undefined leaves the decision to the status ({@link kindOfStatus}). */
export type MachineErrorClassifier = (failure: MachineErrorStructure) => MachineErrorKind | undefined;

/** What the user does about each kind, appended to the message. */
const ADVICE: Readonly<Record<MachineErrorKind, string>> = {
  capacity: "try another region, accelerator or allocation, or again later",
  quota: "raise the account's quota in the provider's console, or ask for fewer or smaller machines",
  price: "raise maxHourlyCost or choose a cheaper offer",
  auth: "",
  account: "this account may not use what was asked: check its verification, billing or allowed regions",
  "bad-request": "",
  gone: "",
  busy: "",
  "rate-limit": "",
  unavailable: "",
  "unknown-answer": "the API may have changed: report it with this message",
};

/**
 * The kind a status means by itself: 401 and 403 auth (a provider whose 403 means "this account may
 * not use that" says so in its classifier, which sees the answer), 402 price, 404/410 gone, 409/423
 * busy, 429 rate-limit, other 4xx bad-request, 5xx and no answer unavailable.
 */
export function kindOfStatus(statusCode: number | undefined): MachineErrorKind {
  if (statusCode === undefined || statusCode >= 500) return "unavailable";
  if (statusCode === 401 || statusCode === 403) return "auth";
  if (statusCode === 402) return "price";
  if (statusCode === 404 || statusCode === 410) return "gone";
  if (statusCode === 409 || statusCode === 423) return "busy";
  if (statusCode === 429) return "rate-limit";
  return "bad-request";
}

const machineErrorMarker = Symbol.for("skyward.error.machine-provider");

/** A failed call to a machine-renting API, with its {@link MachineErrorKind}. */
export class MachineProviderError extends ProviderApiError {
  /** What failed. */
  readonly kind: MachineErrorKind;

  constructor(
    options: ProviderApiErrorOptions & {
      readonly provider: string;
      readonly kind: MachineErrorKind;
      readonly name?: string;
    },
  ) {
    const advice = ADVICE[options.kind];
    super({
      ...options,
      message:
        advice && !options.message.includes(advice) ? `${options.message} (${advice})` : options.message,
      isRetryable:
        options.isRetryable === true ||
        ["capacity", "busy", "rate-limit", "unavailable"].includes(options.kind),
      name: options.name ?? "MachineProviderError",
    });
    Object.defineProperty(this, machineErrorMarker, { value: true });
    this.kind = options.kind;
  }

  /** True for a {@link MachineProviderError} of any provider, from any copy of this package. */
  static override isInstance(error: unknown): error is MachineProviderError {
    return (
      typeof error === "object" &&
      error !== null &&
      (error as Record<symbol, unknown>)[machineErrorMarker] === true
    );
  }
}

/**
 * The `createError` of a provider's API ({@link defineProviderApi}): each failure classified once,
 * where it happens, by the provider's `classify` and else by its status ({@link kindOfStatus}).
 */
export function machineErrorFactory(options: {
  readonly provider: string;
  readonly classify?: MachineErrorClassifier;
  /** The subclass to make (a provider's own name for its errors); default {@link MachineProviderError}. */
  readonly create?: (
    options: ProviderApiErrorOptions & { readonly kind: MachineErrorKind },
  ) => MachineProviderError;
}): (failure: ProviderApiErrorOptions) => MachineProviderError {
  return (failure) => {
    const kind = failure.unknownAnswer
      ? "unknown-answer"
      : (options.classify?.({
          statusCode: failure.statusCode,
          message: failure.message,
          answer: failure.answer,
        }) ?? kindOfStatus(failure.statusCode));
    const made = { ...failure, kind, message: accountMessage(kind, failure) };
    return options.create
      ? options.create(made)
      : new MachineProviderError({ ...made, provider: options.provider });
  };
}

/**
 * The HTTP layer words every 401 and 403 as a rejected key; one the provider classified `account` (a
 * valid key this account may not use for that, RunPod's 403) says so, with the API's own words.
 */
function accountMessage(kind: MachineErrorKind, failure: ProviderApiErrorOptions): string {
  if (kind !== "account" || (failure.statusCode !== 401 && failure.statusCode !== 403))
    return failure.message;
  return failure.message
    .replace(/rejected the API key \(HTTP (\d+)\)/, "refused this account (HTTP $1)")
    .replace(
      /: set \S+ to a valid key or pass apiKey$/,
      `: ${answerMessage(failure.answer) ?? "access denied"}`,
    );
}

/** The kind of any error: a {@link MachineProviderError}'s own, else by its status, else undefined (not an API error). */
export function machineErrorKind(error: unknown): MachineErrorKind | undefined {
  if (MachineProviderError.isInstance(error)) return error.kind;
  if (ProviderApiError.isInstance(error)) return kindOfStatus(error.statusCode);
  return undefined;
}

/**
 * A {@link MachineProviderError} for a provider whose calls go through a cloud's own SDK (AWS, GCP),
 * not {@link machineErrorFactory}: the SDK's error kept as its `cause` (not enumerable: out of JSON).
 */
export function machineError(
  provider: string,
  kind: MachineErrorKind,
  message: string,
  options: { readonly statusCode?: number | undefined; readonly cause?: unknown } = {},
): MachineProviderError {
  const error = new MachineProviderError({
    provider,
    kind,
    message,
    ...(options.statusCode !== undefined ? { statusCode: options.statusCode } : {}),
  });
  if (options.cause !== undefined)
    Object.defineProperty(error, "cause", { value: options.cause, enumerable: false, configurable: true });
  return error;
}
