/**
 * The AWS SDK clients of one provider (one EC2 and one SSM client per region), the credential chain
 * with a clear error when it finds nothing, and the translation of AWS errors into Skyward's.
 */
import { createHash } from "node:crypto";
import { EC2Client } from "@aws-sdk/client-ec2";
import { SSMClient } from "@aws-sdk/client-ssm";
import { defaultProvider } from "@aws-sdk/credential-provider-node";
import { ConfigurationError, NoCapacityError, ProvisionError } from "@skyward/core";
import { type MachineErrorKind, type MachineProviderError, machineError } from "@skyward/provider-utils";
import type { AwsCredentials, ResolvedAwsSettings } from "./settings.js";

/** The provider's name in offers, errors and events. */
export const PROVIDER_NAME = "aws";

/** The SDK clients for one region. */
export interface AwsClients {
  readonly region: string;
  readonly ec2: EC2Client;
  /**
   * The EC2 client `RunInstances` goes through: no SDK retries, since AWS answers a lack of capacity
   * with HTTP 500, which the SDK would repeat 4 times in every zone; the provider retries what it must.
   */
  readonly ec2Launch: EC2Client;
  readonly ssm: SSMClient;
}

const NO_CREDENTIALS_MESSAGE =
  "no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, configure a profile " +
  "(AWS_PROFILE or `profile`, in ~/.aws/credentials or ~/.aws/config), or pass `credentials` to AWS()";

/** The error for a credential chain that found nothing. Names no secret. */
export function noCredentialsError(cause?: unknown): ConfigurationError {
  return new ConfigurationError({
    issues: [{ path: "credentials", message: NO_CREDENTIALS_MESSAGE }],
    message: NO_CREDENTIALS_MESSAGE,
    cause,
  });
}

type CredentialIdentityProvider = () => Promise<AwsCredentials>;

const digest = (value: string) => createHash("sha256").update(value).digest("hex").slice(0, 16);

/**
 * What tells apart the AWS accounts a provider's calls act in, as the credential chain will find them,
 * for the offer cache's key (zone names and the instance types offered in each are the account's own).
 * Never a secret: a SHA-256 of the access key id given or in `AWS_ACCESS_KEY_ID` (an access key id
 * names its account), or the profile (the setting, else `AWS_PROFILE`) with the files it is read from.
 * Null where nothing says so before the chain is asked: a credentials function, SSO, roles.
 */
export function accountKeyOf(
  settings: ResolvedAwsSettings,
  env: NodeJS.ProcessEnv = process.env,
): string | null {
  const given = settings.credentials;
  if (given !== undefined) return typeof given === "function" ? null : `key ${digest(given.accessKeyId)}`;
  // The SDK's chain: a profile (set, or AWS_PROFILE) first, the environment's keys then skipped.
  const profile = settings.profile ?? (env.AWS_PROFILE?.trim() || undefined);
  if (profile !== undefined)
    return JSON.stringify([profile, env.AWS_SHARED_CREDENTIALS_FILE ?? null, env.AWS_CONFIG_FILE ?? null]);
  const key = env.AWS_ACCESS_KEY_ID?.trim();
  return key ? `key ${digest(key)}` : null;
}

/** Wraps a credential source so that "nothing found" surfaces as {@link noCredentialsError}. */
export function credentialSource(settings: ResolvedAwsSettings): CredentialIdentityProvider {
  const given = settings.credentials;
  if (given !== undefined && typeof given !== "function") {
    const fixed = Object.freeze({ ...given });
    return async () => fixed;
  }
  const chain: CredentialIdentityProvider =
    given ?? defaultProvider(settings.profile !== undefined ? { profile: settings.profile } : {});
  return async () => {
    let credentials: AwsCredentials;
    try {
      credentials = await chain();
    } catch (error) {
      throw noCredentialsError(error);
    }
    if (!credentials?.accessKeyId || !credentials.secretAccessKey) throw noCredentialsError();
    return credentials;
  };
}

/** Makes (once per region) the SDK clients of a provider. */
export function createClientFactory(settings: ResolvedAwsSettings): (region: string) => AwsClients {
  const credentials = credentialSource(settings);
  const byRegion = new Map<string, AwsClients>();
  return (region) => {
    let clients = byRegion.get(region);
    if (!clients) {
      const config = {
        region,
        credentials,
        maxAttempts: 4,
        ...(settings.endpoint !== undefined ? { endpoint: settings.endpoint } : {}),
      };
      clients = Object.freeze({
        region,
        ec2: new EC2Client(config),
        ec2Launch: new EC2Client({ ...config, maxAttempts: 1 }),
        ssm: new SSMClient(config),
      });
      byRegion.set(region, clients);
    }
    return clients;
  };
}

/** The AWS error code of an SDK error (`InsufficientInstanceCapacity`, `InvalidGroup.NotFound`…). */
export function awsErrorCode(error: unknown): string | undefined {
  if (typeof error !== "object" || error === null) return undefined;
  const candidate = error as { name?: unknown; Code?: unknown; code?: unknown; $metadata?: unknown };
  if (typeof candidate.Code === "string") return candidate.Code;
  // The SDK names a service error by its code; a socket's failure stays an `Error` with its own `code`.
  if (candidate.$metadata !== undefined && typeof candidate.name === "string" && candidate.name !== "Error")
    return candidate.name;
  return typeof candidate.code === "string" ? candidate.code : undefined;
}

