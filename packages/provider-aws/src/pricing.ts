/**
 * On-demand prices per region from AWS's own source, the Price List Query API (`GetProducts` of the
 * `pricing` service: https://docs.aws.amazon.com/aws-cost-management/latest/APIReference/API_pricing_GetProducts.html),
 * cached on disk with the date they were read (`$SKYWARD_HOME/cache/aws/`), for
 * {@link PRICE_CACHE_MAX_AGE_DAYS} days.
 *
 * The request is AWS JSON 1.1 (`X-Amz-Target: AWSPriceListService.GetProducts`), signed with
 * Signature Version 4 (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_sigv-create-signed-request.html)
 * here, with node:crypto, so the provider needs no other SDK client. It needs `pricing:GetProducts`.
 */
import { createHash, createHmac, randomBytes } from "node:crypto";
import { mkdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { homedir } from "node:os";
import { join } from "node:path";
import type { AwsCredentials } from "./settings.js";

/** How long prices read from the Price List API are used before they are read again. */
export const PRICE_CACHE_MAX_AGE_DAYS = 7;

/**
 * The Price List Query API's endpoint. It also runs at `https://api.pricing.eu-central-1.amazonaws.com`
 * and `https://api.pricing.ap-south-1.amazonaws.com`, each signed for its own region
 * (https://docs.aws.amazon.com/awsaccountbilling/latest/aboutv2/using-price-list-query-api.html).
 */
export const PRICING_ENDPOINT = "https://api.pricing.us-east-1.amazonaws.com";

/** The region a Price List endpoint's requests are signed for: the one in its host, else us-east-1. */
export function pricingSigningRegion(endpoint: string): string {
  const host = new URL(endpoint).hostname;
  return /^api\.pricing\.([a-z0-9-]+)\.amazonaws\.com(\.cn)?$/.exec(host)?.[1] ?? "us-east-1";
}

/**
 * The Price List endpoint when `pricingEndpoint` is not set: AWS's own, also beside an EC2 endpoint of
 * AWS's (a FIPS or VPC endpoint serves EC2 only); an EC2 endpoint elsewhere (moto, LocalStack: a fake
 * AWS on one address) serves the Price List API too.
 */
export function defaultPricingEndpoint(ec2Endpoint: string | undefined): string {
  if (ec2Endpoint === undefined) return PRICING_ENDPOINT;
  const host = new URL(ec2Endpoint).hostname;
  return /(^|\.)(amazonaws\.com(\.cn)?|api\.aws)$/.test(host) ? PRICING_ENDPOINT : ec2Endpoint;
}

/** On-demand prices of one region, as read from the Price List API. */
export interface RegionPrices {
  readonly region: string;
  /** When they were read (ISO 8601). */
  readonly fetchedAt: string;
  /** USD per hour by instance type: Linux, shared tenancy, no pre-installed software. */
  readonly prices: Readonly<Record<string, number>>;
}

const sha256 = (data: string) => createHash("sha256").update(data, "utf8").digest("hex");
const hmac = (key: Buffer | string, data: string) => createHmac("sha256", key).update(data, "utf8").digest();

/** Signs a POST with Signature Version 4 (the headers to send). */
export function signRequest(options: {
  readonly url: URL;
  readonly body: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly credentials: AwsCredentials;
  readonly region: string;
  readonly service: string;
  readonly now?: Date;
}): Record<string, string> {
  const now = options.now ?? new Date();
  const amzDate = now
    .toISOString()
    .replace(/[-:]/g, "")
    .replace(/\.\d{3}/, "");
  const day = amzDate.slice(0, 8);
  const headers: Record<string, string> = {
    ...Object.fromEntries(Object.entries(options.headers).map(([key, value]) => [key.toLowerCase(), value])),
    host: options.url.host,
    "x-amz-date": amzDate,
    ...(options.credentials.sessionToken !== undefined
      ? { "x-amz-security-token": options.credentials.sessionToken }
      : {}),
  };
  const names = Object.keys(headers).sort();
  const canonical = [
    "POST",
    options.url.pathname || "/",
    "",
    ...names.map((name) => `${name}:${String(headers[name]).trim()}`),
    "",
    names.join(";"),
    sha256(options.body),
  ].join("\n");
  const scope = `${day}/${options.region}/${options.service}/aws4_request`;
  const toSign = ["AWS4-HMAC-SHA256", amzDate, scope, sha256(canonical)].join("\n");
  let key: Buffer = hmac(`AWS4${options.credentials.secretAccessKey}`, day);
  for (const part of [options.region, options.service, "aws4_request"]) key = hmac(key, part);
  const signature = createHmac("sha256", key).update(toSign, "utf8").digest("hex");
  headers.authorization = `AWS4-HMAC-SHA256 Credential=${options.credentials.accessKeyId}/${scope}, SignedHeaders=${names.join(";")}, Signature=${signature}`;
  return headers;
}

/** One entry of `GetProducts`' `PriceList` (a JSON string), reduced to the type and its hourly USD price. */
export function priceOfProduct(entry: string): { instanceType: string; price: number } | undefined {
  let product: {
    product?: { attributes?: Record<string, string> };
    terms?: {
      OnDemand?: Record<
        string,
        { priceDimensions?: Record<string, { unit?: string; pricePerUnit?: { USD?: string } }> }
      >;
    };
  };
  try {
    product = JSON.parse(entry);
  } catch {
    return undefined;
  }
  const instanceType = product.product?.attributes?.instanceType;
  if (!instanceType) return undefined;
  for (const term of Object.values(product.terms?.OnDemand ?? {}))
    for (const dimension of Object.values(term.priceDimensions ?? {})) {
      const price = Number(dimension.pricePerUnit?.USD);
      if (dimension.unit === "Hrs" && Number.isFinite(price) && price > 0) return { instanceType, price };
    }
  return undefined;
}

/** The signed headers of a `GetProducts` request to the endpoint `url` (signed for its region). */
export function getProductsHeaders(
  url: URL,
  body: string,
  credentials: AwsCredentials,
): Record<string, string> {
  return signRequest({
    url,
    body,
    headers: {
      "content-type": "application/x-amz-json-1.1",
      "x-amz-target": "AWSPriceListService.GetProducts",
    },
    credentials,
    region: pricingSigningRegion(url.href),
    service: "pricing",
  });
}

/** Reads a region's on-demand Linux prices from the Price List API, every page. */
export async function fetchRegionPrices(options: {
  readonly region: string;
  readonly endpoint: string;
  readonly credentials: () => Promise<AwsCredentials>;
  readonly signal: AbortSignal;
}): Promise<RegionPrices> {
  const url = new URL(options.endpoint);
  const term = (Field: string, Value: string) => ({ Type: "TERM_MATCH", Field, Value });
  const prices: Record<string, number> = {};
  let nextToken: string | undefined;
  do {
    const body = JSON.stringify({
      ServiceCode: "AmazonEC2",
      FormatVersion: "aws_v1",
      MaxResults: 100,
      Filters: [
        term("regionCode", options.region),
        term("operatingSystem", "Linux"),
        term("tenancy", "Shared"),
        term("preInstalledSw", "NA"),
        term("capacitystatus", "Used"),
      ],
      ...(nextToken !== undefined ? { NextToken: nextToken } : {}),
    });
    const headers = getProductsHeaders(url, body, await options.credentials());
    // A network that drops the connection must not hold offers up: 30 s per page at most.
    const response = await fetch(url, {
      method: "POST",
      headers,
      body,
      signal: AbortSignal.any([options.signal, AbortSignal.timeout(30_000)]),
    });
    const text = await response.text();
    if (!response.ok) {
      let code = `HTTP ${response.status}`;
      try {
        const error = JSON.parse(text) as { __type?: string; message?: string; Message?: string };
        code = `${error.__type?.split("#").pop() ?? code}: ${error.message ?? error.Message ?? ""}`.trim();
      } catch {}
      throw new Error(`Price List API GetProducts failed: ${code}`);
    }
    const page = JSON.parse(text) as { PriceList?: string[]; NextToken?: string };
    for (const entry of page.PriceList ?? []) {
      const found = priceOfProduct(entry);
      // Should the filters still leave two products for a type, the higher price is kept: a budget
      // judged on it is never exceeded.
      if (found) prices[found.instanceType] = Math.max(prices[found.instanceType] ?? 0, found.price);
    }
    nextToken = page.NextToken || undefined;
  } while (nextToken);
  return { region: options.region, fetchedAt: new Date().toISOString(), prices };
}

/** The cache file of a region's prices (one per endpoint, so a test's fake never mixes with AWS). */
export function priceCacheFile(region: string, endpoint: string): string {
  const home = process.env.SKYWARD_HOME ?? join(homedir(), ".skyward");
  const suffix =
    endpoint === PRICING_ENDPOINT
      ? ""
      : `-${createHash("sha256").update(endpoint).digest("hex").slice(0, 8)}`;
  return join(home, "cache", "aws", `on-demand-prices-${region}${suffix}.json`);
}

/**
 * A region's prices: from the cache file while younger than {@link PRICE_CACHE_MAX_AGE_DAYS}, else
 * from the Price List API (then written to the cache).
 */
export async function regionPrices(options: {
  readonly region: string;
  readonly endpoint: string;
  readonly credentials: () => Promise<AwsCredentials>;
  readonly signal: AbortSignal;
  readonly now?: Date;
}): Promise<RegionPrices> {
  const file = priceCacheFile(options.region, options.endpoint);
  const now = options.now ?? new Date();
  try {
    const cached = JSON.parse(await readFile(file, "utf8")) as RegionPrices;
    const age = now.getTime() - Date.parse(cached.fetchedAt);
    if (cached.region === options.region && age >= 0 && age < PRICE_CACHE_MAX_AGE_DAYS * 86_400_000)
      return cached;
  } catch {}
  const fresh = await fetchRegionPrices(options);
  // Providers reading the same region at once each write a file of their own, renamed over the cache;
  // prices read but not cached (a full disk) are still the prices.
  const temporary = `${file}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`;
  try {
    await mkdir(join(file, ".."), { recursive: true });
    await writeFile(temporary, JSON.stringify(fresh));
    await rename(temporary, file);
  } catch {
    await rm(temporary, { force: true }).catch(() => undefined);
  }
  return fresh;
}
