/**
 * Compute Engine's failures in the machine-provider base's taxonomy (`MachineProviderError` and its
 * kinds): a quota (HTTP 403 `quotaExceeded`, or an operation's `QUOTA_EXCEEDED`), no capacity in the
 * zone (`ZONE_RESOURCE_POOL_EXHAUSTED`…), credentials, a project that may not use the API, a bad
 * request, a VM gone, rate limits and Google's own failures
 * (https://cloud.google.com/compute/docs/troubleshooting/troubleshooting-resource-availability,
 * https://cloud.google.com/compute/docs/troubleshooting/troubleshooting-quota,
 * https://cloud.google.com/apis/design/errors#handling_errors).
 */
import { ConfigurationError, ProvisionError } from "@skyward/core";
import { type MachineErrorKind, type MachineProviderError, machineError } from "@skyward/provider-utils";

const PROVIDER = "gcp";

/** Operation and error codes that mean "no capacity here now". */
export const CAPACITY_CODES = /ZONE_RESOURCE_POOL_EXHAUSTED|RESOURCE_POOL_EXHAUSTED|STOCKOUT|UNAVAILABLE/;

/** The gRPC-style code of a client error (5 NOT_FOUND, 6 ALREADY_EXISTS, …) and its HTTP status. */
export function errorStatus(error: unknown): { code: number | undefined; http: number | undefined } {
  const record = error as { code?: unknown; httpStatusCode?: unknown } | null;
  return {
    code: typeof record?.code === "number" ? record.code : undefined,
    http: typeof record?.httpStatusCode === "number" ? record.httpStatusCode : undefined,
  };
}

/** True for "the resource was not found" (HTTP 404). */
export function isNotFound(error: unknown): boolean {
  const { code, http } = errorStatus(error);
  return http === 404 || code === 5;
}

/** True for "it already exists" (HTTP 409). */
export function isAlreadyExists(error: unknown): boolean {
  const { code, http } = errorStatus(error);
  return http === 409 || code === 6;
}

/** Where to ask for more quota. */
export function quotaPage(project: string): string {
  return `https://console.cloud.google.com/iam-admin/quotas?project=${encodeURIComponent(project)}`;
}

/**
 * The quota a Compute Engine error says was exceeded (HTTP 403 `quotaExceeded`, or an operation's
 * `QUOTA_EXCEEDED`), from its message "Quota 'METRIC' exceeded. …"; undefined for other errors.
 */
export function exceededQuota(error: unknown): { metric: string; message: string } | undefined {
  const message = error instanceof Error ? error.message : String(error ?? "");
  // Up to the end of Google's sentence: not the advice a MachineProviderError adds in brackets.
  const found = /Quota '([A-Z0-9_]+)' exceeded[^"\n(]*/.exec(message);
  const reason = reasonOf(error);
  if (found?.[1]) return { metric: found[1], message: found[0].replace(/\s+/g, " ").trim() };
  if (reason === "quotaExceeded" || /QUOTA_EXCEEDED|quotaExceeded/.test(message))
    return { metric: "unknown", message };
  return undefined;
}

/** The first `errors[].reason` of a Google API error (`quotaExceeded`, `accessNotConfigured`…). */
function reasonOf(error: unknown): string | undefined {
  const reason = (error as { errors?: { reason?: unknown }[] } | null)?.errors?.[0]?.reason;
  return typeof reason === "string" ? reason : undefined;
}

/** A {@link MachineProviderError} of Compute Engine, keeping what caused it. */
export function gcpError(
  kind: MachineErrorKind,
  message: string,
  options: { statusCode?: number | undefined; cause?: unknown } = {},
): MachineProviderError {
  return machineError(PROVIDER, kind, message, options);
}

/** The error for a quota reached: kind `quota` (not retried), naming the quota and where to raise it. */
export function quotaError(project: string, detail: string, cause?: unknown): MachineProviderError {
  return gcpError(
    "quota",
    `Compute Engine quota reached: ${detail}; request an increase at ${quotaPage(project)}`,
    { statusCode: 403, cause },
  );
}

/** What a client error means, by its reason, message and status. */
export function kindOfGcpError(error: unknown): MachineErrorKind {
  const { code, http } = errorStatus(error);
  const message = error instanceof Error ? error.message : String(error ?? "");
  const reason = reasonOf(error);
  if (exceededQuota(error) !== undefined) return "quota";
  if (CAPACITY_CODES.test(message)) return "capacity";
  if (reason === "rateLimitExceeded" || reason === "userRateLimitExceeded" || http === 429)
    return "rate-limit";
  // The API not enabled in the project, or its billing off: the credentials are good, the project may not.
  if (
    reason === "accessNotConfigured" ||
    reason === "billingNotEnabled" ||
    /SERVICE_DISABLED|BILLING_DISABLED/.test(message)
  )
    return "account";
  if (http === 401 || http === 403 || code === 7 || code === 16) return "auth";
  if (isNotFound(error)) return "gone";
  if (http !== undefined && http >= 500) return "unavailable";
  if (code === 14 || code === 4 || (http === undefined && code === undefined)) return "unavailable";
  return "bad-request";
}

/** The kind of an operation's error code (`QUOTA_EXCEEDED`, `ZONE_RESOURCE_POOL_EXHAUSTED`…). */
export function kindOfOperationError(code: string): MachineErrorKind {
  if (code === "QUOTA_EXCEEDED") return "quota";
  if (CAPACITY_CODES.test(code)) return "capacity";
  return "bad-request";
}

/** A client error as a {@link MachineProviderError} naming the call (or the signal's reason once aborted). */
export function translateGcpError(
  error: unknown,
  what: string,
  signal?: AbortSignal,
  project?: string,
): Error {
  if (signal?.aborted)
    return signal.reason instanceof Error ? signal.reason : new Error(String(signal.reason));
  if (ProvisionError.isInstance(error) || ConfigurationError.isInstance(error)) return error as Error;
  const { http } = errorStatus(error);
  const message = error instanceof Error ? error.message : String(error);
  const kind = kindOfGcpError(error);
  // A quota reached is answered with 403 too: no credential problem, a quota to raise.
  const quota = exceededQuota(error);
  if (quota !== undefined && project !== undefined)
    return quotaError(project, `${what}: ${quota.message}`, error);
  const hint =
    kind === "auth"
      ? " (check the credentials and the project's IAM roles)"
      : kind === "account"
        ? " (enable the Compute Engine API and billing for the project)"
        : "";
  return gcpError(kind, `${what}: ${message}${hint}`, { statusCode: http, cause: error });
}
