/**
 * `sky.storage` inside a task on a test-bed host, against moto's S3 on the bridge: the task downloads
 * what the client uploaded and uploads a result the client reads. boto3 is installed on the node by
 * the image's `pip`, from PyPI through the test bed's proxy.
 */

import { fileURLToPath } from "node:url";
import { CreateBucketCommand, S3Client } from "@aws-sdk/client-s3";
import * as sky from "@skyward/core";
import { SSH } from "@skyward/provider-ssh";
import {
  createPypiProxy,
  createTestbed,
  type PypiProxy,
  requireTestbed,
  type ScratchSkywardHome,
  type Testbed,
  testbedSshHosts,
  useScratchSkywardHome,
} from "@skyward/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Storage } from "../src/index.js";
import { type MotoS3, motoSkipReason, startMotoS3 } from "./moto-s3.js";

const skip = (await requireTestbed()) ?? motoSkipReason();
const tasks = fileURLToPath(new URL("./fixtures/volume_tasks.py", import.meta.url));
const roundtrip = sky.python<
  [endpoint: string, bucket: string],
  { total: number; key: string; listed: string[]; repr: string }
>("volume_tasks:storage_roundtrip");

describe.skipIf(skip !== undefined)("sky.storage in a task", () => {
  let bed: Testbed;
  let home: ScratchSkywardHome | undefined;
  let moto: MotoS3;
  let proxy: PypiProxy;

  beforeAll(async () => {
    bed = await createTestbed({ hosts: 1 });
    home = await useScratchSkywardHome("skyward-task-storage-");
    moto = await startMotoS3(bed.bridgeAddress);
    proxy = await createPypiProxy({ testbed: bed });
    const admin = new S3Client({
      endpoint: moto.endpoint,
      region: "us-east-1",
      forcePathStyle: true,
      credentials: { accessKeyId: "testing", secretAccessKey: "testing" },
    });
    await admin.send(new CreateBucketCommand({ Bucket: "work" }));
    admin.destroy();
  }, 180_000);

  afterAll(async () => {
    await proxy?.close();
    await moto?.stop();
    await bed?.teardown();
    await home?.restore();
  });

  it("downloads the client's upload and uploads a result the client reads", async () => {
    await using store = new Storage({
      endpoint: moto.endpoint,
      accessKey: "testing",
      secretKey: "testing",
      pathStyle: true,
    });
    await store.write("work", "inputs/numbers.txt", "1\n2\n3\n4\n");
    await using pool = await sky.compute({
      provider: SSH({ hosts: testbedSshHosts(bed) }),
      nodes: 1,
      ttl: 0,
      image: {
        includes: [tasks],
        pip: ["boto3"],
        env: { ...proxy.env, TASK_S3_KEY: "testing", TASK_S3_SECRET: "task-secret-testing" },
      },
      options: { console: false, bootstrapTimeout: 300 },
    });
    const result = await pool.run(roundtrip(moto.endpoint, "work"));
    expect(result).toMatchObject({ total: 10, key: "outputs/total.txt", listed: ["outputs/total.txt"] });
    expect(result.repr).not.toContain("task-secret");
    const { body } = await store.read("work", "outputs/total.txt");
    let text = "";
    for await (const chunk of body) text += String(chunk);
    expect(text).toBe("10");
  }, 400_000);
});
