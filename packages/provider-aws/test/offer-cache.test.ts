/**
 * The offers the core caches on disk (a day: AWS is a catalogue) against moto: a provider acting in
 * another account, or on another EC2 endpoint, must not be handed the offers cached for the first, also
 * when the account or the endpoint is not a setting but comes from the environment. Each test lets the
 * first provider cache its offers, then asks the second through the same cache (the core's own code).
 * moto answers every account alike, so what tells the answers apart is that the second provider is
 * asked at all (its `offers` runs), while a provider of the same account is served from the cache.
 */
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { OfferQuery, OffersOptions } from "@skyward/core/contract";
// The core's offer cache itself (not exported): what pools put every offers() answer through.
import { cachedOffers } from "@skyward/core/contract";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { AWS, type AwsSettings } from "../src/index.js";
import { motoSkipReason } from "./moto-server.js";
import { useMotoSuite } from "./moto-suite.js";

const skipReason = motoSkipReason();
const call = () => ({ signal: AbortSignal.timeout(120_000) });
// Spot only: no Price List API is asked.
const t4: OfferQuery = { accelerator: { name: "T4", count: 1 }, allocation: "spot" };

/** The provider, with its `offers` calls counted. */
function counted(settings: AwsSettings) {
  const aws = AWS({ region: "us-east-1", ...settings });
  const calls = { offers: 0 };
  const provider: ReturnType<typeof AWS> = {
    ...aws,
    offers: (options: OffersOptions) => {
      calls.offers += 1;
      return aws.offers(options);
    },
  };
  return { provider, calls };
}

/** Asks each provider in turn through the cache; how many of them were asked themselves. */
async function asked(...providers: ReturnType<typeof counted>[]): Promise<number[]> {
  const counts: number[] = [];
  for (const { provider, calls } of providers) {
    const offers = await cachedOffers(provider, t4, call());
    expect(offers.map((offer) => offer.instanceType)).toContain("g4dn.xlarge");
    counts.push(calls.offers);
  }
  return counts;
}

describe.skipIf(skipReason !== undefined)("the AWS offer cache against moto", () => {
  const suite = useMotoSuite("skyward-aws-offer-cache-");

  beforeEach(async () => {
    // A fresh cache per test (the suite's scratch SKYWARD_HOME).
    vi.stubEnv("SKYWARD_HOME", join(suite.home.path, `cache-${Math.random().toString(36).slice(2)}`));
  });
  afterEach(() => {
    vi.unstubAllEnvs();
  });

  it("is not shared by providers given the keys of another account", async () => {
    const keys = (accessKeyId: string, secretAccessKey = "secret-one") => ({
      endpoint: suite.moto.endpoint,
      credentials: { accessKeyId, secretAccessKey },
    });
    expect(
      await asked(
        counted(keys("AKIAIOSFODNN7EXAMPLE")),
        counted(keys("AKIAI44QH8DHBEXAMPLE")),
        // The first account again, its secret rotated: the cache serves it.
        counted(keys("AKIAIOSFODNN7EXAMPLE", "secret-two")),
      ),
    ).toEqual([1, 1, 0]);
    // The key names the account by a hash: neither the key id nor the secret is in it.
    const key = AWS(keys("AKIAIOSFODNN7EXAMPLE")).cacheKey ?? "";
    expect(key).not.toContain("AKIAIOSFODNN7EXAMPLE");
    expect(key).not.toContain("secret-one");
  });

  it("is not shared by providers whose chain finds another account's keys in AWS_ACCESS_KEY_ID", async () => {
    const fromEnvironment = (accessKeyId: string) => {
      vi.stubEnv("AWS_ACCESS_KEY_ID", accessKeyId);
      return counted({ endpoint: suite.moto.endpoint });
    };
    expect(
      await asked(
        fromEnvironment("AKIAIOSFODNN7EXAMPLE"),
        fromEnvironment("AKIAI44QH8DHBEXAMPLE"),
        fromEnvironment("AKIAIOSFODNN7EXAMPLE"),
      ),
    ).toEqual([1, 1, 0]);
  });

  it("is not shared by providers of another profile named in AWS_PROFILE", async () => {
    // Two profiles of the same region, with the keys of two accounts (the files' format:
    // https://docs.aws.amazon.com/sdkref/latest/guide/file-format.html).
    const credentials = join(suite.home.path, "credentials");
    await writeFile(
      credentials,
      "[one]\naws_access_key_id = AKIAIOSFODNN7EXAMPLE\naws_secret_access_key = secret-one\n\n" +
        "[two]\naws_access_key_id = AKIAI44QH8DHBEXAMPLE\naws_secret_access_key = secret-two\n",
      { mode: 0o600 },
    );
    vi.stubEnv("AWS_SHARED_CREDENTIALS_FILE", credentials);
    const ofProfile = (profile: string) => {
      vi.stubEnv("AWS_PROFILE", profile);
      return counted({ endpoint: suite.moto.endpoint });
    };
    expect(await asked(ofProfile("one"), ofProfile("two"), ofProfile("one"))).toEqual([1, 1, 0]);
  });

  it("is not shared by providers the environment points at another EC2 endpoint", async () => {
    vi.stubEnv("AWS_ENDPOINT_URL_EC2", suite.moto.endpoint);
    expect(await asked(counted({}))).toEqual([1]);
    // Nothing listens there: that provider's own offers fail, rather than the first's being handed over.
    vi.stubEnv("AWS_ENDPOINT_URL_EC2", "http://127.0.0.1:9");
    // The provider's error taxonomy: an endpoint nothing answers is "unavailable", not "no offers".
    await expect(cachedOffers(counted({}).provider, t4, call())).rejects.toMatchObject({
      name: "MachineProviderError",
      kind: "unavailable",
      message: expect.stringContaining("DescribeInstanceTypes"),
    });
  });
});
