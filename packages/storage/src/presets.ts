/**
 * Presets for the object stores the Python project names (`sky.storage.S3`, `R2`, `GCS`, `Wasabi`,
 * `Backblaze`, `Hyperstack`): each fills in the endpoint, region and addressing of one service.
 * Endpoints from each service's documentation:
 * - S3: https://docs.aws.amazon.com/general/latest/gr/s3.html (`s3.<region>.amazonaws.com`)
 * - R2: https://developers.cloudflare.com/r2/api/s3/api/ (`<account>.r2.cloudflarestorage.com`, region `auto`)
 * - GCS: https://cloud.google.com/storage/docs/interoperability (`storage.googleapis.com`, HMAC keys)
 * - Wasabi: https://docs.wasabi.com/docs/what-are-the-service-urls-for-wasabi-s-different-storage-regions
 *   (`s3.<region>.wasabisys.com`)
 * - Backblaze B2: https://www.backblaze.com/docs/cloud-storage-s3-compatible-api
 *   (`s3.<region>.backblazeb2.com`, the application key id and key)
 * - Hyperstack: https://docs.hyperstack.cloud/docs/api-reference/section-object-storage (S3-compatible
 *   storage whose access keys are made in its console or API; the endpoint is the region's, as shown there).
 */
import { ConfigurationError } from "@skyward/core";
import { Storage } from "./storage.js";
import type { Credential } from "./types.js";

function required<T>(preset: string, field: string, value: T | undefined, expected: string): T {
  if (value === undefined || value === "")
    throw new ConfigurationError({
      issues: [{ path: `${preset}.${field}`, message: `expected ${expected}` }],
    });
  return value;
}

function regionName(preset: string, region: string | undefined): string {
  const value = required(preset, "region", region, "a region name");
  if (!/^[a-z0-9][a-z0-9-]*$/i.test(value))
    throw new ConfigurationError({
      issues: [
        {
          path: `${preset}.region`,
          message: `expected a region name (letters, digits, '-'), got ${JSON.stringify(value)}`,
        },
      ],
    });
  return value;
}

/** Settings of {@link S3}. */
export interface S3Options {
  /** The bucket's region. Default: `AWS_REGION`, else `us-east-1`. */
  readonly region?: string;
  /** An access key id; without it the AWS default credential chain (environment, profile, role). */
  readonly accessKey?: Credential;
  /** The secret access key, with `accessKey`. */
  readonly secretKey?: Credential;
  /** A session token for temporary credentials. */
  readonly sessionToken?: Credential;
  /** Another endpoint (a VPC endpoint, or a local S3 such as moto); path-style addressing then. */
  readonly endpoint?: string;
}

/** Amazon S3. */
export function S3(options: S3Options = {}): Storage {
  const region = regionName("S3", options.region ?? process.env.AWS_REGION ?? "us-east-1");
  return new Storage({
    endpoint: options.endpoint ?? `https://s3.${region}.amazonaws.com`,
    region,
    pathStyle: options.endpoint !== undefined,
    ...(options.accessKey !== undefined ? { accessKey: options.accessKey } : {}),
    ...(options.secretKey !== undefined ? { secretKey: options.secretKey } : {}),
    ...(options.sessionToken !== undefined ? { sessionToken: options.sessionToken } : {}),
  });
}

/** Settings of {@link R2}. */
export interface R2Options {
  /** The Cloudflare account id. */
  readonly accountId: string;
  /** The R2 API token's access key id. */
  readonly accessKey: Credential;
  /** The R2 API token's secret access key. */
  readonly secretKey: Credential;
}

/** Cloudflare R2. */
export function R2(options: R2Options): Storage {
  const account = required("R2", "accountId", options?.accountId, "the Cloudflare account id");
  if (!/^[a-z0-9]+$/i.test(account))
    throw new ConfigurationError({
      issues: [{ path: "R2.accountId", message: "expected an account id (letters and digits)" }],
    });
  return new Storage({
    endpoint: `https://${account}.r2.cloudflarestorage.com`,
    region: "auto",
    accessKey: required("R2", "accessKey", options.accessKey, "an access key id"),
    secretKey: required("R2", "secretKey", options.secretKey, "a secret access key"),
  });
}

/** Settings of {@link GCS}. */
export interface GcsOptions {
  /** An HMAC key's access id. */
  readonly accessKey: Credential;
  /** The HMAC key's secret. */
  readonly secretKey: Credential;
}

/** Google Cloud Storage through its S3-compatible XML API, with HMAC keys. */
export function GCS(options: GcsOptions): Storage {
  return new Storage({
    endpoint: "https://storage.googleapis.com",
    region: "auto",
    accessKey: required("GCS", "accessKey", options?.accessKey, "an HMAC access id"),
    secretKey: required("GCS", "secretKey", options?.secretKey, "an HMAC secret"),
  });
}

/** Settings of {@link Wasabi}. */
export interface WasabiOptions {
  /** The bucket's region (`us-east-1`, `eu-central-1`, …). */
  readonly region: string;
  /** The access key. */
  readonly accessKey: Credential;
  /** The secret key. */
  readonly secretKey: Credential;
}

/** Wasabi. */
export function Wasabi(options: WasabiOptions): Storage {
  const region = regionName("Wasabi", options?.region);
  return new Storage({
    endpoint: `https://s3.${region}.wasabisys.com`,
    region,
    accessKey: required("Wasabi", "accessKey", options.accessKey, "an access key"),
    secretKey: required("Wasabi", "secretKey", options.secretKey, "a secret key"),
  });
}

/** Settings of {@link Backblaze}. */
export interface BackblazeOptions {
  /** The bucket's region (`us-west-004`, `eu-central-003`, …). */
  readonly region: string;
  /** The application key's id. */
  readonly keyId: Credential;
  /** The application key. */
  readonly appKey: Credential;
}

/** Backblaze B2 through its S3-compatible API. */
export function Backblaze(options: BackblazeOptions): Storage {
  const region = regionName("Backblaze", options?.region);
  return new Storage({
    endpoint: `https://s3.${region}.backblazeb2.com`,
    region,
    accessKey: required("Backblaze", "keyId", options.keyId, "an application key id"),
    secretKey: required("Backblaze", "appKey", options.appKey, "an application key"),
  });
}

/** Settings of {@link Hyperstack}. */
export interface HyperstackOptions {
  /** The object-storage endpoint of the bucket's region, as Hyperstack's console shows it (`https://…`). */
  readonly endpoint: string;
  /** The region name. */
  readonly region: string;
  /** An object-storage access key (made in Hyperstack's console or with its API). */
  readonly accessKey: Credential;
  /** Its secret key. */
  readonly secretKey: Credential;
}

/**
 * Hyperstack's S3-compatible object storage. Unlike the Python project's preset it does not mint
 * access keys with the Hyperstack API key: give the endpoint and an access key pair.
 */
export function Hyperstack(options: HyperstackOptions): Storage {
  return new Storage({
    endpoint: required(
      "Hyperstack",
      "endpoint",
      options?.endpoint,
      "the region's object-storage endpoint URL",
    ),
    region: regionName("Hyperstack", options.region),
    pathStyle: true,
    accessKey: required("Hyperstack", "accessKey", options.accessKey, "an object-storage access key"),
    secretKey: required("Hyperstack", "secretKey", options.secretKey, "its secret key"),
  });
}
