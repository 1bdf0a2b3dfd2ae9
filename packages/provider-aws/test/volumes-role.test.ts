/**
 * Volumes without keys on AWS: the instance's role. A pool on AWS (moto) whose instance is a test-bed
 * host mounts a bucket of moto's S3 with the instance's role: the volumes phase reads the role's name
 * and s3fs the role's credentials from the instance metadata service at 169.254.169.254, which
 * answers inside that host's network namespace only (`serveFakeImdsInNamespace`), IMDSv2 only (a
 * token first: s3fs 1.90's own `iam_role=auto` asks without one and fails there). The fake IMDS answers
 * what the instance was really given: it looks up the instance's `IamInstanceProfile` at moto (set
 * from the provider's `instanceProfile` setting at `RunInstances`), the profile's role, and hands out
 * credentials moto's STS issued for that role (`AssumeRole`). A task reads a file through the mounted
 * volume; no key is in any process list, the client's logs or the host's root. Without a role on the
 * profile the mount fails saying so; without `instanceProfile` the volume is refused before
 * any instance starts.
 *
 * IAM and STS are reached with their Query APIs (moto does not check signatures):
 * https://docs.aws.amazon.com/IAM/latest/APIReference/API_CreateInstanceProfile.html,
 * https://docs.aws.amazon.com/IAM/latest/APIReference/API_AddRoleToInstanceProfile.html,
 * https://docs.aws.amazon.com/STS/latest/APIReference/API_AssumeRole.html.
 */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { DescribeInstancesCommand, EC2Client } from "@aws-sdk/client-ec2";
import * as sky from "@skyward/core";
import {
  createTestbed,
  type FakeImds,
  type FakeImdsRole,
  isCi,
  type NamespaceImds,
  requireTestbed,
  type ScratchSkywardHome,
  serveFakeImdsInNamespace,
  startFakeImds,
  type Testbed,
  testbedSshHost,
  useScratchSkywardHome,
} from "@skyward/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AWS, type AwsSettings, type SshAddressMapping } from "../src/index.js";
import {
  type MotoServer,
  motoInventory,
  motoSkipReason,
  startMoto,
  useFakeAwsEnvironment,
} from "./moto-server.js";

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

const skipReason = motoSkipReason() ?? (await requireTestbed()) ?? s3fsSkipReason();
const tasks = fileURLToPath(new URL("./fixtures/aws_tasks.py", import.meta.url));
const readText = sky.python<[string], string>("aws_tasks:read_text");
const processList = sky.python<[], string>("aws_tasks:process_list");

