// What stands in for a cloud here: two SSH hosts of the test bed (real sshd in network namespaces on
// this machine, root only) and moto's S3 on the test bed's bridge, with s3fs installed on the machine
// (the hosts share its filesystem). Used when no hosts and bucket store are configured.
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { CreateBucketCommand, S3Client } from "@aws-sdk/client-s3";
import { createTestbed, requireTestbed, testbedSshHosts } from "@skyward/testing";

const providerAwsVenv = fileURLToPath(
  new URL("../../../packages/provider-aws/.venv/bin/python", import.meta.url),
);

/** The stand-in cannot run on this machine (not root, no network namespaces, no moto); says why. */
export class StandInUnavailable extends Error {}

export interface StandIn extends AsyncDisposable {
  readonly hosts: ReturnType<typeof testbedSshHosts>;
  readonly endpoint: string;
}

/** Starts the stand-in, or says why it cannot run here. */
export async function startStandIn(buckets: readonly string[]): Promise<StandIn> {
  const skip = await requireTestbed();
  if (skip) throw new StandInUnavailable(`the test bed cannot run here: ${skip}`);
  const python = [process.env.SKYWARD_MOTO_PYTHON, providerAwsVenv].find((path) => path && existsSync(path));
  if (!python)
    throw new Error(
      "no moto: set SKYWARD_MOTO_PYTHON or run `pnpm --filter @skyward/provider-aws setup:moto`",
    );
  const bed = await createTestbed({ hosts: 2 });
  const moto = spawn(python, ["-m", "moto.server", "-H", bed.bridgeAddress, "-p", "0"], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  const port = await new Promise<string>((resolve, reject) => {
    let output = "";
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const match = /Running on http:\/\/[^:\s]+:(\d+)/.exec(output);
      if (match?.[1]) resolve(match[1]);
    };
    moto.stdout.on("data", onData);
    moto.stderr.on("data", onData);
    moto.once("exit", (code) => reject(new Error(`moto exited (${code}):\n${output}`)));
  });
  moto.stdout.resume();
  moto.stderr.resume();
  const endpoint = `http://${bed.bridgeAddress}:${port}`;
  const admin = new S3Client({
    endpoint,
    region: "us-east-1",
    forcePathStyle: true,
    credentials: { accessKeyId: "testing", secretAccessKey: "testing" },
  });
  for (const bucket of buckets) await admin.send(new CreateBucketCommand({ Bucket: bucket }));
  admin.destroy();
  return {
    hosts: testbedSshHosts(bed),
    endpoint,
    async [Symbol.asyncDispose]() {
      moto.kill("SIGTERM");
      await bed.teardown();
    },
  };
}
