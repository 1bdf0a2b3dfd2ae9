/**
 * The fake IMDS's instance-profile paths, read the way a node reads them: with curl inside a test-bed
 * host's namespace, at 169.254.169.254 (which `serveFakeImdsInNamespace` puts there, and only there).
 */
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type FakeImds,
  IMDS_ADDRESS,
  type NamespaceImds,
  serveFakeImdsInNamespace,
  startFakeImds,
} from "./fake-imds.js";
import { runCommand } from "./process.js";
import { createTestbed, findExecutable, requireTestbed, type Testbed } from "./testbed.js";

const skipReason = (await requireTestbed()) ?? (findExecutable("curl") ? undefined : "curl is not installed");

describe.skipIf(skipReason !== undefined)("the fake IMDS at 169.254.169.254 inside a test-bed host", () => {
  let bed: Testbed;
  let imds: FakeImds;
  let served: NamespaceImds;

  beforeAll(async () => {
    bed = await createTestbed({ hosts: 2 });
    imds = await startFakeImds({ host: bed.bridgeAddress });
    served = await serveFakeImdsInNamespace(bed, 0, imds.endpointFor("i-0123456789abcdef0"));
  }, 120_000);

  afterAll(async () => {
    await served?.close();
    await imds?.close();
    await bed?.teardown();
  });

  const curl = (hostIndex: number, args: string[]) =>
    bed.exec(hostIndex, ["curl", "-s", "-m", "5", "-w", "\n%{http_code}", ...args]);
  const token = async (hostIndex: number) => {
    const answer = await curl(hostIndex, [
      "-X",
      "PUT",
      "-H",
      "X-aws-ec2-metadata-token-ttl-seconds: 60",
      `http://${IMDS_ADDRESS}/latest/api/token`,
    ]);
    const [value, status] = answer.stdout.split("\n");
    expect(status).toBe("200");
    return value ?? "";
  };
  const get = async (hostIndex: number, path: string, sessionToken?: string) => {
    const answer = await curl(hostIndex, [
      ...(sessionToken ? ["-H", `X-aws-ec2-metadata-token: ${sessionToken}`] : []),
      `http://${IMDS_ADDRESS}${path}`,
    ]);
    const lines = answer.stdout.split("\n");
    return { status: lines.at(-1), body: lines.slice(0, -1).join("\n") };
  };

  it("serves the role's name and credentials only with an IMDSv2 token, and 404 without a profile", async () => {
    const path = "/latest/meta-data/iam/security-credentials/";
    const session = await token(0);
    expect(await get(0, path, session)).toEqual({ status: "404", body: "" });

    imds.attachRole("i-0123456789abcdef0", {
      name: "skyward-s3",
      accessKeyId: "ASIAFAKEIMDSKEY00001",
      secretAccessKey: "fake-imds-secret",
      token: "fake-imds-session-token",
      expiration: new Date("2030-01-02T03:04:05Z"),
    });
    expect(await get(0, path)).toMatchObject({ status: "401" });
    expect(await get(0, path, session)).toEqual({ status: "200", body: "skyward-s3" });
    const credentials = await get(0, `${path}skyward-s3`, session);
    expect(credentials.status).toBe("200");
    expect(JSON.parse(credentials.body)).toMatchObject({
      Code: "Success",
      Type: "AWS-HMAC",
      AccessKeyId: "ASIAFAKEIMDSKEY00001",
      SecretAccessKey: "fake-imds-secret",
      Token: "fake-imds-session-token",
      Expiration: "2030-01-02T03:04:05Z",
    });
    expect(JSON.parse((await get(0, "/latest/meta-data/iam/info", session)).body)).toMatchObject({
      Code: "Success",
      InstanceProfileArn: "arn:aws:iam::123456789012:instance-profile/skyward-s3",
    });
    expect(await get(0, `${path}other-role`, session)).toMatchObject({ status: "404" });
    // The fake saw the requests under the instance's prefix.
    expect(
      imds.requests.filter((request) => request.instanceId === "i-0123456789abcdef0").length,
    ).toBeGreaterThan(4);
    imds.attachRole("i-0123456789abcdef0", undefined);
    expect(await get(0, path, session)).toMatchObject({ status: "404" });
  });

  it("looks a role up with roleOf when none was attached, on each request", async () => {
    const asked: string[] = [];
    await using lookup = await startFakeImds({
      host: bed.bridgeAddress,
      roleOf: async (id) => {
        asked.push(id);
        return id === "i-with-role"
          ? { name: "looked-up", accessKeyId: "ASIALOOKEDUP0000001", secretAccessKey: "s", token: "t" }
          : undefined;
      },
    });
    const tokenFor = async (id: string) =>
      (
        await fetch(`${lookup.endpointFor(id)}/latest/api/token`, {
          method: "PUT",
          headers: { "X-aws-ec2-metadata-token-ttl-seconds": "60" },
        })
      ).text();
    const ask = async (id: string, path: string) => {
      const response = await fetch(`${lookup.endpointFor(id)}${path}`, {
        headers: { "X-aws-ec2-metadata-token": await tokenFor(id) },
      });
      return { status: response.status, body: await response.text() };
    };
    const path = "/latest/meta-data/iam/security-credentials/";
    expect(await ask("i-with-role", path)).toEqual({ status: 200, body: "looked-up" });
    expect(JSON.parse((await ask("i-with-role", `${path}looked-up`)).body)).toMatchObject({
      AccessKeyId: "ASIALOOKEDUP0000001",
    });
    expect(await ask("i-without", path)).toMatchObject({ status: 404 });
    expect(asked).toEqual(["i-with-role", "i-with-role", "i-without"]);
    // Other paths never look a role up.
    await ask("i-with-role", "/latest/meta-data/spot/instance-action");
    expect(asked).toHaveLength(3);
  });

  it("puts the address in that host's namespace only, never on this machine's interfaces", async () => {
    const inHost = await bed.exec(0, ["ip", "-o", "address", "show", "dev", "lo"]);
    expect(inHost.stdout).toContain(`${IMDS_ADDRESS}/32`);
    const other = await bed.exec(1, ["ip", "-o", "address"]);
    expect(other.stdout).not.toContain(IMDS_ADDRESS);
    expect((await curl(1, [`http://${IMDS_ADDRESS}/latest/api/token`])).stdout.split("\n").at(-1)).toBe(
      "000",
    );
    const ip = findExecutable("ip") ?? "ip";
    const here = await runCommand(ip, ["-o", "address"]);
    expect(here.stdout).not.toContain(IMDS_ADDRESS);
    expect(readFileSync("/proc/net/fib_trie", "utf8")).not.toContain(IMDS_ADDRESS);
  });
});