/** A Query API call to moto (IAM, STS); the signature is not checked, the scope picks the service. */
async function motoQuery(endpoint: string, service: "iam" | "sts", params: Record<string, string>) {
  const response = await fetch(endpoint, {
    method: "POST",
    headers: {
      "content-type": "application/x-www-form-urlencoded",
      authorization: `AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/${service}/aws4_request, SignedHeaders=host, Signature=0`,
    },
    body: new URLSearchParams({ Version: service === "iam" ? "2010-05-08" : "2011-06-15", ...params }),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`${service} ${params.Action}: HTTP ${response.status}: ${text}`);
  return text;
}

function xmlField(xml: string, name: string): string {
  const value = new RegExp(`<${name}>([^<]*)</${name}>`).exec(xml)?.[1];
  if (value === undefined) throw new Error(`no <${name}> in ${xml}`);
  return value;
}

/** An S3 request to moto, path-style. */
async function motoS3(endpoint: string, method: "PUT" | "GET", path: string, body?: string) {
  const response = await fetch(`${endpoint}${path}`, {
    method,
    headers: {
      authorization:
        "AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=0",
      "x-amz-content-sha256": "UNSIGNED-PAYLOAD",
    },
    ...(body === undefined ? {} : { body }),
  });
  if (!response.ok)
    throw new Error(`S3 ${method} ${path}: HTTP ${response.status}: ${await response.text()}`);
  return response.text();
}

describe.skipIf(skipReason !== undefined)(
  "volumes with the instance's role on AWS (moto, a fake IMDS)",
  () => {
    let restoreEnvironment: () => void = () => undefined;
    let home: ScratchSkywardHome | undefined;
    let bed: Testbed;
    let moto: MotoServer;
    let ec2: EC2Client;
    let imds: FakeImds;
    const served: NamespaceImds[] = [];
    /** The instance each test-bed host stands in for now (host name → instance id). */
    const onHost = new Map<string, string>();
    /** Instance profile ARN → its role's ARN (none for a profile without a role). */
    const profileRoles = new Map<string, string | undefined>();
    /** Every credential the fake IMDS handed out: none may leak. */
    const issued: FakeImdsRole[] = [];

    beforeAll(async () => {
      restoreEnvironment = useFakeAwsEnvironment();
      home = await useScratchSkywardHome("skyward-aws-volume-role-");
      bed = await createTestbed({ hosts: 2 });
      // On the bridge: the hosts reach its S3; the provider reaches EC2 through the double on loopback.
      moto = await startMoto({ host: bed.bridgeAddress });
      ec2 = new EC2Client({
        region: "us-east-1",
        endpoint: moto.endpoint,
        credentials: { accessKeyId: "testing", secretAccessKey: "testing" },
      });
      const trust = JSON.stringify({
        Version: "2012-10-17",
        Statement: [
          { Effect: "Allow", Principal: { Service: "ec2.amazonaws.com" }, Action: "sts:AssumeRole" },
        ],
      });
      const role = await motoQuery(moto.motoEndpoint, "iam", {
        Action: "CreateRole",
        RoleName: "skyward-volumes-read",
        AssumeRolePolicyDocument: trust,
      });
      for (const [name, withRole] of [
        ["skyward-volumes", true],
        ["skyward-no-role", false],
      ] as const) {
        const profile = await motoQuery(moto.motoEndpoint, "iam", {
          Action: "CreateInstanceProfile",
          InstanceProfileName: name,
        });
        if (withRole)
          await motoQuery(moto.motoEndpoint, "iam", {
            Action: "AddRoleToInstanceProfile",
            InstanceProfileName: name,
            RoleName: "skyward-volumes-read",
          });
        profileRoles.set(xmlField(profile, "Arn"), withRole ? xmlField(role, "Arn") : undefined);
      }
      await motoS3(moto.motoEndpoint, "PUT", "/datasets");
      await motoS3(moto.motoEndpoint, "PUT", "/datasets/v1/train.csv", "x,y\n1,2\n");

      imds = await startFakeImds({
        host: bed.bridgeAddress,
        // What the instance standing on this host was given at RunInstances, looked up when s3fs asks.
        async roleOf(hostName) {
          const instanceId = onHost.get(hostName);
          if (!instanceId) return undefined;
          const described = await ec2.send(new DescribeInstancesCommand({ InstanceIds: [instanceId] }));
          const profileArn = described.Reservations?.[0]?.Instances?.[0]?.IamInstanceProfile?.Arn;
          const roleArn = profileArn ? profileRoles.get(profileArn) : undefined;
          if (!roleArn) return undefined;
          const assumed = await motoQuery(moto.motoEndpoint, "sts", {
            Action: "AssumeRole",
            RoleArn: roleArn,
            RoleSessionName: instanceId,
          });
          const credentials: FakeImdsRole = {
            name: roleArn.split("/").at(-1) ?? "",
            accessKeyId: xmlField(assumed, "AccessKeyId"),
            secretAccessKey: xmlField(assumed, "SecretAccessKey"),
            token: xmlField(assumed, "SessionToken"),
            expiration: new Date(xmlField(assumed, "Expiration")),
            instanceProfileArn: profileArn,
          };
          issued.push(credentials);
          return credentials;
        },
      });
      for (const [index, host] of bed.hosts.entries())
        served.push(await serveFakeImdsInNamespace(bed, index, imds.endpointFor(host.name)));
    }, 180_000);

    afterAll(async () => {
      for (const proxy of served) await proxy.close();
      await imds?.close();
      ec2?.destroy();
      await moto?.stop();
      await bed?.teardown();
      restoreEnvironment();
      await home?.restore();
    });

    /** The AWS provider with each new instance standing on test-bed host `index`. */
    const provider = (index: number, settings: Partial<AwsSettings> = {}) => {
      const host = bed.hosts[index];
      if (!host) throw new Error(`no test-bed host ${index}`);
      return AWS({
        ...settings,
        endpoint: moto.endpoint,
        sshAddress: (instance): SshAddressMapping => {
          onHost.set(host.name, instance.id);
          return { ...testbedSshHost(host), privateIp: host.host, selfDestruct: "true" };
        },
      });
    };
    const volume = {
      bucket: "datasets",
      mount: "/mnt/skyward-role/data",
      prefix: "v1",
      // moto's S3, reached on the bridge; no accessKeyEnv/secretKeyEnv: on AWS, the instance's role.
      storage: { endpoint: "", pathStyle: true },
    };
    const mountsOf = (index: number) =>
      readFileSync(`/proc/${bed.hosts[index]?.sshdPid}/mounts`, "utf8")
        .split("\n")
        .filter((line) => line.includes(" fuse.s3fs "))
        .map((line) => line.split(" ")[1]);

    it("mounts with the instance profile's role from IMDSv2: a task reads through it, no key anywhere", async () => {
      const logs: string[] = [];
      const phases: string[] = [];
      {
        await using pool = await sky.compute(
          {
            provider: provider(0, { instanceProfile: "skyward-volumes" }),
            nodes: 1,
            vcpus: 2,
            memoryGb: 4,
            architecture: "x86_64",
            ttl: 0,
            image: { includes: [tasks] },
            volumes: [{ ...volume, storage: { ...volume.storage, endpoint: moto.motoEndpoint } }],
            options: { console: false, bootstrapTimeout: 240 },
          },
          {
            // Every event from the start: the bootstrap's phases and every log line.
            onEvent: (event) => {
              logs.push(JSON.stringify(event));
              if (event.type === "bootstrap.phase") phases.push(event.phase);
            },
          },
        );

        // The provider attached the instance profile the user named.
        const instanceId = onHost.get("host0") ?? "";
        const described = await ec2.send(new DescribeInstancesCommand({ InstanceIds: [instanceId] }));
        expect(described.Reservations?.[0]?.Instances?.[0]?.IamInstanceProfile?.Arn).toMatch(
          /:instance-profile\/skyward-volumes$/,
        );

        expect(await pool.run(readText("/mnt/skyward-role/data/train.csv"))).toBe("x,y\n1,2\n");
        expect(mountsOf(0)).toEqual(["/mnt/skyward-role/data"]);

        // s3fs asked for a token first (IMDSv2), then the role's name and its credentials.
        const asked = imds.requests.filter((request) => request.instanceId === "host0");
        expect(asked.map((request) => `${request.method} ${request.path} ${request.status}`)).toEqual(
          expect.arrayContaining([
            "PUT /latest/api/token 200",
            "GET /latest/meta-data/iam/security-credentials/ 200",
            "GET /latest/meta-data/iam/security-credentials/skyward-volumes-read 200",
          ]),
        );
        expect(asked.some((request) => request.status === 401)).toBe(false);
        expect(issued.length).toBeGreaterThan(0);
        expect(issued.every((credentials) => credentials.accessKeyId.startsWith("ASIA"))).toBe(true);

        // No key in any process list (the node's, and this machine's: the hosts share its pids).
        const processes = `${await pool.run(processList())}\n${execFileSync("ps", ["-eww", "-o", "args"], { encoding: "utf8" })}`;
        expect(processes).toMatch(/s3fs .*iam_role=skyward-volumes-read/);
        // Nor in the host's root (no passwd file: the keys live in s3fs's memory).
        const root = bed.hosts[0]?.root ?? "";
        for (const credentials of issued) {
          for (const secret of [credentials.secretAccessKey, credentials.token, credentials.accessKeyId]) {
            expect(processes).not.toContain(secret);
            const left = execFileSync(
              "sh",
              ["-c", 'grep -rlF -e "$1" "$2" 2>/dev/null || true', "sh", secret, root],
              {
                encoding: "utf8",
              },
            );
            expect(left).toBe("");
          }
        }
        expect(execFileSync("sh", ["-c", `ls ${root}/volumes`], { encoding: "utf8" })).not.toContain(
          "passwd",
        );
      }
      expect(phases).toContain("volumes");
      const inHome = execFileSync(
        "sh",
        [
          "-c",
          'grep -rlF -e "$1" "$2" 2>/dev/null || true',
          "sh",
          issued[0]?.secretAccessKey ?? "-",
          home?.path ?? "-",
        ],
        {
          encoding: "utf8",
        },
      );
      expect(inHome).toBe("");
      expect(logs.length).toBeGreaterThan(0);
      for (const credentials of issued)
        for (const secret of [credentials.secretAccessKey, credentials.token])
          expect(logs.join("\n")).not.toContain(secret);

      // Released with ttl 0: the worker exits and its shell unmounts the volume.
      const deadline = Date.now() + 30_000;
      while (mountsOf(0).length > 0 && Date.now() < deadline)
        await new Promise((resolve) => setTimeout(resolve, 200));
      expect(mountsOf(0)).toEqual([]);
    }, 400_000);

    it("an instance profile without a role: the mount fails saying so (phase volumes)", async () => {
      const failure = await sky
        .compute({
          provider: provider(1, { instanceProfile: "skyward-no-role" }),
          nodes: 1,
          vcpus: 2,
          memoryGb: 4,
          architecture: "x86_64",
          ttl: 0,
          image: { includes: [tasks] },
          volumes: [{ ...volume, storage: { ...volume.storage, endpoint: moto.motoEndpoint } }],
          options: { console: false, bootstrapTimeout: 240 },
        })
        .then(
          async (pool) => {
            await pool.close();
            return undefined;
          },
          (error: unknown) => error,
        );
      expect(String(failure)).toMatch(
        /Mounting the volumes failed on node 0 .*this instance has no IAM role \(it was launched without an instance profile\)/s,
      );
      const phases = [failure, (failure as { cause?: unknown })?.cause].map(
        (error) => (error as { phase?: string })?.phase,
      );
      expect(phases).toContain("volumes");
      // It did ask, and was told there is no role.
      expect(imds.requests).toContainEqual(
        expect.objectContaining({
          instanceId: "host1",
          path: "/latest/meta-data/iam/security-credentials/",
          status: 404,
        }),
      );
      expect(mountsOf(1)).toEqual([]);
    }, 400_000);

    it("refuses a volume without keys when no instanceProfile is set, before any instance starts", async () => {
      const before = (await motoInventory(moto.endpoint)).liveInstances;
      const attempt = sky.compute({
        provider: provider(1),
        nodes: 1,
        vcpus: 2,
        memoryGb: 4,
        architecture: "x86_64",
        ttl: 0,
        volumes: [
          { ...volume, storage: { ...volume.storage, endpoint: moto.motoEndpoint } },
          { bucket: "datasets", mount: "/mnt/skyward-role/s3" },
        ],
        options: { console: false },
      });
      const error = await attempt.then(
        () => undefined,
        (caught: unknown) => caught,
      );
      expect(error).toBeInstanceOf(sky.ConfigurationError);
      const issues = (error as sky.ConfigurationError).issues;
      expect(issues.map((issue) => issue.path)).toEqual(["volumes[0].storage", "volumes[1].storage"]);
      expect(issues[0]?.message).toMatch(/instanceProfile/);
      expect((await motoInventory(moto.endpoint)).liveInstances).toEqual(before);
    }, 120_000);
  },
);
