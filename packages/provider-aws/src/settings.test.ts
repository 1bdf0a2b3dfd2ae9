import { ConfigurationError } from "@skyward/core";
import { describe, expect, it } from "vitest";
import { AWS, createProviderFromConfig } from "./aws-provider.js";
import { resolveAwsSettings } from "./settings.js";

function issuesOf(run: () => unknown): { path: string; message: string }[] {
  try {
    run();
  } catch (error) {
    if (ConfigurationError.isInstance(error)) return [...error.issues];
    throw error;
  }
  throw new Error("expected a ConfigurationError");
}

describe("AWS settings", () => {
  it("applies the defaults", () => {
    const settings = resolveAwsSettings({});
    expect(settings).toMatchObject({
      region: "us-east-1",
      sshUser: "ubuntu",
      root: "/opt/skyward",
      endpoint: undefined,
      credentials: undefined,
      onDemandPrices: {},
    });
  });

  it("keeps what is given and strips a trailing slash from root", () => {
    const settings = resolveAwsSettings({
      region: "eu-west-1",
      endpoint: "http://127.0.0.1:5000",
      subnetId: "subnet-0123456789abcdef0",
      securityGroupId: "sg-0123abcd",
      amiId: "ami-0123456789abcdef0",
      instanceProfile: "skyward-s3",
      sshUser: "ec2-user",
      root: "/srv/skyward/",
      onDemandPrices: { "g5.xlarge": 0.9 },
    });
    expect(settings).toMatchObject({
      region: "eu-west-1",
      endpoint: "http://127.0.0.1:5000",
      root: "/srv/skyward",
      sshUser: "ec2-user",
      onDemandPrices: { "g5.xlarge": 0.9 },
    });
  });

  it("names every bad field under AWS.*", () => {
    const issues = issuesOf(() =>
      AWS({
        region: "Mars",
        endpoint: "not a url",
        subnetId: "vpc-1234",
        root: "relative",
        onDemandPrices: { "g5.xlarge": -1 },
      }),
    );
    expect(issues.map((issue) => issue.path).sort()).toEqual([
      "AWS.endpoint",
      "AWS.onDemandPrices.g5.xlarge",
      "AWS.region",
      "AWS.root",
      "AWS.subnetId",
    ]);
    expect(issues.find((issue) => issue.path === "AWS.region")?.message).toBe(
      'expected a region such as "us-east-1"',
    );
  });

  it("needs identityFile with keyName, and the other way round", () => {
    expect(issuesOf(() => AWS({ keyName: "mine" }))).toEqual([
      { path: "AWS.identityFile", message: "expected the private key file of keyName" },
    ]);
    expect(issuesOf(() => AWS({ identityFile: "/tmp/key.pem" }))).toEqual([
      { path: "AWS.keyName", message: "expected the key pair name of identityFile" },
    ]);
  });

  it("reports unknown fields from skyward.toml without a prefix (the loader adds providers.NAME)", () => {
    expect(issuesOf(() => createProviderFromConfig({ region: "us-west-2", zone: "a" }))).toEqual([
      { path: "zone", message: "unknown field" },
    ]);
  });

  it("never echoes a secret given in the wrong shape", () => {
    const secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
    let message = "";
    try {
      AWS({ credentials: { accessKeyId: "AKIAEXAMPLE", secretAccessKey: secret, extra: secret } as never });
    } catch (error) {
      message = `${(error as Error).message} ${JSON.stringify((error as ConfigurationError).issues)}`;
    }
    expect(message).toContain("AWS.credentials");
    expect(message).not.toContain(secret);
  });

  it("creates a v1 provider named aws with spot and images", () => {
    const provider = AWS();
    expect(provider.specificationVersion).toBe("v1");
    expect(provider.name).toBe("aws");
    expect(provider.capabilities).toMatchObject({ spot: true, images: true, volumes: false });
  });
});
