/**
 * The S3-compatible object-storage client: `upload`, `download`, `ls`, `exists` and `rm` (the
 * Python project's names), plus `read`/`write` for streaming bodies. Large uploads go in parts
 * (`@aws-sdk/lib-storage`), large downloads stream to disk; both report progress. Credentials are
 * strings or functions, resolved when a request is signed and never put in a message, an event or
 * `toJSON`/`inspect` output.
 */
import { randomUUID } from "node:crypto";
import { createReadStream, createWriteStream } from "node:fs";
import { mkdir, rm as removeFile, rename, stat } from "node:fs/promises";
import { basename, dirname } from "node:path";
import { pipeline as pipelineStreams, Readable, Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import {
  DeleteObjectCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  NoSuchBucket,
  S3Client,
  type S3ClientConfig,
} from "@aws-sdk/client-s3";
import { Upload } from "@aws-sdk/lib-storage";
import { cancellingParts, checkName, invalid, isNotFound, transferSettings } from "./transfer.js";
import type { Credential, DownloadOptions, StorageOptions, UploadOptions } from "./types.js";

function resolve(credential: Credential): Promise<string> {
  return Promise.resolve(typeof credential === "function" ? credential() : credential);
}

/**
 * An S3-compatible object store. Use a preset (`S3`, `R2`, `GCS`, `Wasabi`, `Backblaze`,
 * `Hyperstack`) or give the endpoint yourself. Dispose of it (`await using`, or `close()`) to free
 * its connections.
 *
 * ```ts
 * import { Storage } from "@skyward/storage";
 *
 * await using store = new Storage({
 *   endpoint: "http://127.0.0.1:9000",
 *   accessKey: () => process.env.MINIO_ACCESS_KEY ?? "",
 *   secretKey: () => process.env.MINIO_SECRET_KEY ?? "",
 *   pathStyle: true,
 * });
 * await store.upload("datasets", "./train.csv", { key: "v1/train.csv" });
 * const keys = await store.ls("datasets", "v1/");
 * ```
 */
export class Storage {
  /** The endpoint URL. */
  readonly endpoint: string;
  /** The signing region. */
  readonly region: string;
  /** Whether requests use path-style addressing. */
  readonly pathStyle: boolean;
  readonly #client: S3Client;
  readonly #credentials: Pick<StorageOptions, "accessKey" | "secretKey" | "sessionToken">;

  constructor(options: StorageOptions) {
    if (typeof options?.endpoint !== "string" || !/^https?:\/\/[^\s/]+/.test(options.endpoint))
      throw invalid("endpoint", "expected an http(s) URL");
    if ((options.accessKey === undefined) !== (options.secretKey === undefined))
      throw invalid(
        options.accessKey === undefined ? "accessKey" : "secretKey",
        "expected accessKey and secretKey together (or neither, for the AWS default credential chain)",
      );
    for (const field of ["accessKey", "secretKey", "sessionToken"] as const) {
      const value = options[field];
      if (value !== undefined && typeof value !== "string" && typeof value !== "function")
        throw invalid(field, "expected a string or a function returning one");
    }
    this.endpoint = options.endpoint.replace(/\/+$/, "");
    this.region = options.region ?? "us-east-1";
    this.pathStyle = options.pathStyle ?? false;
    this.#credentials = {
      ...(options.accessKey !== undefined ? { accessKey: options.accessKey } : {}),
      ...(options.secretKey !== undefined ? { secretKey: options.secretKey } : {}),
      ...(options.sessionToken !== undefined ? { sessionToken: options.sessionToken } : {}),
    };
    const config: S3ClientConfig = {
      endpoint: this.endpoint,
      region: this.region,
      forcePathStyle: this.pathStyle,
      // Stores other than AWS reject the newer checksum headers; send them only when asked.
      requestChecksumCalculation: "WHEN_REQUIRED",
      responseChecksumValidation: "WHEN_REQUIRED",
    };
    const { accessKey, secretKey, sessionToken } = this.#credentials;
    if (accessKey !== undefined && secretKey !== undefined) {
      config.credentials = async () => {
        const [accessKeyId, secretAccessKey, token] = await Promise.all([
          resolve(accessKey),
          resolve(secretKey),
          sessionToken === undefined ? undefined : resolve(sessionToken),
        ]);
        return { accessKeyId, secretAccessKey, ...(token ? { sessionToken: token } : {}) };
      };
    }
    this.#client = new S3Client(config);
  }

  /**
   * The credentials as strings, resolved now: for handing them to a task or a mount over a private
   * channel. Undefined when this store uses the AWS default chain. Never log the result.
   */
  async resolveCredentials(): Promise<
    { accessKey: string; secretKey: string; sessionToken?: string } | undefined
  > {
    const { accessKey, secretKey, sessionToken } = this.#credentials;
    if (accessKey === undefined || secretKey === undefined) return undefined;
    const token = sessionToken === undefined ? undefined : await resolve(sessionToken);
    return {
      accessKey: await resolve(accessKey),
      secretKey: await resolve(secretKey),
      ...(token ? { sessionToken: token } : {}),
    };
  }

  /**
   * Uploads a local file (streamed, in parts when large) as `key` (default: the file's base name).
   *
   * @returns the key it was stored under.
   */
  async upload(bucket: string, localPath: string, options: UploadOptions = {}): Promise<string> {
    checkName("bucket", bucket);
    const key = options.key ?? basename(localPath);
    checkName("key", key);
    const size = (await stat(localPath)).size;
    const settings = transferSettings(size, options);
    await this.#put(bucket, key, createReadStream(localPath), size, settings, options);
    return key;
  }

  /** Writes a body (bytes, text or a stream, sent in parts as it is read) as `key`. */
  async write(
    bucket: string,
    key: string,
    body: Uint8Array | string | Readable,
    options: Omit<UploadOptions, "key"> = {},
  ): Promise<void> {
    checkName("bucket", bucket);
    checkName("key", key);
    const size =
      typeof body === "string"
        ? Buffer.byteLength(body)
        : body instanceof Uint8Array
          ? body.byteLength
          : undefined;
    await this.#put(bucket, key, body, size, transferSettings(size, options), options);
  }

  async #put(
    bucket: string,
    key: string,
    body: Uint8Array | string | Readable,
    size: number | undefined,
    { partSize, concurrency }: { partSize: number; concurrency: number },
    options: Omit<UploadOptions, "key">,
  ): Promise<void> {
    // The signal fails the body and cancels the part uploads in flight rather than calling
    // upload.abort(): lib-storage's abort rejects done() at once while parts still upload, and aborts
    // the multipart upload later, in the background (never, once the store is closed), its parts
    // stored and billed. Failed parts make done() abort the multipart upload, then reject; without
    // their cancelling it waited for each part in flight to finish (minutes on a slow link).
    const source =
      typeof body === "string"
        ? Readable.from([Buffer.from(body)])
        : body instanceof Uint8Array
          ? Readable.from([Buffer.from(body.buffer, body.byteOffset, body.byteLength)])
          : body;
    const parts = new AbortController();
    const upload = new Upload({
      client: cancellingParts(this.#client, parts.signal),
      params: {
        Bucket: bucket,
        Key: key,
        Body: source,
        ...(options.contentType ? { ContentType: options.contentType } : {}),
      },
      partSize,
      queueSize: concurrency,
      leavePartsOnError: false,
    });
    const onProgress = options.onProgress;
    if (onProgress)
      upload.on("httpUploadProgress", (progress) =>
        onProgress({ key, loaded: progress.loaded ?? 0, total: progress.total ?? size }),
      );
    const signal = options.signal;
    const abort = () => {
      source.destroy(signal?.reason);
      parts.abort(signal?.reason);
    };
    signal?.throwIfAborted();
    signal?.addEventListener("abort", abort, { once: true });
    try {
      await upload.done();
    } catch (error) {
      // The signal's reason, not whichever part's cancelling came first.
      if (signal?.aborted) throw signal.reason;
      throw error;
    } finally {
      signal?.removeEventListener("abort", abort);
    }
  }

  /** Opens `key` as a byte stream, with its size when the store says. */
  async read(
    bucket: string,
    key: string,
    options: DownloadOptions = {},
  ): Promise<{ body: Readable; size: number | undefined }> {
    checkName("bucket", bucket);
    checkName("key", key);
    const answer = await this.#client.send(
      new GetObjectCommand({ Bucket: bucket, Key: key }),
      options.signal ? { abortSignal: options.signal } : {},
    );
    const raw = answer.Body as Readable | undefined;
    if (!raw) throw new Error(`The store sent no body for s3://${bucket}/${key}`);
    const size = answer.ContentLength;
    const onProgress = options.onProgress;
    if (!onProgress) return { body: raw, size };
    let loaded = 0;
    const counted = new Transform({
      transform(chunk: Buffer, _encoding, done) {
        loaded += chunk.length;
        onProgress({ key, loaded, total: size });
        done(null, chunk);
      },
    });
    // pipeline, not pipe: a body destroyed before its end destroys the response too, freeing its socket.
    return { body: pipelineStreams(raw, counted, () => undefined), size };
  }

  /**
   * Downloads `key` to `localPath`, streamed to a temporary file beside it and renamed when complete
   * (a failed download leaves no partial file). Creates the parent directory.
   */
  async download(
    bucket: string,
    key: string,
    localPath: string,
    options: DownloadOptions = {},
  ): Promise<void> {
    const { body } = await this.read(bucket, key, options);
    // One of its own per download: two at once to one path (a retry, two tasks) would write one file.
    const partial = `${localPath}.${process.pid}-${randomUUID().slice(0, 8)}.partial`;
    try {
      await mkdir(dirname(localPath), { recursive: true });
      await pipeline(body, createWriteStream(partial), options.signal ? { signal: options.signal } : {});
      await rename(partial, localPath);
    } catch (error) {
      body.destroy(); // unread (the directory could not be made), it would hold its socket open
      // Its own failure (the directory was not made: ENOTDIR) would hide the download's.
      await removeFile(partial, { force: true }).catch(() => undefined);
      throw error;
    }
  }

  /** The keys under `prefix` (every page), in the store's order. */
  async ls(bucket: string, prefix = ""): Promise<string[]> {
    checkName("bucket", bucket);
    const keys: string[] = [];
    let token: string | undefined;
    do {
      const page = await this.#client.send(
        new ListObjectsV2Command({
          Bucket: bucket,
          ...(prefix ? { Prefix: prefix } : {}),
          ...(token ? { ContinuationToken: token } : {}),
        }),
      );
      for (const item of page.Contents ?? []) if (item.Key !== undefined) keys.push(item.Key);
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
    return keys;
  }

  /**
   * Whether `key` exists. A bucket that does not exist is an error (`NoSuchBucket`, naming it), not
   * `false`: a misspelt bucket must not read as "no checkpoint yet".
   */
  async exists(bucket: string, key: string): Promise<boolean> {
    checkName("bucket", bucket);
    checkName("key", key);
    try {
      await this.#client.send(new HeadObjectCommand({ Bucket: bucket, Key: key }));
      return true;
    } catch (error) {
      if (!isNotFound(error)) throw error;
    }
    // A HEAD's 404 has no body to say whether the key or the bucket is missing: the bucket is asked.
    const bucketMissing = await this.#client.send(new HeadBucketCommand({ Bucket: bucket })).then(
      () => false,
      // Another answer (a key allowed to HEAD objects only): the object's 404 stands.
      (error: unknown) => isNotFound(error),
    );
    if (bucketMissing)
      throw new NoSuchBucket({
        message: `The bucket "${bucket}" does not exist at ${this.endpoint}`,
        $metadata: { httpStatusCode: 404 },
      });
    return false;
  }

  /** Removes `key` (no error when it is not there, as S3 does). */
  async rm(bucket: string, key: string): Promise<void> {
    checkName("bucket", bucket);
    checkName("key", key);
    await this.#client.send(new DeleteObjectCommand({ Bucket: bucket, Key: key }));
  }

  /** Frees the client's connections. */
  close(): void {
    this.#client.destroy();
  }

  /** Same as {@link Storage.close}, for `await using`. */
  async [Symbol.asyncDispose](): Promise<void> {
    this.close();
  }

  /** The store without its credentials. */
  toJSON(): { endpoint: string; region: string; pathStyle: boolean } {
    return { endpoint: this.endpoint, region: this.region, pathStyle: this.pathStyle };
  }

  /** What `console.log` and `util.inspect` show: never the credentials. */
  [Symbol.for("nodejs.util.inspect.custom")](): string {
    return `Storage ${JSON.stringify(this.toJSON())}`;
  }
}
