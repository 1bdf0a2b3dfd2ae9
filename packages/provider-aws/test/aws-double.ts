/**
 * What the tests put in front of moto (on 127.0.0.1) for the parts of AWS moto lacks, built from AWS's
 * documented request and response shapes:
 *
 * - EC2 placement groups — `CreatePlacementGroup`, `DescribePlacementGroups` (filters `group-name`,
 *   `tag-key`, `tag:<key>`), `DeletePlacementGroup`, and `RunInstances` refusing an unknown
 *   `Placement.GroupName` (`InvalidPlacementGroup.Unknown`):
 *   https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CreatePlacementGroup.html,
 *   https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribePlacementGroups.html,
 *   https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DeletePlacementGroup.html,
 *   https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html.
 * - `RunInstances` refusing a root volume smaller than the image's snapshot
 *   (`InvalidBlockDeviceMapping`: "Volume of size 10GB is smaller than snapshot 'snap-…', expect size
 *   >= 15GB"; https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html,
 *   https://docs.aws.amazon.com/ebs/latest/userguide/ebs-creating-volume.html) — moto accepts any
 *   size; its images' root snapshots are 15 GiB (moto/ec2/models/amis.py).
 * - The Price List Query API's `GetProducts` (AWS JSON 1.1, `X-Amz-Target:
 *   AWSPriceListService.GetProducts`, `TERM_MATCH` filters, `MaxResults`/`NextToken` paging,
 *   `PriceList` entries as JSON strings in the `aws_v1` format):
 *   https://docs.aws.amazon.com/aws-cost-management/latest/APIReference/API_pricing_GetProducts.html,
 *   https://docs.aws.amazon.com/awsaccountbilling/latest/aboutv2/using-the-aws-price-list-query-api.html,
 *   with products shaped as in https://docs.aws.amazon.com/awsaccountbilling/latest/aboutv2/reading-an-offer.html.
 *   Its prices are the tests' fixtures: by default us-east-1's are `BUILT_IN_ON_DEMAND_PRICES` (list
 *   prices as of that table's date, P4/P5 after the June 2025 cut) plus p5.4xlarge, which the table
 *   lacks; each product comes with decoys (Windows, dedicated tenancy, an unused capacity
 *   reservation) that a wrong filter would read.
 *
 * - `RunInstances` idempotency by `ClientToken` (moto ignores the token): a retry with the same token
 *   and the same parameters answers the first call's reservation and launches nothing; the same token
 *   with other parameters answers `IdempotentParameterMismatch`
 *   (https://docs.aws.amazon.com/ec2/latest/devguide/ec2-api-idempotency.html, "RunInstances
 *   idempotency"); `DescribeInstances` takes the `client-token` filter
 *   (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeInstances.html), which moto
 *   lacks. {@link AwsDouble.failAcceptedLaunches} makes `RunInstances` fail after EC2 accepted it —
 *   the case the idempotency page is written for ("Operations might also time out or encounter other
 *   server issues before they complete, even though the request has already returned a result").
 *
 * Everything else goes to moto untouched.
 */
import { createServer, request as httpRequest, type Server } from "node:http";
import { BUILT_IN_ON_DEMAND_PRICES } from "../src/on-demand-prices.js";

