/**
 * Volumes end to end on the test bed, against moto's S3 on the bridge address: the client uploads
 * a dataset with `@skyward/storage`, tasks on two SSH hosts read it through a read-only volume (a
 * prefix of its bucket) and write a checkpoint through a writable one, the client downloads it; a
 * write to the read-only volume fails with the OS's error; the keys are in no process list or log;
 * nothing is mounted once the pool is gone. The hosts are network namespaces whose sshd runs in its
 * own mount namespace (`ip netns exec`), so their mounts are read from `/proc/<sshd pid>/mounts`.
 */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { CreateBucketCommand, PutObjectCommand, S3Client } from "@aws-sdk/client-s3";
import * as sky from "@skyward/core";
import { SSH } from "@skyward/provider-ssh";
import {
  createTestbed,
  isCi,
  requireTestbed,
  type ScratchSkywardHome,
  type Testbed,
  testbedSshHosts,
  useScratchSkywardHome,
} from "@skyward/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Storage } from "../src/index.js";
import { type MotoS3, motoSkipReason, startMotoS3 } from "./moto-s3.js";

function s3fsSkipReason(): string | undefined {
  try {
    execFileSync("s3fs", ["--version"], { stdio: "ignore" });
    return undefined;
  } catch {
    const reason =
      "s3fs is not installed on this machine (apt-get install s3fs); the test-bed hosts share its filesystem";
    if (isCi()) throw new Error(reason);
    return reason;
  }
}

const skip = (await requireTestbed()) ?? motoSkipReason() ?? s3fsSkipReason();
const tasks = fileURLToPath(new URL("./fixtures/volume_tasks.py", import.meta.url));

const readDataset = sky.python<[string], string>("volume_tasks:read_dataset");
const listDir = sky.python<[string], string[]>("volume_tasks:list_dir");
const writeCheckpoint = sky.python<[string, string], number>("volume_tasks:write_checkpoint");
const writeFile = sky.python<[string], string>("volume_tasks:write_file");
const fuseMounts = sky.python<[], string[]>("volume_tasks:fuse_mounts");
const processList = sky.python<[], string>("volume_tasks:process_list");
const workerPid = sky.python<[], number>("volume_tasks:pid");

const ACCESS = "VOLUMETESTACCESSKEY1";
const SECRET = "volume-secret-key-that-must-stay-hidden";

