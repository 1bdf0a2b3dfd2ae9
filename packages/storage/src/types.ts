/** The storage client's public types: how a store is reached, and the options of its transfers. */
/** A secret given as itself or as a function that returns it (looked up when a request is signed). */
export type Credential = string | (() => string | Promise<string>);

/** Where an object store is and how to sign requests for it. */
export interface StorageOptions {
  /** The endpoint URL, `https://…` (or `http://…` for a local store). */
  readonly endpoint: string;
  /** The signing region. Default `us-east-1` (what most S3-compatible stores accept). */
  readonly region?: string;
  /**
   * The access key id. Without it (and `secretKey`) the AWS SDK's default chain is used (environment,
   * profile, instance role). A secret: never logged.
   */
  readonly accessKey?: Credential;
  /** The secret access key. A secret: never logged. */
  readonly secretKey?: Credential;
  /** A session token for temporary credentials. A secret: never logged. */
  readonly sessionToken?: Credential;
  /** Path-style addressing (`endpoint/bucket/key`) instead of `bucket.endpoint/key`. Default false. */
  readonly pathStyle?: boolean;
}

/** Bytes moved so far, reported while an upload or download runs. */
export interface TransferProgress {
  /** The object's key. */
  readonly key: string;
  /** Bytes moved so far. */
  readonly loaded: number;
  /** Total bytes, when known. */
  readonly total: number | undefined;
}

/** Options of {@link Storage.upload} and {@link Storage.write}. */
export interface UploadOptions {
  /** The object's key. For `upload`, default: the file's base name. */
  readonly key?: string;
  /** The object's content type. */
  readonly contentType?: string;
  /** Called as parts are sent. */
  readonly onProgress?: (progress: TransferProgress) => void;
  /**
   * Part size in bytes for multipart uploads: 5 MiB to 5 GiB, and large enough that the object fits
   * in S3's 10,000 parts (refused before any byte is sent otherwise). Default 8 MiB, or the object's
   * size / 10,000 when larger. A stream of unknown size over 80 GB needs a larger one given here.
   */
  readonly partSize?: number;
  /** Parts sent at once, a whole number of at least 1. Default 4. */
  readonly concurrency?: number;
  /** Aborts the transfer. */
  readonly signal?: AbortSignal;
}

/** Options of {@link Storage.download} and {@link Storage.read}. */
export interface DownloadOptions {
  /** Called as bytes arrive. */
  readonly onProgress?: (progress: TransferProgress) => void;
  /** Aborts the transfer. */
  readonly signal?: AbortSignal;
}
