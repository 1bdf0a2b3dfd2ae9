/**
 * `@skyward/storage` — an S3-compatible object-storage client (`upload`, `download`, `ls`, `exists`,
 * `rm`, and streaming `read`/`write` with progress) and presets for S3, R2, GCS, Wasabi, Backblaze
 * and Hyperstack. Inside tasks the same client is `sky.storage` (Python, with boto3).
 *
 * ```ts
 * import * as storage from "@skyward/storage";
 *
 * await using s3 = storage.S3({ region: "us-east-1" });
 * await s3.upload("my-bucket", "model.pt", { key: "checkpoints/model.pt" });
 * const keys = await s3.ls("my-bucket", "checkpoints/");
 * await s3.download("my-bucket", "checkpoints/model.pt", "local/model.pt");
 * ```
 */
export type {
  BackblazeOptions,
  GcsOptions,
  HyperstackOptions,
  R2Options,
  S3Options,
  WasabiOptions,
} from "./presets.js";
export { Backblaze, GCS, Hyperstack, R2, S3, Wasabi } from "./presets.js";
export { Storage } from "./storage.js";
export type {
  Credential,
  DownloadOptions,
  StorageOptions,
  TransferProgress,
  UploadOptions,
} from "./types.js";
