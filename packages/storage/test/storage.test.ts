/**
 * The storage client against moto's S3 in server mode: upload/download (a multipart file with
 * progress), streaming write/read, ls across pages, exists, rm, credentials as functions and never
 * shown, presets' endpoints and refusals.
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, readdir, readFile, rm, stat, truncate, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { inspect } from "node:util";
import { CreateBucketCommand, ListMultipartUploadsCommand, S3Client } from "@aws-sdk/client-s3";
import { ConfigurationError } from "@skyward/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Backblaze, GCS, Hyperstack, R2, S3, Storage, type TransferProgress, Wasabi } from "../src/index.js";
import { type MotoS3, motoSkipReason, startMotoS3 } from "./moto-s3.js";
import { startStallProxy } from "./stall-proxy.js";

const skip = motoSkipReason();

describe.skipIf(skip !== undefined)("Storage against moto's S3", () => {
  let moto: MotoS3;
  let store: Storage;
  let scratch: string;
  let credentialCalls = 0;

  /** What `use` does with moto's S3 as its administrator (the test's own client, not the store's). */
  async function asAdmin<T>(use: (admin: S3Client) => Promise<T>): Promise<T> {
    const admin = new S3Client({
      endpoint: moto.endpoint,
      region: "us-east-1",
      forcePathStyle: true,
      credentials: { accessKeyId: "testing", secretAccessKey: "testing" },
    });
    try {
      return await use(admin);
    } finally {
      admin.destroy();
    }
  }

  /** The multipart uploads still open in bucket `data` under `prefix` (each one's parts billed). */
  async function openUploads(prefix: string): Promise<unknown[]> {
    const listed = await asAdmin((admin) =>
      admin.send(new ListMultipartUploadsCommand({ Bucket: "data", Prefix: prefix })),
    );
    return listed.Uploads ?? [];
  }

  beforeAll(async () => {
    moto = await startMotoS3();
    store = new Storage({
      endpoint: moto.endpoint,
      accessKey: () => {
        credentialCalls += 1;
        return "SKYWARDTESTACCESSKEY";
      },
      secretKey: async () => "moto-secret-value-never-shown",
      pathStyle: true,
    });
    await asAdmin((admin) => admin.send(new CreateBucketCommand({ Bucket: "data" })));
    scratch = await mkdtemp(join(tmpdir(), "skyward-storage-"));
  });

  afterAll(async () => {
    store?.close();
    await moto?.stop();
    if (scratch) await rm(scratch, { recursive: true, force: true });
  });

  it("uploads a 20 MiB file in parts with progress and downloads it intact", async () => {
    const source = join(scratch, "big.bin");
    const content = randomBytes(20 * 1024 * 1024);
    await writeFile(source, content);
    const up: TransferProgress[] = [];
    const key = await store.upload("data", source, {
      key: "sets/big.bin",
      partSize: 5 * 1024 * 1024,
      onProgress: (progress) => up.push(progress),
    });
    expect(key).toBe("sets/big.bin");
    expect(up.length).toBeGreaterThanOrEqual(4);
    expect(up.at(-1)?.loaded).toBe(content.length);
    const down: TransferProgress[] = [];
    const target = join(scratch, "out", "big.bin");
    await store.download("data", "sets/big.bin", target, { onProgress: (progress) => down.push(progress) });
    expect((await readFile(target)).equals(content)).toBe(true);
    expect(down.at(-1)).toEqual({ key: "sets/big.bin", loaded: content.length, total: content.length });
    expect(credentialCalls).toBeGreaterThan(0);
  });

  it("defaults the key to the file's base name", async () => {
    const source = join(scratch, "notes.txt");
    await writeFile(source, "hello");
    expect(await store.upload("data", source)).toBe("notes.txt");
    expect(await store.exists("data", "notes.txt")).toBe(true);
  });

  it("writes and reads streaming bodies", async () => {
    await store.write("data", "stream/a.txt", Readable.from(["one ", "two ", "three"]));
    const { body } = await store.read("data", "stream/a.txt");
    const chunks: Buffer[] = [];
    for await (const chunk of body) chunks.push(chunk as Buffer);
    expect(Buffer.concat(chunks).toString()).toBe("one two three");
    await store.write("data", "stream/b.bin", new Uint8Array([1, 2, 3]));
    expect((await store.read("data", "stream/b.bin")).size).toBe(3);
  });

  const sockets = () => process.getActiveResourcesInfo().filter((name) => name === "TCPSocketWrap").length;

  it("frees the connection of a body read with progress and destroyed before its end", async () => {
    await store.write("data", "early/big.bin", new Uint8Array(4 * 1024 * 1024));
    const before = sockets();
    for (let round = 0; round < 8; round++) {
      const { body } = await store.read("data", "early/big.bin", { onProgress: () => undefined });
      await new Promise((resolve) => body.once("data", resolve));
      body.destroy();
    }
    // Each body's socket stayed open (paused mid-object) while only the counting stream was
    // destroyed: 50 such reads held the client's every socket and the next request waited for ever.
    await expect.poll(sockets, { timeout: 30_000 }).toBeLessThanOrEqual(before + 1);
  });

  it("frees the connection of a download whose local directory cannot be made", async () => {
    await store.write("data", "early/big.bin", new Uint8Array(4 * 1024 * 1024));
    const blocker = join(scratch, "a-file");
    await writeFile(blocker, "not a directory");
    const before = sockets();
    for (let round = 0; round < 8; round++)
      await expect(store.download("data", "early/big.bin", join(blocker, "out.bin"))).rejects.toMatchObject({
        code: "EEXIST",
      });
    // The object's body was opened, then left unread and open when making the directory failed.
    await expect.poll(sockets, { timeout: 30_000 }).toBeLessThanOrEqual(before + 1);
  });

  it("lists every key under a prefix across pages, and checks and removes keys", async () => {
    await Promise.all(
      Array.from({ length: 1005 }, (_, index) =>
        store.write("data", `many/${String(index).padStart(4, "0")}`, "x"),
      ),
    );
    const keys = await store.ls("data", "many/");
    expect(keys).toHaveLength(1005);
    expect(keys[0]).toBe("many/0000");
    expect(await store.exists("data", "many/0007")).toBe(true);
    await store.rm("data", "many/0007");
    expect(await store.exists("data", "many/0007")).toBe(false);
    await store.rm("data", "many/0007");
    expect(await store.ls("data", "nothing-here/")).toEqual([]);
  });

  it("exists on a bucket that is not there is an error naming the bucket, not false (no checkpoint yet)", async () => {
    // S3 answers HEAD of a key in a missing bucket 404 without a body: it read as "no such key".
    const missing = await store.exists("dta", "checkpoints/latest.pt").catch((error: unknown) => error);
    expect(missing).toBeInstanceOf(Error);
    expect(missing).toMatchObject({ name: "NoSuchBucket" });
    expect(String((missing as Error).message)).toContain('"dta"');
    // A missing key in a bucket that is there is still false.
    expect(await store.exists("data", "checkpoints/none-yet.pt")).toBe(false);
  });

  it("leaves no partial file when a download fails", async () => {
    const target = join(scratch, "missing.bin");
    await expect(store.download("data", "no/such/key", target)).rejects.toMatchObject({ name: "NoSuchKey" });
    await expect(stat(target)).rejects.toMatchObject({ code: "ENOENT" });
  });

  it("downloads to one path twice at once intact: the file is one whole object, never a mix", async () => {
    const first = randomBytes(8 * 1024 * 1024);
    const second = randomBytes(8 * 1024 * 1024);
    await store.write("data", "twice/first.bin", first);
    await store.write("data", "twice/second.bin", second);
    const target = join(scratch, "twice", "model.bin");
    const outcomes = await Promise.allSettled([
      store.download("data", "twice/first.bin", target),
      store.download("data", "twice/second.bin", target),
    ]);
    expect(outcomes.map((outcome) => outcome.status)).toEqual(["fulfilled", "fulfilled"]);
    const got = await readFile(target);
    expect(got.equals(first) || got.equals(second)).toBe(true);
    expect(await readdir(join(scratch, "twice"))).toEqual(["model.bin"]);
  });

  it("refuses part sizes and concurrency S3 would reject, naming the field, before sending a byte", async () => {
    const source = join(scratch, "small.bin");
    await writeFile(source, randomBytes(1024));
    const refusal = (promise: Promise<unknown>) =>
      promise.then(
        () => undefined,
        (error: unknown) => error,
      );
    const tooSmall = await refusal(store.upload("data", source, { key: "refused/a", partSize: 1024 * 1024 }));
    expect(tooSmall).toBeInstanceOf(ConfigurationError);
    expect((tooSmall as ConfigurationError).issues[0]?.path).toBe("partSize");
    const tooLarge = await refusal(store.write("data", "refused/b", "x", { partSize: 6 * 1024 ** 3 }));
    expect((tooLarge as ConfigurationError).issues?.[0]?.path).toBe("partSize");
    // 0 used to be taken silently as the default 4, 2.5 as 3 uploaders.
    for (const concurrency of [0, -1, 2.5]) {
      const refused = await refusal(store.upload("data", source, { key: "refused/c", concurrency }));
      expect(refused).toBeInstanceOf(ConfigurationError);
      expect((refused as ConfigurationError).issues[0]?.path).toBe("concurrency");
    }
    // A 60 GiB checkpoint in 5 MiB parts needs 12,288 parts; S3 takes 10,000, so the upload used to
    // fail after sending 48 GiB. A sparse file: its size without its bytes.
    const huge = join(scratch, "huge.bin");
    await writeFile(huge, "");
    await truncate(huge, 60 * 1024 ** 3);
    const tooManyParts = await refusal(store.upload("data", huge, { partSize: 5 * 1024 * 1024 }));
    expect(tooManyParts).toBeInstanceOf(ConfigurationError);
    expect((tooManyParts as ConfigurationError).issues[0]?.path).toBe("partSize");
    expect(await store.ls("data", "refused/")).toEqual([]);
    expect(await store.exists("data", "huge.bin")).toBe(false);
  });

  it("sizes the default part to a large file so it fits in S3's 10,000 parts", async () => {
    // 100 GiB in the former fixed 8 MiB parts is 12,800 parts: refused (or, before, failed at part
    // 10,001). The default now grows with the file; the upload starts and is aborted once it sends.
    const huge = join(scratch, "huge-default.bin");
    await writeFile(huge, "");
    await truncate(huge, 100 * 1024 ** 3);
    const controller = new AbortController();
    const outcome = await store
      .upload("data", huge, { signal: controller.signal, onProgress: () => controller.abort() })
      .then(
        () => "finished",
        (error: unknown) => error,
      );
    expect(outcome).toMatchObject({ name: "AbortError" });
    await rm(huge);
  });

  it("leaves no multipart upload behind (its parts billed) once an aborted upload has rejected", async () => {
    const source = join(scratch, "aborted.bin");
    await writeFile(source, randomBytes(30 * 1024 * 1024));
    const own = new Storage({ endpoint: moto.endpoint, accessKey: "a", secretKey: "b", pathStyle: true });
    const controller = new AbortController();
    const outcome = await own
      .upload("data", source, {
        key: "aborted/model.bin",
        partSize: 5 * 1024 * 1024,
        concurrency: 2,
        signal: controller.signal,
        onProgress: () => controller.abort(),
      })
      .then(
        () => "finished",
        (error: unknown) => error,
      );
    expect(outcome).toMatchObject({ name: "AbortError" });
    // A program ends its store (or itself) once the upload has failed: nothing may be left to do.
    own.close();
    expect(await openUploads("aborted/")).toEqual([]);
  });

  it("an aborted upload rejects without waiting for the parts in flight, and aborts the multipart upload", async () => {
    const source = join(scratch, "stalled.bin");
    await writeFile(source, randomBytes(30 * 1024 * 1024));
    // Part 1 goes through to moto; every later part is read by the proxy and never answered (a stuck link).
    const proxy = await startStallProxy(moto.endpoint, (request) => {
      const part = new URL(request.url ?? "/", "http://x").searchParams.get("partNumber");
      return request.method === "PUT" && Number(part) >= 2;
    });
    const own = new Storage({ endpoint: proxy.endpoint, accessKey: "a", secretKey: "b", pathStyle: true });
    try {
      const controller = new AbortController();
      const upload = own
        .upload("data", source, {
          key: "stalled/model.bin",
          partSize: 5 * 1024 * 1024,
          concurrency: 2,
          signal: controller.signal,
        })
        .then(
          () => "finished",
          (error: unknown) => error,
        );
      await proxy.firstHeld;
      controller.abort();
      // Before, it waited for the held parts, which never end: this never settled.
      expect(await upload).toMatchObject({ name: "AbortError" });
      expect(proxy.held.length).toBeGreaterThanOrEqual(1);
      expect(await openUploads("stalled/")).toEqual([]);
    } finally {
      own.close();
      await proxy.close();
    }
  }, 60_000);

  it("never shows its credentials", async () => {
    const shown = `${inspect(store)} ${JSON.stringify(store)} ${String(Object.keys(store))}`;
    expect(shown).toContain(moto.endpoint);
    expect(shown).not.toContain("moto-secret-value-never-shown");
    expect(shown).not.toContain("SKYWARDTESTACCESSKEY");
    const wrong = new Storage({
      endpoint: moto.endpoint,
      accessKey: "OTHERACCESSKEY",
      secretKey: "s3cr3t-do-not-show",
      pathStyle: true,
    });
    const failure = await wrong.ls("no-such-bucket").catch((error: unknown) => error);
    expect(String(failure)).not.toContain("s3cr3t-do-not-show");
    wrong.close();
  });
});

