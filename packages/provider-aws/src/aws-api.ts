/**
 * The AWS SDK clients of one provider (one EC2 and one SSM client per region), the credential chain
 * with a clear error when it finds nothing, and the translation of AWS errors into Skyward's.
 */
import { EC2Client } from "@aws-sdk/client-ec2";
import { SSMClient } from "@aws-sdk/client-ssm";
import { defaultProvider } from "@aws-sdk/credential-provider-node";
import { ConfigurationError, NoCapacityError, ProvisionError } from "@skyward/core";
import type { AwsCredentials, ResolvedAwsSettings } from "./settings.js";

/** The provider's name in offers, errors and events. */
export const PROVIDER_NAME = "aws";

/** The SDK clients for one region. */
export interface AwsClients {
  readonly region: string;
  readonly ec2: EC2Client;
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

/** Wraps a credential source so that "nothing found" surfaces as {@link noCredentialsError}. */
function credentialSource(settings: ResolvedAwsSettings): CredentialIdentityProvider {
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
      clients = Object.freeze({ region, ec2: new EC2Client(config), ssm: new SSMClient(config) });
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
  if (candidate.$metadata !== undefined && typeof candidate.name === "string") return candidate.name;
  return typeof candidate.code === "string" ? candidate.code : undefined;
}

/** Codes meaning "no capacity now" (in this zone or market), or a quota: another zone, market or offer may work. */
const CAPACITY_CODES = new Set([
  "InsufficientInstanceCapacity",
  "InsufficientCapacity",
  "InsufficientHostCapacity",
  "InsufficientReservedInstanceCapacity",
  "SpotMaxPriceTooLow",
  "MaxSpotInstanceCountExceeded",
  "InstanceLimitExceeded",
  "VcpuLimitExceeded",
  "Unsupported",
]);

/** True when `error` says AWS has no capacity (or quota) for the request; see {@link CAPACITY_CODES}. */
export function isCapacityError(error: unknown): boolean {
  const code = awsErrorCode(error);
  return code !== undefined && CAPACITY_CODES.has(code);
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

/** The message of an error, without anything but AWS's own words (which carry no secrets). */
function describeError(error: unknown): string {
  if (error instanceof Error) return error.message || error.name;
  return String(error);
}

/**
 * Turns an error from an SDK call into Skyward's: the abort reason when `signal` aborted; the
 * credential error as is; capacity errors as `NoCapacityError`; everything else as `ProvisionError`
 * (retryable for throttling, server errors and network failures).
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
  const status = (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
  const retryable =
    !AUTH_CODES.has(code ?? "") &&
    (RETRYABLE_CODES.has(code ?? "") ||
      (status !== undefined && status >= 500) ||
      (status === undefined && code === undefined));
  const hint = AUTH_CODES.has(code ?? "") ? " (check the credentials and their IAM permissions)" : "";
  return new ProvisionError({
    provider: PROVIDER_NAME,
    message: `AWS ${action} failed: ${reason}${hint}`,
    isRetryable: retryable,
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