/**
 * Codes meaning "no capacity now" in this zone or market: another zone, market or offer may work.
 * `UnfulfillableCapacity` is what EC2 Fleet and spot answer when no pool can serve the request
 * (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html).
 */
const CAPACITY_CODES = new Set([
  "InsufficientInstanceCapacity",
  "InsufficientCapacity",
  "InsufficientHostCapacity",
  "InsufficientReservedInstanceCapacity",
  "UnfulfillableCapacity",
  "SpotMaxPriceTooLow",
  "Unsupported",
]);

/**
 * Codes meaning a regional quota of the account is reached: no other zone or market of the region
 * helps (spot and on-demand quotas differ, but are both per region), only a quota increase
 * (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html,
 * https://docs.aws.amazon.com/ec2/latest/instancetypes/ec2-instance-quotas.html).
 */
const QUOTA_CODES = new Set([
  "VcpuLimitExceeded",
  "InstanceLimitExceeded",
  "MaxSpotInstanceCountExceeded",
  "MaxSpotFleetRequestCountExceeded",
]);

/** True when `error` says AWS has no capacity for the request here; see {@link CAPACITY_CODES}. */
export function isCapacityError(error: unknown): boolean {
  const code = awsErrorCode(error);
  return code !== undefined && CAPACITY_CODES.has(code);
}

/** True when `error` says a regional quota of the account is reached; see {@link QUOTA_CODES}. */
export function isQuotaError(error: unknown): boolean {
  const code = awsErrorCode(error);
  return code !== undefined && QUOTA_CODES.has(code);
}

/**
 * The Service Quotas quota an instance type counts against in a market, by its family's letters
 * (https://docs.aws.amazon.com/ec2/latest/instancetypes/ec2-instance-quotas.html): `g5.xlarge` on
 * demand counts against "Running On-Demand G and VT instances" (L-DB2E81BA), in vCPUs.
 */
export function quotaFor(
  instanceType: string,
  market: "spot" | "on-demand",
): { name: string; code?: string } {
  const family = /^([a-z]+?)(\d|$)/.exec(instanceType.split(".")[0] ?? "")?.[1] ?? "";
  const classes: Record<string, [label: string, onDemand?: string, spot?: string]> = {
    g: ["G and VT", "L-DB2E81BA", "L-3819A6DF"],
    vt: ["G and VT", "L-DB2E81BA", "L-3819A6DF"],
    p: ["P", "L-417A185B", "L-7212CCBC"],
    inf: ["Inf"],
    trn: ["Trn"],
    dl: ["DL"],
    f: ["F"],
    x: ["X"],
  };
  const [label, onDemand, spot] = classes[family] ?? [
    "Standard (A, C, D, H, I, M, R, T, Z)",
    "L-1216C47A",
    "L-34B43A08",
  ];
  const code = market === "spot" ? spot : onDemand;
  const name =
    market === "spot" ? `All ${label} Spot Instance Requests` : `Running On-Demand ${label} instances`;
  return code !== undefined ? { name, code } : { name };
}

/**
 * The error for a quota reached in `region`: not a lack of capacity, so not retried elsewhere in the
 * region; it says which quota to raise and where.
 */
export function quotaError(
  error: unknown,
  options: { instanceType: string; market: "spot" | "on-demand"; region: string },
): MachineProviderError {
  const quota = quotaFor(options.instanceType, options.market);
  return machineError(
    PROVIDER_NAME,
    "quota",
    `AWS quota reached in ${options.region} for ${options.market} ${options.instanceType} ` +
      `(${awsErrorCode(error)}: ${describeError(error)}): request a quota increase for ` +
      `"${quota.name}"${quota.code !== undefined ? ` (${quota.code})` : ""} in ${options.region} ` +
      "at https://console.aws.amazon.com/servicequotas/home/services/ec2/quotas",
    { statusCode: statusOf(error), cause: error },
  );
}

const AUTH_CODES = new Set([
  "AuthFailure",
  "UnauthorizedOperation",
  "InvalidClientTokenId",
  "SignatureDoesNotMatch",
  "OptInRequired",
  "ExpiredToken",
  "AccessDenied",
  "AccessDeniedException",
]);

const RETRYABLE_CODES = new Set([
  "RequestLimitExceeded",
  "Throttling",
  "ThrottlingException",
  "InternalError",
  "ServiceUnavailable",
  "Unavailable",
  "TimeoutError",
]);