describe("presets and refusals", () => {
  it("fill in each service's endpoint and region", () => {
    const cases: [Storage, string, string][] = [
      [S3({ region: "eu-west-1" }), "https://s3.eu-west-1.amazonaws.com", "eu-west-1"],
      [
        R2({ accountId: "abc123", accessKey: "a", secretKey: "b" }),
        "https://abc123.r2.cloudflarestorage.com",
        "auto",
      ],
      [GCS({ accessKey: "a", secretKey: "b" }), "https://storage.googleapis.com", "auto"],
      [
        Wasabi({ region: "eu-central-1", accessKey: "a", secretKey: "b" }),
        "https://s3.eu-central-1.wasabisys.com",
        "eu-central-1",
      ],
      [
        Backblaze({ region: "us-west-004", keyId: "a", appKey: "b" }),
        "https://s3.us-west-004.backblazeb2.com",
        "us-west-004",
      ],
      [
        Hyperstack({
          endpoint: "https://no-1.example.hyperstack.test",
          region: "NORWAY-1",
          accessKey: "a",
          secretKey: "b",
        }),
        "https://no-1.example.hyperstack.test",
        "NORWAY-1",
      ],
    ];
    for (const [store, endpoint, region] of cases) {
      expect(store.toJSON()).toMatchObject({ endpoint, region });
      store.close();
    }
  });

  it("refuse missing or malformed settings naming the field", () => {
    const issue = (make: () => unknown) => {
      try {
        make();
      } catch (error) {
        expect(ConfigurationError.isInstance(error)).toBe(true);
        return (error as ConfigurationError).issues[0]?.path;
      }
      throw new Error("expected a ConfigurationError");
    };
    expect(issue(() => new Storage({ endpoint: "ftp://x" }))).toBe("endpoint");
    expect(issue(() => new Storage({ endpoint: "https://x", accessKey: "a" }))).toBe("secretKey");
    expect(issue(() => R2({ accountId: "", accessKey: "a", secretKey: "b" }))).toBe("R2.accountId");
    expect(issue(() => Wasabi({ region: "a/b", accessKey: "a", secretKey: "b" }))).toBe("Wasabi.region");
    expect(issue(() => Backblaze({ region: "us-west-004", keyId: "", appKey: "b" }))).toBe("Backblaze.keyId");
    expect(issue(() => new Storage({ endpoint: "https://x", accessKey: 5 as never, secretKey: "b" }))).toBe(
      "accessKey",
    );
  });
});
