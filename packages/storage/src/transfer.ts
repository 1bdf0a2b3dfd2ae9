/**
 * What the storage client checks and sends with its requests: names and transfer settings refused by
 * field before a byte is sent (S3's multipart limits), a 404 told apart, part uploads cancellable.
 */
import { PutObjectCommand, type S3Client, UploadPartCommand } from "@aws-sdk/client-s3";
import { ConfigurationError } from "@skyward/core";
import type { UploadOptions } from "./types.js";

export function invalid(path: string, message: string): ConfigurationError {
  return new ConfigurationError({ issues: [{ path, message }] });
}

export function checkName(what: "bucket" | "key", value: unknown): string {
  if (typeof value !== "string" || value === "")
    throw invalid(
      what,
      `expected a non-empty string, got ${typeof value === "string" ? '""' : typeof value}`,
    );
  return value;
}

// S3's multipart limits: https://docs.aws.amazon.com/AmazonS3/latest/userguide/qfacts.html
const minimumPartSize = 5 * 1024 * 1024;
const maximumPartSize = 5 * 1024 * 1024 * 1024;
const maximumParts = 10_000;
const defaultPartSize = 8 * 1024 * 1024;

/**
 * The part size and concurrency of one upload, checked before a byte is sent: a part size S3 rejects
 * or too small for the object would otherwise fail the upload only after up to 50 GB had gone.
 */
export function transferSettings(
  size: number | undefined,
  options: Pick<UploadOptions, "partSize" | "concurrency">,
): { partSize: number; concurrency: number } {
  const { partSize, concurrency } = options;
  if (
    partSize !== undefined &&
    (!Number.isSafeInteger(partSize) || partSize < minimumPartSize || partSize > maximumPartSize)
  )
    throw invalid(
      "partSize",
      `expected a whole number of bytes from ${minimumPartSize} (5 MiB) to ${maximumPartSize} (5 GiB), got ${partSize}`,
    );
  if (concurrency !== undefined && (!Number.isSafeInteger(concurrency) || concurrency < 1))
    throw invalid("concurrency", `expected a whole number of at least 1, got ${concurrency}`);
  const chosen = partSize ?? Math.max(defaultPartSize, Math.ceil((size ?? 0) / maximumParts));
  if (size !== undefined && Math.ceil(size / chosen) > maximumParts)
    throw invalid(
      "partSize",
      `${size} bytes in parts of ${chosen} would take ${Math.ceil(size / chosen)} parts; S3 allows ${maximumParts}: give at least ${Math.ceil(size / maximumParts)}`,
    );
  return { partSize: chosen, concurrency: concurrency ?? 4 };
}

export function isNotFound(error: unknown): boolean {
  const candidate = error as { name?: string; $metadata?: { httpStatusCode?: number } };
  return (
    candidate?.name === "NotFound" ||
    candidate?.name === "NoSuchKey" ||
    candidate?.$metadata?.httpStatusCode === 404
  );
}

/**
 * `client` sending its object and part uploads with `signal` (cancelled when it aborts); every other
 * command (creating, completing and aborting the multipart upload) without it.
 */
export function cancellingParts(client: S3Client, signal: AbortSignal): S3Client {
  const send = (command: unknown, options?: { abortSignal?: AbortSignal }) => {
    const cancellable = command instanceof UploadPartCommand || command instanceof PutObjectCommand;
    return client.send(
      command as UploadPartCommand,
      cancellable ? { ...options, abortSignal: signal } : options,
    );
  };
  return new Proxy(client, {
    get: (target, property) => (property === "send" ? send : Reflect.get(target, property)),
  });
}