/** True for throttling and AWS's own transient failures (not a lack of capacity): worth asking again. */
export function isTransientError(error: unknown): boolean {
  const code = awsErrorCode(error);
  if (code !== undefined && (CAPACITY_CODES.has(code) || QUOTA_CODES.has(code) || AUTH_CODES.has(code)))
    return false;
  const status = (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
  return RETRYABLE_CODES.has(code ?? "") || (status !== undefined && status >= 500);
}

/**
 * True when a mutating call may have been carried out though it failed: throttling and AWS's
 * transient errors (5xx), and a call that got no answer at all (a timeout, a connection reset).
 * Safe to ask again only with the same client token
 * (https://docs.aws.amazon.com/ec2/latest/devguide/ec2-api-idempotency.html).
 */
export function mayHaveBeenAccepted(error: unknown): boolean {
  if (isTransientError(error)) return true;
  if (!(error instanceof Error) || error.name === "AbortError") return false;
  if (error.name === "CredentialsProviderError" || ConfigurationError.isInstance(error)) return false;
  const status = (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
  const code = awsErrorCode(error);
  // No HTTP answer: a network error (ECONNRESET, socket hang up, ETIMEDOUT…), not one of AWS's codes.
  return status === undefined && (code === undefined || !/^[A-Z]/.test(code));
}

/** The message of an error, without anything but AWS's own words (which carry no secrets). */
function describeError(error: unknown): string {
  if (error instanceof Error) return error.message || error.name;
  return String(error);
}

/** The HTTP status of an SDK error, when an answer came. */
function statusOf(error: unknown): number | undefined {
  return (error as { $metadata?: { httpStatusCode?: number } } | null)?.$metadata?.httpStatusCode;
}

/** Codes meaning "this account may not do that here" (an opt-in region, a blocked or unverified account). */
const ACCOUNT_CODES = new Set(["OptInRequired", "Blocked", "PendingVerification"]);
/** Codes meaning "too many requests" (https://docs.aws.amazon.com/ec2/latest/devguide/ec2-api-throttling.html). */
const RATE_LIMIT_CODES = new Set(["RequestLimitExceeded", "Throttling", "ThrottlingException"]);

/**
 * The machine-provider base's kind of an AWS error
 * (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html): capacity, quota,
 * account, auth, rate-limit, gone (`….NotFound`),
 * unavailable (AWS's own failures, no answer), else bad-request.
 */
export function kindOfAwsError(error: unknown): MachineErrorKind {
  const code = awsErrorCode(error) ?? "";
  const status = statusOf(error);
  if (CAPACITY_CODES.has(code)) return "capacity";
  if (QUOTA_CODES.has(code)) return "quota";
  if (ACCOUNT_CODES.has(code)) return "account";
  if (AUTH_CODES.has(code)) return "auth";
  if (RATE_LIMIT_CODES.has(code)) return "rate-limit";
  if (code.endsWith(".NotFound")) return "gone";
  if (RETRYABLE_CODES.has(code) || (status !== undefined && status >= 500)) return "unavailable";
  // No answer at all: no code, or a socket's own (`ECONNREFUSED`, `ETIMEDOUT`, `EAI_AGAIN`…).
  if (status === undefined && (code === "" || /^E[A-Z_]+$/.test(code))) return "unavailable";
  return "bad-request";
}

/**
 * Turns an error from an SDK call into Skyward's: the abort reason when `signal` aborted; the
 * credential error as is; capacity errors as `NoCapacityError` (the pool's next offer); everything
 * else as a `MachineProviderError` of its kind ({@link kindOfAwsError}; retryable for throttling,
 * server errors and network failures).
 */
export function translateAwsError(error: unknown, action: string, signal?: AbortSignal): unknown {
  if (signal?.aborted) return signal.reason;
  if (
    ConfigurationError.isInstance(error) ||
    ProvisionError.isInstance(error) ||
    NoCapacityError.isInstance(error)
  )
    return error;
  if (error instanceof Error && error.name === "CredentialsProviderError") return noCredentialsError(error);
  const code = awsErrorCode(error);
  const reason =
    code && !describeError(error).includes(code) ? `${code}: ${describeError(error)}` : describeError(error);
  if (isCapacityError(error)) {
    return new NoCapacityError({
      attempts: [{ provider: PROVIDER_NAME, reason: `${action}: ${reason}` }],
      cause: error,
    });
  }
  const kind = kindOfAwsError(error);
  const hint =
    kind === "auth"
      ? " (check the credentials and their IAM permissions)"
      : kind === "quota"
        ? " (a regional quota of the account: request a quota increase at https://console.aws.amazon.com/servicequotas/home/services/ec2/quotas)"
        : kind === "rate-limit"
          ? " (EC2's API rate limit for the account, still refused after the SDK's retries)"
          : "";
  return machineError(PROVIDER_NAME, kind, `AWS ${action} failed: ${reason}${hint}`, {
    statusCode: statusOf(error),
    cause: error,
  });
}

/** Runs one SDK call, translating its errors with {@link translateAwsError}. */
export async function awsCall<T>(
  action: string,
  signal: AbortSignal | undefined,
  run: () => Promise<T>,
): Promise<T> {
  signal?.throwIfAborted();
  try {
    return await run();
  } catch (error) {
    throw translateAwsError(error, action, signal);
  }
}

/** Waits `ms` milliseconds, rejecting with the signal's reason when it aborts first. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