/** The double's state, for tests to read and change. */
export interface AwsDouble {
  readonly endpoint: string;
  /** Placement groups by name. */
  readonly placementGroups: Map<string, { id: string; strategy: string; tags: Record<string, string> }>;
  /** On-demand Linux prices the Price List API serves, by region, then instance type. */
  readonly prices: Map<string, Record<string, number>>;
  /** Every `GetProducts` request body seen. */
  readonly priceRequests: unknown[];
  /** When set, `GetProducts` answers `AccessDeniedException` (a role without `pricing:GetProducts`). */
  denyPricing: boolean;
  /**
   * How the next `RunInstances` calls fail after EC2 accepted them (the instances exist, the caller
   * never hears so): `count` calls (Infinity: every one), by dropping the connection (`"drop"`, a
   * timeout as the client sees it) or with HTTP 500 `InternalError`. A retry with an accepted token
   * launches nothing more, and fails the same way while `count` lasts.
   */
  failAcceptedLaunches: { count: number; how: "drop" | "internal-error" } | undefined;
  /** The reservations `RunInstances` made, by `ClientToken`, with their instance ids. */
  readonly launchesByToken: Map<string, { fingerprint: string; body: string; instanceIds: string[] }>;
  /** Forgets placement groups and restores the default prices. */
  reset(): void;
  close(): Promise<void>;
}

/** The Price List API's default prices: us-east-1 only. */
export function defaultPrices(): Map<string, Record<string, number>> {
  return new Map([["us-east-1", { ...BUILT_IN_ON_DEMAND_PRICES, "p5.4xlarge": 6.88 }]]);
}

/** The size of the root snapshot of every moto image (moto/ec2/models/amis.py). */
export const MOTO_SNAPSHOT_GB = 15;

const xml = (value: string) =>
  value.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");

function ec2Error(code: string, message: string): string {
  return (
    `<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error><Code>${code}</Code>` +
    `<Message>${xml(message)}</Message></Error></Errors><RequestID>aws-double</RequestID></Response>`
  );
}

/** Reads `Prefix.N.Key`/`Prefix.N.Value` pairs of a query-API request into tags. */
function tagsOf(params: URLSearchParams): Record<string, string> {
  const tags: Record<string, string> = {};
  for (const [key, value] of params) {
    const match = /^TagSpecification\.(\d+)\.Tag\.(\d+)\.Key$/.exec(key);
    if (match) tags[value] = params.get(`TagSpecification.${match[1]}.Tag.${match[2]}.Value`) ?? "";
  }
  return tags;
}

/** One product of the price list, `aws_v1` format, as a JSON string. */
function product(
  region: string,
  instanceType: string,
  price: number,
  attributes: Record<string, string> = {},
): string {
  const sku = `SKU${Buffer.from(`${region}${instanceType}${JSON.stringify(attributes)}`)
    .toString("hex")
    .slice(0, 14)
    .toUpperCase()}`;
  const term = `${sku}.JRTCKXETXF`;
  return JSON.stringify({
    product: {
      productFamily: "Compute Instance",
      attributes: {
        instanceType,
        regionCode: region,
        operatingSystem: "Linux",
        tenancy: "Shared",
        preInstalledSw: "NA",
        capacitystatus: "Used",
        licenseModel: "No License required",
        servicecode: "AmazonEC2",
        ...attributes,
      },
      sku,
    },
    serviceCode: "AmazonEC2",
    terms: {
      OnDemand: {
        [term]: {
          priceDimensions: {
            [`${term}.6YS6EN2CT7`]: {
              unit: "Hrs",
              endRange: "Inf",
              description: `$${price} per On Demand ${attributes.operatingSystem ?? "Linux"} ${instanceType} Instance Hour`,
              appliesTo: [],
              rateCode: `${term}.6YS6EN2CT7`,
              beginRange: "0",
              pricePerUnit: { USD: price.toFixed(10) },
            },
          },
          sku,
          effectiveDate: "2025-06-01T00:00:00Z",
          offerTermCode: "JRTCKXETXF",
          termAttributes: {},
        },
      },
    },
    version: "20250601000000",
    publicationDate: "2025-06-01T00:00:00Z",
  });
}

