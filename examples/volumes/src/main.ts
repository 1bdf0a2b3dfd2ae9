// Datasets and checkpoints through volumes (the Python project's guide 17, on CPU): the client
// uploads a dataset with @skyward/storage, every node reads it from a read-only volume and writes
// checkpoints to a writable one with plain file I/O, and the client downloads the last checkpoint.
//
// Hosts and the bucket store come from SKYWARD_EXAMPLE_HOSTS (JSON: [{ host, user, identityFile }])
// and S3_ENDPOINT, S3_ACCESS_KEY, S3_SECRET_KEY; without them a stand-in runs on this machine: two
// test-bed SSH hosts and moto's S3 (root, s3fs and moto needed; see README.md).
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";
import { SSH, type SshHostInput } from "@skyward/provider-ssh";
import { Storage } from "@skyward/storage";
import { isCi } from "@skyward/testing";
import { type StandIn, StandInUnavailable, startStandIn } from "./standin.ts";

interface Trained {
  node: number;
  rows: number;
  losses: number[];
  weight: number;
  bias: number;
  checkpoints: string[];
}

const train = sky.python<
  [dataDir: string, checkpointDir: string, epochs: number, learningRate: number, every: number],
  Trained
>("tasks:train");
const tryToWrite = sky.python<[dataDir: string], string>("tasks:try_to_write");

let standIn: StandIn | undefined;
let hosts: SshHostInput[];
let endpoint: string;
if (process.env.SKYWARD_EXAMPLE_HOSTS && process.env.S3_ENDPOINT) {
  hosts = JSON.parse(process.env.SKYWARD_EXAMPLE_HOSTS) as SshHostInput[];
  endpoint = process.env.S3_ENDPOINT;
} else {
  try {
    standIn = await startStandIn(["datasets", "checkpoints"]);
  } catch (error) {
    // Off CI, a machine that cannot host the stand-in skips the example, saying why.
    if (!(error instanceof StandInUnavailable) || isCi()) throw error;
    console.error(`skipped: ${error.message}`);
    process.exit(0);
  }
  hosts = [...standIn.hosts];
  endpoint = standIn.endpoint;
  process.env.S3_ACCESS_KEY = "testing";
  process.env.S3_SECRET_KEY = "testing";
}
const work = await mkdtemp(join(tmpdir(), "skyward-example-volumes-"));
try {
  // y = 3x + 1, with a little noise: the dataset, uploaded from this machine.
  const rows = Array.from({ length: 400 }, (_, i) => {
    const x = i / 400;
    return `${x},${3 * x + 1 + Math.sin(i) * 0.01}`;
  });
  await writeFile(join(work, "train.csv"), `x,y\n${rows.join("\n")}\n`);
  const store = new Storage({
    endpoint,
    accessKey: () => process.env.S3_ACCESS_KEY ?? "",
    secretKey: () => process.env.S3_SECRET_KEY ?? "",
    pathStyle: true,
  });
  await store.upload("datasets", join(work, "train.csv"), { key: "linear/v1/train.csv" });

  const storage = { endpoint, accessKeyEnv: "S3_ACCESS_KEY", secretKeyEnv: "S3_SECRET_KEY", pathStyle: true };
  {
    await using pool = await sky.compute({
      provider: SSH({ hosts }),
      nodes: 2,
      ttl: 0,
      image: { includes: [fileURLToPath(new URL("./tasks.py", import.meta.url))] },
      volumes: [
        { bucket: "datasets", mount: "/mnt/datasets", prefix: "linear/v1" },
        { bucket: "checkpoints", mount: "/mnt/checkpoints", prefix: "linear-run-1", readOnly: false },
      ].map((volume) => ({ ...volume, storage })),
    });

    const results = await pool.broadcast(train("/mnt/datasets", "/mnt/checkpoints", 300, 0.5, 30));
    for (const result of results) {
      console.log(
        `node ${result.node}: ${result.rows} rows, loss ${result.losses[0]?.toFixed(4)} → ${result.losses.at(-1)?.toFixed(5)}, y ≈ ${result.weight.toFixed(2)}x + ${result.bias.toFixed(2)}`,
      );
      assert.equal(result.rows, 200);
      assert.ok((result.losses.at(-1) ?? 1) < (result.losses[0] ?? 0) / 10, "the loss fell");
      assert.ok(
        Math.abs(result.weight - 3) < 0.2 && Math.abs(result.bias - 1) < 0.1,
        "the model learned y = 3x + 1",
      );
      assert.equal(result.checkpoints.length, 10);
    }
    // The dataset's volume is read-only.
    assert.equal(await pool.run(tryToWrite("/mnt/datasets")), "Read-only file system");
  }

  // The checkpoints are in the bucket, under the volume's prefix: download the last one of node 0.
  // (s3fs also stores each directory a task made as an empty `dir/` object.)
  const keys = (await store.ls("checkpoints", "linear-run-1/")).filter((key) => key.endsWith(".json"));
  assert.equal(keys.length, 20);
  await store.download("checkpoints", "linear-run-1/node-0/epoch-300.json", join(work, "last.json"));
  const last = JSON.parse(await readFile(join(work, "last.json"), "utf8")) as {
    epoch: number;
    weight: number;
  };
  console.log(
    `downloaded ${keys.length} checkpoints; the last one: epoch ${last.epoch}, weight ${last.weight.toFixed(3)}`,
  );
  assert.equal(last.epoch, 300);
  store.close();
} finally {
  await rm(work, { recursive: true, force: true });
  await standIn?.[Symbol.asyncDispose]();
}
