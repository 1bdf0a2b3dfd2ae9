import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  defaultPricingEndpoint,
  getProductsHeaders,
  PRICING_ENDPOINT,
  priceOfProduct,
  pricingSigningRegion,
  regionPrices,
  signRequest,
} from "./pricing.js";

/** A GetProducts answer with one product (shape: https://docs.aws.amazon.com/awsaccountbilling/latest/aboutv2/reading-an-offer.html). */
const productEntry = (instanceType: string, usd: string) =>
  JSON.stringify({
    product: { productFamily: "Compute Instance", attributes: { instanceType }, sku: "X" },
    terms: {
      OnDemand: {
        "X.JRTCKXETXF": {
          priceDimensions: { "X.JRTCKXETXF.6YS6EN2CT7": { unit: "Hrs", pricePerUnit: { USD: usd } } },
        },
      },
    },
  });

describe("the Price List API client", () => {
  it("signs as Signature Version 4 does (AWS's test suite, post-vanilla)", () => {
    // The "post-vanilla" case of AWS's Signature Version 4 test suite (aws-sig-v4-test-suite, linked
    // from https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_sigv-create-signed-request.html):
    // its credentials, date, host and expected Authorization header.
    const headers = signRequest({
      url: new URL("https://example.amazonaws.com/"),
      body: "",
      headers: {},
      credentials: {
        accessKeyId: "AKIDEXAMPLE",
        secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
      },
      region: "us-east-1",
      service: "service",
      now: new Date("2015-08-30T12:36:00Z"),
    });
    expect(headers.authorization).toBe(
      "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, Signature=5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b",
    );
    expect(headers["x-amz-date"]).toBe("20150830T123600Z");
    // A session token is sent and signed; the secret never is.
    const temporary = signRequest({
      url: new URL("https://api.pricing.us-east-1.amazonaws.com/"),
      body: "{}",
      headers: { "X-Amz-Target": "AWSPriceListService.GetProducts" },
      credentials: { accessKeyId: "AKID", secretAccessKey: "SECRET", sessionToken: "TOKEN" },
      region: "us-east-1",
      service: "pricing",
    });
    expect(temporary["x-amz-security-token"]).toBe("TOKEN");
    expect(temporary.authorization).toMatch(
      /SignedHeaders=host;x-amz-date;x-amz-security-token;x-amz-target,/,
    );
    expect(JSON.stringify(temporary)).not.toContain("SECRET");
  });

  it("reads the hourly USD price of a product (aws_v1 format) and skips anything else", () => {
    // Shape from https://docs.aws.amazon.com/awsaccountbilling/latest/aboutv2/reading-an-offer.html.
    const entry = JSON.stringify({
      product: { productFamily: "Compute Instance", attributes: { instanceType: "g4dn.xlarge" }, sku: "X" },
      terms: {
        OnDemand: {
          "X.JRTCKXETXF": {
            priceDimensions: {
              "X.JRTCKXETXF.6YS6EN2CT7": { unit: "Hrs", pricePerUnit: { USD: "0.5260000000" } },
            },
          },
        },
      },
    });
    expect(priceOfProduct(entry)).toEqual({ instanceType: "g4dn.xlarge", price: 0.526 });
    expect(priceOfProduct("{not json")).toBeUndefined();
    expect(priceOfProduct(JSON.stringify({ product: { attributes: {} } }))).toBeUndefined();
    const free = JSON.parse(entry);
    free.terms.OnDemand["X.JRTCKXETXF"].priceDimensions["X.JRTCKXETXF.6YS6EN2CT7"].pricePerUnit.USD =
      "0.0000000000";
    expect(priceOfProduct(JSON.stringify(free))).toBeUndefined();
  });

  it("signs for the Price List endpoint's own region, and never takes an EC2 endpoint of AWS's for it", () => {
    // The Query API's endpoints: https://docs.aws.amazon.com/awsaccountbilling/latest/aboutv2/using-price-list-query-api.html
    expect(pricingSigningRegion("https://api.pricing.ap-south-1.amazonaws.com")).toBe("ap-south-1");
    expect(pricingSigningRegion("https://api.pricing.eu-central-1.amazonaws.com")).toBe("eu-central-1");
    expect(pricingSigningRegion(PRICING_ENDPOINT)).toBe("us-east-1");
    expect(pricingSigningRegion("http://127.0.0.1:5000")).toBe("us-east-1");
    // A FIPS or VPC endpoint serves EC2 only; a fake (moto) serves everything on one address.
    expect(defaultPricingEndpoint(undefined)).toBe(PRICING_ENDPOINT);
    expect(defaultPricingEndpoint("https://ec2-fips.us-east-1.amazonaws.com")).toBe(PRICING_ENDPOINT);
    expect(
      defaultPricingEndpoint("https://vpce-0123456789abcdef0-abcdefgh.ec2.us-west-2.vpce.amazonaws.com"),
    ).toBe(PRICING_ENDPOINT);
    expect(defaultPricingEndpoint("http://127.0.0.1:5000")).toBe("http://127.0.0.1:5000");
  });

  it("signs GetProducts to the ap-south-1 endpoint for ap-south-1", () => {
    const headers = getProductsHeaders(new URL("https://api.pricing.ap-south-1.amazonaws.com"), "{}", {
      accessKeyId: "AKID",
      secretAccessKey: "SECRET",
    });
    expect(headers.authorization).toMatch(
      /^AWS4-HMAC-SHA256 Credential=AKID\/\d{8}\/ap-south-1\/pricing\/aws4_request, /,
    );
    expect(headers.host).toBe("api.pricing.ap-south-1.amazonaws.com");
    expect(headers["x-amz-target"]).toBe("AWSPriceListService.GetProducts");
  });

  it("reads a region's prices for two providers at once, each getting them (the cache written once each)", async () => {
    // Two AWS() providers of one program (two pools, or two providers in skyward.toml) ask the same
    // region's prices together: both are priced, neither fails writing the shared cache file.
    const server = createServer((request, response) => {
      request.resume();
      request.on("end", () => {
        response.setHeader("content-type", "application/x-amz-json-1.1");
        response.end(
          JSON.stringify({ FormatVersion: "aws_v1", PriceList: [productEntry("t3.medium", "0.0416")] }),
        );
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const saved = process.env.SKYWARD_HOME;
    const home = await mkdtemp(join(tmpdir(), "skyward-aws-prices-"));
    process.env.SKYWARD_HOME = home;
    try {
      const endpoint = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
      const ask = () =>
        regionPrices({
          region: "eu-west-1",
          endpoint,
          credentials: async () => ({ accessKeyId: "AKID", secretAccessKey: "SECRET" }),
          signal: AbortSignal.timeout(30_000),
        });
      const answers = await Promise.all([ask(), ask(), ask()]);
      for (const answer of answers) expect(answer.prices).toEqual({ "t3.medium": 0.0416 });
      expect((await ask()).prices).toEqual({ "t3.medium": 0.0416 });
    } finally {
      if (saved === undefined) delete process.env.SKYWARD_HOME;
      else process.env.SKYWARD_HOME = saved;
      server.close();
      await rm(home, { recursive: true, force: true });
    }
  });
});