/** Starts the double in front of moto at `target`. */
export async function startAwsDouble(target: string): Promise<AwsDouble> {
  const upstream = new URL(target);
  const state: Omit<AwsDouble, "endpoint" | "close" | "reset"> = {
    placementGroups: new Map(),
    prices: defaultPrices(),
    priceRequests: [],
    denyPricing: false,
    failAcceptedLaunches: undefined,
    launchesByToken: new Map(),
  };
  let nextGroup = 1;

  const placementGroupXml = (name: string) => {
    const group = state.placementGroups.get(name);
    if (!group) return "";
    const tags = Object.entries(group.tags)
      .map(([key, value]) => `<item><key>${xml(key)}</key><value>${xml(value)}</value></item>`)
      .join("");
    return `<groupName>${xml(name)}</groupName><strategy>${group.strategy}</strategy><state>available</state><groupId>${group.id}</groupId><groupArn>arn:aws:ec2:us-east-1:123456789012:placement-group/${xml(name)}</groupArn><tagSet>${tags}</tagSet>`;
  };

  /** The EC2 answer of the double to `action`, or undefined to pass it on to moto. */
  const ec2 = (action: string, params: URLSearchParams): { status: number; body: string } | undefined => {
    const ok = (body: string) => ({
      status: 200,
      body: `<?xml version="1.0" encoding="UTF-8"?>\n<${action}Response xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>aws-double</requestId>${body}</${action}Response>`,
    });
    const name = params.get("GroupName") ?? "";
    switch (action) {
      case "CreatePlacementGroup": {
        if (state.placementGroups.has(name))
          return {
            status: 400,
            body: ec2Error(
              "InvalidPlacementGroup.Duplicate",
              `The Placement Group '${name}' already exists.`,
            ),
          };
        state.placementGroups.set(name, {
          id: `pg-${(nextGroup++).toString(16).padStart(17, "0")}`,
          strategy: params.get("Strategy") ?? "cluster",
          tags: tagsOf(params),
        });
        return ok(`<return>true</return><placementGroup>${placementGroupXml(name)}</placementGroup>`);
      }
      case "DeletePlacementGroup":
        if (!state.placementGroups.delete(name))
          return {
            status: 400,
            body: ec2Error("InvalidPlacementGroup.Unknown", `The Placement Group '${name}' is unknown.`),
          };
        return ok("<return>true</return>");
      case "DescribePlacementGroups": {
        const filters: { name: string; values: string[] }[] = [];
        for (const [key, value] of params) {
          const match = /^Filter\.(\d+)\.Name$/.exec(key);
          if (!match) continue;
          const values = [...params]
            .filter(([k]) => k.startsWith(`Filter.${match[1]}.Value.`))
            .map(([, v]) => v);
          filters.push({ name: value, values });
        }
        const names = [...params].filter(([key]) => key.startsWith("GroupName.")).map(([, value]) => value);
        const items = [...state.placementGroups.entries()]
          .filter(([groupName]) => names.length === 0 || names.includes(groupName))
          .filter(([groupName, group]) =>
            filters.every((filter) =>
              filter.name === "group-name"
                ? filter.values.includes(groupName)
                : filter.name === "tag-key"
                  ? filter.values.some((value) => value in group.tags)
                  : filter.name.startsWith("tag:")
                    ? filter.values.includes(group.tags[filter.name.slice(4)] ?? "\u0000")
                    : true,
            ),
          )
          .map(([groupName]) => `<item>${placementGroupXml(groupName)}</item>`);
        return ok(`<placementGroupSet>${items.join("")}</placementGroupSet>`);
      }
      case "RunInstances": {
        for (const [key, value] of params) {
          if (!/^BlockDeviceMapping\.\d+\.Ebs\.VolumeSize$/.test(key) || Number(value) >= MOTO_SNAPSHOT_GB)
            continue;
          return {
            status: 400,
            body: ec2Error(
              "InvalidBlockDeviceMapping",
              `Volume of size ${value}GB is smaller than snapshot 'snap-00000000', expect size >= ${MOTO_SNAPSHOT_GB}GB`,
            ),
          };
        }
        const group = params.get("Placement.GroupName");
        if (group !== null && !state.placementGroups.has(group))
          return {
            status: 400,
            body: ec2Error("InvalidPlacementGroup.Unknown", `The Placement Group '${group}' is unknown.`),
          };
        return undefined;
      }
      default:
        return undefined;
    }
  };

  const pricing = (body: string): { status: number; body: string } => {
    const request = JSON.parse(body) as {
      ServiceCode?: string;
      Filters?: { Type: string; Field: string; Value: string }[];
      MaxResults?: number;
      NextToken?: string;
    };
    state.priceRequests.push(request);
    if (state.denyPricing)
      return {
        status: 400,
        body: JSON.stringify({
          __type: "AccessDeniedException",
          Message:
            "User: arn:aws:iam::123456789012:user/skyward is not authorized to perform: pricing:GetProducts",
        }),
      };
    if (request.ServiceCode !== "AmazonEC2")
      return {
        status: 400,
        body: JSON.stringify({ __type: "InvalidParameterException", Message: "ServiceCode" }),
      };
    const everything: string[] = [];
    for (const [region, table] of state.prices)
      for (const [instanceType, price] of Object.entries(table)) {
        everything.push(product(region, instanceType, price));
        // Decoys a query without the right filters would read.
        everything.push(product(region, instanceType, price * 2, { operatingSystem: "Windows" }));
        everything.push(product(region, instanceType, price * 3, { tenancy: "Dedicated" }));
        everything.push(
          product(region, instanceType, 0.0001, { capacitystatus: "UnusedCapacityReservation" }),
        );
      }
    const matching = everything.filter((entry) => {
      const attributes = (JSON.parse(entry) as { product: { attributes: Record<string, string> } }).product
        .attributes;
      return (request.Filters ?? []).every(
        (filter) => filter.Type === "TERM_MATCH" && attributes[filter.Field] === filter.Value,
      );
    });
    const size = Math.min(request.MaxResults ?? 100, 100);
    const start = request.NextToken !== undefined ? Number(request.NextToken) : 0;
    const page = matching.slice(start, start + size);
    return {
      status: 200,
      body: JSON.stringify({
        FormatVersion: "aws_v1",
        PriceList: page,
        ...(start + size < matching.length ? { NextToken: String(start + size) } : {}),
      }),
    };
  };

  const server: Server = createServer((incoming, outgoing) => {
    const chunks: Buffer[] = [];
    incoming.on("data", (chunk: Buffer) => chunks.push(chunk));
    incoming.on("end", () => {
      const body = Buffer.concat(chunks);
      const target = incoming.headers["x-amz-target"];
      if (typeof target === "string" && target.startsWith("AWSPriceListService.")) {
        const authorization = String(incoming.headers.authorization ?? "");
        const answer =
          target !== "AWSPriceListService.GetProducts"
            ? { status: 400, body: JSON.stringify({ __type: "UnknownOperationException" }) }
            : !/^AWS4-HMAC-SHA256 Credential=[^/]+\/\d{8}\/us-east-1\/pricing\/aws4_request, SignedHeaders=[a-z0-9;-]+, Signature=[0-9a-f]{64}$/.test(
                  authorization,
                )
              ? { status: 403, body: JSON.stringify({ __type: "MissingAuthenticationTokenException" }) }
              : pricing(body.toString("utf8"));
        outgoing.writeHead(answer.status, { "content-type": "application/x-amz-json-1.1" });
        outgoing.end(answer.body);
        return;
      }
      if (incoming.url === "/moto-api/reset") {
        state.placementGroups.clear();
        state.prices.clear();
        for (const [region, table] of defaultPrices()) state.prices.set(region, table);
        state.denyPricing = false;
        state.failAcceptedLaunches = undefined;
        state.launchesByToken.clear();
      }
      const params = new URLSearchParams(body.toString("utf8"));
      const action = params.get("Action");
      const answer = action ? ec2(action, params) : undefined;
      const reply = (reply: { status: number; body: string }) => {
        outgoing.writeHead(reply.status, { "content-type": "text/xml" });
        outgoing.end(reply.body);
      };
      if (answer) return reply(answer);
      const forward = (sent: Buffer, onAnswer?: (status: number, text: string) => void) => {
        const forwarded = httpRequest(
          {
            host: upstream.hostname,
            port: upstream.port,
            method: incoming.method,
            path: incoming.url,
            headers: { ...incoming.headers, host: upstream.host, "content-length": String(sent.length) },
          },
          (response) => {
            if (!onAnswer) {
              outgoing.writeHead(response.statusCode ?? 502, response.headers);
              response.pipe(outgoing);
              return;
            }
            const answer: Buffer[] = [];
            response.on("data", (chunk: Buffer) => answer.push(chunk));
            response.on("end", () =>
              onAnswer(response.statusCode ?? 502, Buffer.concat(answer).toString("utf8")),
            );
          },
        );
        forwarded.on("error", (error) => {
          outgoing.writeHead(502);
          outgoing.end(String(error));
        });
        forwarded.end(sent);
      };
      if (action === "RunInstances" && params.get("ClientToken")) {
        const token = params.get("ClientToken") ?? "";
        const fingerprint = [...params]
          .filter(([key]) => key !== "ClientToken")
          .map(([key, value]) => `${key}=${value}`)
          .sort()
          .join("&");
        /** The answer to an accepted call: the reservation, unless a failure after acceptance is due. */
        const answerAccepted = (text: string) => {
          const fault = state.failAcceptedLaunches;
          if (fault && fault.count > 0) {
            fault.count -= 1;
            if (fault.how === "drop") {
              incoming.socket.destroy();
              return;
            }
            return reply({
              status: 500,
              body: ec2Error("InternalError", "An internal error has occurred"),
            });
          }
          reply({ status: 200, body: text });
        };
        const known = state.launchesByToken.get(token);
        if (known) {
          if (known.fingerprint !== fingerprint)
            return reply({
              status: 400,
              body: ec2Error(
                "IdempotentParameterMismatch",
                `The client token '${token}' was used with different parameters`,
              ),
            });
          return answerAccepted(known.body);
        }
        return forward(body, (status, text) => {
          if (status !== 200) return reply({ status, body: text });
          const instanceIds = [...text.matchAll(/<instanceId>(i-[0-9a-f]+)<\/instanceId>/g)].map(
            (match) => match[1] ?? "",
          );
          state.launchesByToken.set(token, { fingerprint, body: text, instanceIds });
          answerAccepted(text);
        });
      }
      if (action === "DescribeInstances") {
        // moto lacks the `client-token` filter: it becomes an `instance-id` filter over what the token launched.
        for (const [key, value] of [...params]) {
          const match = /^Filter\.(\d+)\.Name$/.exec(key);
          if (!match || value !== "client-token") continue;
          const prefix = `Filter.${match[1]}.Value.`;
          const tokens = [...params].filter(([name]) => name.startsWith(prefix)).map(([, token]) => token);
          for (const name of [...params.keys()]) if (name.startsWith(prefix)) params.delete(name);
          params.set(key, "instance-id");
          const ids = tokens.flatMap((token) => state.launchesByToken.get(token)?.instanceIds ?? []);
          (ids.length > 0 ? ids : ["i-00000000000000000"]).forEach((id, index) => {
            params.set(`${prefix}${index + 1}`, id);
          });
          return forward(Buffer.from(params.toString()));
        }
      }
      forward(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  const double: AwsDouble = Object.assign(state, {
    endpoint: `http://127.0.0.1:${port}`,
    reset() {
      state.placementGroups.clear();
      state.prices.clear();
      for (const [region, table] of defaultPrices()) state.prices.set(region, table);
      state.denyPricing = false;
      state.priceRequests.length = 0;
      state.failAcceptedLaunches = undefined;
      state.launchesByToken.clear();
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  });
  return double;
}
