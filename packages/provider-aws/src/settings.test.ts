import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConfigurationError } from "@skyward/core";
import { describe, expect, it } from "vitest";
import { AWS, createProviderFromConfig } from "./aws-provider.js";
import { defaultRegion, resolveAwsSettings } from "./settings.js";

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

  it("refuses a pool's region that is no AWS region (an Availability Zone), naming region, before any request", async () => {
    // Nothing listens on this endpoint: a request would fail otherwise, not with a ConfigurationError.
    const provider = AWS({
      endpoint: "http://127.0.0.1:9",
      credentials: { accessKeyId: "given", secretAccessKey: "given" },
    });
    const offersIn = (region: string) =>
      provider
        .offers({
          query: { accelerator: null, allocation: "on-demand", region },
          signal: new AbortController().signal,
        })
        .catch((caught: unknown) => caught);
    const zone = await offersIn("us-east-1a");
    expect(ConfigurationError.isInstance(zone)).toBe(true);
    expect((zone as ConfigurationError).issues).toEqual([
      {
        path: "region",
        message:
          'expected an AWS region such as "us-east-1": "us-east-1a" is an Availability Zone (give its region, "us-east-1")',
      },
    ]);
    const other = await offersIn("Mars");
    expect((other as ConfigurationError).issues).toEqual([
      { path: "region", message: 'expected an AWS region such as "us-east-1", got "Mars"' },
    ]);
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
    expect(provider.capabilities).toMatchObject({ spot: true });
  });

  it("keys its cached offers by every setting that prices them: onDemandPrices and the pricing endpoint too", () => {
    // The core caches offers on disk by provider name and cacheKey: a provider with other prices must
    // not be handed offers priced by another (an ignored onDemandPrices on a warm cache).
    const keys = [
      AWS(),
      AWS({ onDemandPrices: { "t3a.medium": 36 } }),
      AWS({ onDemandPrices: { "t3a.medium": 37 } }),
      AWS({ pricingEndpoint: "http://127.0.0.1:1" }),
    ].map((provider) => provider.cacheKey);
    expect(new Set(keys).size).toBe(keys.length);
    // Equal settings, however ordered, share the cache.
    expect(AWS({ onDemandPrices: { "t3.medium": 1, "t3a.medium": 2 } }).cacheKey).toBe(
      AWS({ onDemandPrices: { "t3a.medium": 2, "t3.medium": 1 } }).cacheKey,
    );
  });

  it("takes the default region from AWS_REGION, AWS_DEFAULT_REGION, then the profile's region", () => {
    const directory = mkdtempSync(join(tmpdir(), "skyward-aws-config-"));
    try {
      const config = join(directory, "config");
      writeFileSync(
        config,
        "[default]\nregion = eu-west-1\n\n[profile work]\noutput = json\nregion = ap-south-1 # Mumbai\n",
      );
      const env = { AWS_CONFIG_FILE: config };
      expect(
        defaultRegion(undefined, { ...env, AWS_REGION: "us-west-2", AWS_DEFAULT_REGION: "eu-central-1" }),
      ).toBe("us-west-2");
      expect(defaultRegion(undefined, { ...env, AWS_DEFAULT_REGION: "eu-central-1" })).toBe("eu-central-1");
      expect(defaultRegion(undefined, env)).toBe("eu-west-1");
      expect(defaultRegion("work", env)).toBe("ap-south-1");
      expect(defaultRegion(undefined, { ...env, AWS_PROFILE: "work" })).toBe("ap-south-1");
      expect(defaultRegion("absent", env)).toBe("us-east-1");
      expect(defaultRegion(undefined, { AWS_CONFIG_FILE: join(directory, "none") })).toBe("us-east-1");
    } finally {
      rmSync(directory, { recursive: true, force: true });
    }
  });

  it("validates the real-account settings", () => {
    expect(
      resolveAwsSettings({ regions: ["us-west-2"], sshIngress: "client", associatePublicIp: false }),
    ).toMatchObject({
      regions: ["us-west-2"],
      sshIngress: "client",
      associatePublicIp: false,
    });
    expect(resolveAwsSettings({ regions: "all" }).regions).toBe("all");
    expect(issuesOf(() => AWS({ regions: ["mars-1"] }))[0]?.path).toMatch(/^AWS\.regions/);
    expect(issuesOf(() => AWS({ sshIngress: "everyone" as never }))).toEqual([
      {
        path: "AWS.sshIngress",
        message: 'expected "anywhere", "client" or a list of IPv4 CIDRs such as ["203.0.113.7/32"]',
      },
    ]);
    expect(issuesOf(() => AWS({ pricingEndpoint: "not a url" }))).toEqual([
      { path: "AWS.pricingEndpoint", message: "expected the Price List API's endpoint URL" },
    ]);
  });

  it("refuses sshIngress beside securityGroupId, whose rules are the user's and never changed", () => {
    // The rule sshIngress asks for is put on the group made per pool; a given group is used as it is.
    for (const sshIngress of ["client", "anywhere", ["203.0.113.7/32"]] as const)
      expect(issuesOf(() => AWS({ securityGroupId: "sg-0123abcd", sshIngress }))).toEqual([
        {
          path: "AWS.sshIngress",
          message:
            "applies to the security group made per pool; with securityGroupId that group's own rules decide who reaches SSH: leave sshIngress out, or securityGroupId",
        },
      ]);
    expect(resolveAwsSettings({ securityGroupId: "sg-0123abcd" }).sshIngress).toBe("anywhere");
    expect(resolveAwsSettings({}).sshIngress).toBe("anywhere");
  });

  it("takes the user's tags beside Skyward's, refusing Skyward's and AWS's keys, and spotMaxPrice", () => {
    // Tag restrictions: https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/Using_Tags.html#tag-restrictions
    const settings = resolveAwsSettings({
      tags: { "cost-center": "ml-42", team: "" },
      spotMaxPrice: "maxHourlyCost",
    });
    expect(settings.tags).toEqual({ "cost-center": "ml-42", team: "" });
    expect(settings.spotMaxPrice).toBe("maxHourlyCost");
    expect(resolveAwsSettings({})).toMatchObject({ tags: {}, spotMaxPrice: undefined });
    expect(
      issuesOf(() =>
        AWS({ tags: { "skyward:pool": "mine", Name: "x", "aws:cloudformation": "y", ok: "z".repeat(257) } }),
      ).map((issue) => issue.path),
    ).toEqual(["AWS.tags.skyward:pool", "AWS.tags.Name", "AWS.tags.aws:cloudformation", "AWS.tags.ok"]);
    expect(
      issuesOf(() => AWS({ tags: Object.fromEntries(Array.from({ length: 41 }, (_, i) => [`k${i}`, "v"])) })),
    ).toEqual([{ path: "AWS.tags", message: "expected at most 40 tags" }]);
    expect(issuesOf(() => AWS({ spotMaxPrice: "always" as "maxHourlyCost" }))).toEqual([
      { path: "AWS.spotMaxPrice", message: 'expected "maxHourlyCost"' },
    ]);
    // From skyward.toml: [providers.cloud.tags] keeps its keys as written.
    expect(() =>
      createProviderFromConfig({ tags: { "cost-center": "ml" }, spotMaxPrice: "maxHourlyCost" }),
    ).not.toThrow();
  });
});