describe.skipIf(skip !== undefined)("volumes on a 2-host test bed against moto's S3", () => {
  let bed: Testbed;
  let home: ScratchSkywardHome | undefined;
  let moto: MotoS3;
  let store: Storage;
  let scratch: string;

  beforeAll(async () => {
    bed = await createTestbed({ hosts: 2 });
    home = await useScratchSkywardHome("skyward-volumes-e2e-");
    moto = await startMotoS3(bed.bridgeAddress);
    const admin = new S3Client({
      endpoint: moto.endpoint,
      region: "us-east-1",
      forcePathStyle: true,
      credentials: { accessKeyId: "testing", secretAccessKey: "testing" },
    });
    await admin.send(new CreateBucketCommand({ Bucket: "datasets" }));
    await admin.send(new CreateBucketCommand({ Bucket: "checkpoints" }));
    admin.destroy();
    store = new Storage({
      endpoint: moto.endpoint,
      accessKey: ACCESS,
      secretKey: () => SECRET,
      pathStyle: true,
    });
    scratch = await mkdtemp(join(tmpdir(), "skyward-volumes-"));
    process.env.SKYT_VOLUME_KEY = ACCESS;
    process.env.SKYT_VOLUME_SECRET = SECRET;
  }, 180_000);

  afterAll(async () => {
    delete process.env.SKYT_VOLUME_KEY;
    delete process.env.SKYT_VOLUME_SECRET;
    store?.close();
    await moto?.stop();
    await bed?.teardown();
    await home?.restore();
    if (scratch) await rm(scratch, { recursive: true, force: true });
  });

  const hostMounts = () =>
    bed.hosts.map((host) =>
      readFileSync(`/proc/${host.sshdPid}/mounts`, "utf8")
        .split("\n")
        .filter((line) => line.includes(" fuse.s3fs "))
        .map((line) => line.split(" ")[1]),
    );

  it("mounts every volume on every node, reads a dataset, writes a checkpoint, refuses writes to a read-only one and unmounts at teardown", async () => {
    const source = join(scratch, "train.csv");
    await (await import("node:fs/promises")).writeFile(source, "x,y\n1,2\n3,4\n");
    await store.upload("datasets", source, { key: "v1/train.csv" });
    await store.write("datasets", "v2/other.csv", "not in the mounted prefix");

    const storage = {
      endpoint: moto.endpoint,
      accessKeyEnv: "SKYT_VOLUME_KEY",
      secretKeyEnv: "SKYT_VOLUME_SECRET",
      pathStyle: true,
    };
    const phases: string[] = [];
    const logs: string[] = [];
    {
      await using pool = await sky.compute({
        provider: SSH({ hosts: testbedSshHosts(bed) }),
        nodes: 2,
        ttl: 0,
        image: { includes: [tasks] },
        volumes: [
          { bucket: "datasets", mount: "/mnt/skyward-e2e/data", prefix: "v1", storage },
          {
            bucket: "checkpoints",
            mount: "/mnt/skyward-e2e/ckpt",
            prefix: "run-1",
            readOnly: false,
            // A @skyward/storage client as the store (its secret key a function), as in the Python project.
            storage: store,
          },
        ],
        options: { console: false, bootstrapTimeout: 240 },
      });
      pool.on("bootstrap.phase", (event) => phases.push(event.phase));
      pool.on("log", (event) => logs.push(JSON.stringify(event)));

      expect(await pool.broadcast(fuseMounts())).toEqual([
        ["/mnt/skyward-e2e/ckpt", "/mnt/skyward-e2e/data"],
        ["/mnt/skyward-e2e/ckpt", "/mnt/skyward-e2e/data"],
      ]);
      expect(await pool.broadcast(listDir("/mnt/skyward-e2e/data"))).toEqual([["train.csv"], ["train.csv"]]);
      expect(await pool.broadcast(readDataset("/mnt/skyward-e2e/data/train.csv"))).toEqual([
        "x,y\n1,2\n3,4\n",
        "x,y\n1,2\n3,4\n",
      ]);

      expect(await pool.run(writeCheckpoint("/mnt/skyward-e2e/ckpt/epoch-1/model.txt", "weights 0.5"))).toBe(
        11,
      );
      // Written through on close: the object is in the bucket (under the prefix) when the task returns.
      const target = join(scratch, "model.txt");
      await store.download("checkpoints", "run-1/epoch-1/model.txt", target);
      expect(await readFile(target, "utf8")).toBe("weights 0.5");

      await expect(pool.run(writeFile("/mnt/skyward-e2e/data/new.csv"))).rejects.toThrow(
        /Read-only file system/,
      );
      expect(await store.exists("datasets", "v1/new.csv")).toBe(false);

      const processes = (await pool.broadcast(processList())).join("\n");
      expect(processes).toContain("s3fs");
      expect(processes).not.toContain(SECRET);
      expect(processes).not.toContain(ACCESS);
      expect(hostMounts()).toEqual([
        ["/mnt/skyward-e2e/data", "/mnt/skyward-e2e/ckpt"],
        ["/mnt/skyward-e2e/data", "/mnt/skyward-e2e/ckpt"],
      ]);
    }
    expect(logs.join("\n")).not.toContain(SECRET);
    // Nor in anything the client wrote (its log files under SKYWARD_HOME).
    const inHome = execFileSync("sh", ["-c", `grep -rl ${SECRET} ${home?.path} 2>/dev/null || true`], {
      encoding: "utf8",
    });
    expect(inHome).toBe("");

    // The pool is gone (ttl 0): each worker exits and its shell unmounts the volumes.
    const deadline = Date.now() + 30_000;
    while (hostMounts().some((mounts) => mounts.length > 0) && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 200));
    expect(hostMounts()).toEqual([[], []]);
    // No key was left on the hosts (the self-destruct removed each root, passwd files included).
    for (const host of bed.hosts) {
      const left = execFileSync("sh", ["-c", `grep -rl ${SECRET} ${host.root} 2>/dev/null || true`], {
        encoding: "utf8",
      });
      expect(left).toBe("");
    }
  }, 300_000);

  it("unmounts when the worker is killed with SIGKILL", async () => {
    const pool = await sky.compute({
      provider: SSH({ hosts: testbedSshHosts(bed, { indices: [1] }) }),
      nodes: 1,
      ttl: 600,
      image: { includes: [tasks] },
      volumes: [
        {
          bucket: "datasets",
          mount: "/mnt/skyward-e2e/killed",
          storage: {
            endpoint: moto.endpoint,
            accessKeyEnv: "SKYT_VOLUME_KEY",
            secretKeyEnv: "SKYT_VOLUME_SECRET",
            pathStyle: true,
          },
        },
      ],
      options: { console: false },
    });
    try {
      const pid = await pool.run(workerPid());
      const mountsOf = () =>
        readFileSync(`/proc/${bed.hosts[1]?.sshdPid}/mounts`, "utf8")
          .split("\n")
          .filter((line) => line.includes(" fuse.s3fs "));
      expect(mountsOf()).toHaveLength(1);
      // The hosts share this machine's process ids (only network and mount namespaces differ).
      process.kill(pid, "SIGKILL");
      const deadline = Date.now() + 20_000;
      while (mountsOf().length > 0 && Date.now() < deadline)
        await new Promise((resolve) => setTimeout(resolve, 100));
      expect(mountsOf()).toEqual([]);
    } finally {
      await pool.close().catch(() => undefined);
    }
  }, 120_000);

  it("a later pool with other settings replaces a released worker and mounts again, once", async () => {
    const volumes = [
      {
        bucket: "datasets",
        mount: "/mnt/skyward-e2e/replaced",
        prefix: "v1",
        storage: {
          endpoint: moto.endpoint,
          accessKeyEnv: "SKYT_VOLUME_KEY",
          secretKeyEnv: "SKYT_VOLUME_SECRET",
          pathStyle: true,
        },
      },
    ];
    const mountsOf = () =>
      readFileSync(`/proc/${bed.hosts[0]?.sshdPid}/mounts`, "utf8")
        .split("\n")
        .filter((line) => line.includes(" fuse.s3fs "))
        .map((line) => line.split(" ")[1]);
    const first = await sky.compute({
      provider: SSH({ hosts: testbedSshHosts(bed, { indices: [0] }) }),
      nodes: 1,
      ttl: 600,
      image: { includes: [tasks], env: { RUN: "first" } },
      volumes,
      options: { console: false },
    });
    const firstPid = await first.run(workerPid());
    await first.close();
    // Released, waiting out its TTL: still mounted.
    expect(mountsOf()).toEqual(["/mnt/skyward-e2e/replaced"]);
    {
      await using second = await sky.compute({
        provider: SSH({ hosts: testbedSshHosts(bed, { indices: [0] }) }),
        nodes: 1,
        ttl: 0,
        image: { includes: [tasks], env: { RUN: "second" } },
        volumes,
        options: { console: false },
      });
      expect(await second.run(workerPid())).not.toBe(firstPid);
      expect(await second.run(listDir("/mnt/skyward-e2e/replaced"))).toEqual(["train.csv"]);
      expect(mountsOf()).toEqual(["/mnt/skyward-e2e/replaced"]);
    }
    const deadline = Date.now() + 20_000;
    while (mountsOf().length > 0 && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 100));
    expect(mountsOf()).toEqual([]);
  }, 180_000);

  it("a volume that cannot be mounted stops the node with s3fs's reason (phase volumes)", async () => {
    const failure = await sky
      .compute({
        provider: SSH({ hosts: testbedSshHosts(bed, { indices: [0] }) }),
        nodes: 1,
        ttl: 0,
        image: { includes: [tasks] },
        volumes: [
          {
            bucket: "no-such-bucket",
            mount: "/mnt/skyward-e2e/missing",
            storage: {
              endpoint: moto.endpoint,
              accessKeyEnv: "SKYT_VOLUME_KEY",
              secretKeyEnv: "SKYT_VOLUME_SECRET",
              pathStyle: true,
            },
          },
        ],
        options: { console: false },
      })
      .then(
        () => undefined,
        (error: unknown) => error,
      );
    expect(String(failure)).toMatch(/Mounting the volumes failed on node 0 .*s3fs/s);
    const phases = [failure, (failure as { cause?: unknown })?.cause].map(
      (error) => (error as { phase?: string })?.phase,
    );
    expect(phases).toContain("volumes");
    expect(String(failure)).not.toContain(SECRET);
  }, 120_000);

  it("a warm node without includes starts a pool whose volumes differ from the last one's", async () => {
    const storage = {
      endpoint: moto.endpoint,
      accessKeyEnv: "SKYT_VOLUME_KEY",
      secretKeyEnv: "SKYT_VOLUME_SECRET",
      pathStyle: true,
    };
    for (const count of [1, 2]) {
      // The same image both times: the second bootstrap is warm, after the first pool's self-destruct.
      await using pool = await sky.compute({
        provider: SSH({ hosts: testbedSshHosts(bed, { indices: [1] }) }),
        nodes: 1,
        ttl: 0,
        volumes: Array.from({ length: count }, (_, index) => ({
          bucket: "datasets",
          mount: `/mnt/skyward-e2e/warm-${index}`,
          prefix: "v1",
          storage,
        })),
        options: { console: false },
      });
      const listed = await pool.run(sky.shell(`ls /mnt/skyward-e2e/warm-${count - 1}`));
      expect(listed.stdout.trim()).toBe("train.csv");
    }
  }, 180_000);

  it("a storage without keys off AWS mounts the bucket anonymously (public_bucket=1): no passwd file", async () => {
    // A public bucket (anonymous reads allowed by its ACL), and the private one beside it.
    const admin = new S3Client({
      endpoint: moto.endpoint,
      region: "us-east-1",
      forcePathStyle: true,
      credentials: { accessKeyId: "testing", secretAccessKey: "testing" },
    });
    await admin.send(new CreateBucketCommand({ Bucket: "open-data", ACL: "public-read" }));
    await admin.send(
      new PutObjectCommand({
        Bucket: "open-data",
        Key: "v1/readme.txt",
        Body: "open data",
        ACL: "public-read",
      }),
    );
    admin.destroy();
    await store.write("datasets", "v1/private.txt", "private data");
    {
      await using pool = await sky.compute({
        provider: SSH({ hosts: testbedSshHosts(bed, { indices: [1] }) }),
        nodes: 1,
        ttl: 0,
        image: { includes: [tasks] },
        // No accessKeyEnv/secretKeyEnv: there is no instance role off AWS, so s3fs signs nothing.
        volumes: [
          {
            bucket: "open-data",
            mount: "/mnt/skyward-e2e/public",
            prefix: "v1",
            storage: { endpoint: moto.endpoint, pathStyle: true },
          },
          {
            bucket: "datasets",
            mount: "/mnt/skyward-e2e/private",
            prefix: "v1",
            storage: { endpoint: moto.endpoint, pathStyle: true },
          },
        ],
        options: { console: false },
      });
      expect(await pool.run(readDataset("/mnt/skyward-e2e/public/readme.txt"))).toBe("open data");
      // Anonymous requests: the private bucket's object is refused (moto answers 403; s3fs shows nothing).
      expect(await pool.run(readDataset("/mnt/skyward-e2e/private/private.txt")).catch(() => "")).toBe("");
      // This pool's s3fs processes only: the hosts share this machine's process table, and another
      // package's tests (provider-aws's instance-role volumes) may run s3fs with iam_role meanwhile.
      const processes = (await pool.run(processList()))
        .split("\n")
        .filter((line) => /\/mnt\/skyward-e2e\/(public|private)(\s|$)/.test(line))
        .join("\n");
      expect(processes).toMatch(/s3fs .*public_bucket=1/);
      expect(processes).not.toMatch(/passwd_file|iam_role/);
      const listed = await pool.run(sky.shell(`ls ${bed.hosts[1]?.root}/volumes`));
      expect(listed.stdout).not.toContain("passwd");
    }
  }, 120_000);

  it("refuses a volume whose key variable is not set, naming the field, before a worker starts", async () => {
    const pool = sky.compute({
      provider: SSH({ hosts: testbedSshHosts(bed, { indices: [0] }) }),
      nodes: 1,
      ttl: 0,
      volumes: [
        {
          bucket: "datasets",
          mount: "/mnt/skyward-e2e/data",
          storage: {
            endpoint: moto.endpoint,
            accessKeyEnv: "SKYT_UNSET_KEY",
            secretKeyEnv: "SKYT_VOLUME_SECRET",
          },
        },
      ],
      options: { console: false },
    });
    await expect(pool).rejects.toThrow(/volumes\[0\]\.storage\.accessKeyEnv.*SKYT_UNSET_KEY is not set/s);
  }, 120_000);
});
