/**
 * A fake of AWS's instance metadata service, version 2 only (a request without a session token is
 * answered 401, as on an instance that requires IMDSv2) — what Skyward's interruption-notice poller
 * and s3fs's `iam_role=auto` read — so tests can deliver a spot interruption notice or a rebalance
 * recommendation to a node, or hand it an instance profile's role credentials. It serves several instances at once, each under its own path prefix (`/<instance id>`), so
 * one server answers every node of a pool; `endpointFor(id)` is what the node is told to poll.
 *
 * The shapes come from AWS's documentation:
 * - session tokens: `PUT /latest/api/token` with `X-aws-ec2-metadata-token-ttl-seconds` (1–21600)
 *   answers the token as text; later requests carry it in `X-aws-ec2-metadata-token`, and without a
 *   valid one are answered 401 —
 *   https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/configuring-instance-metadata-service.html
 * - `GET /latest/meta-data/spot/instance-action`: 404 until an interruption is scheduled, then
 *   `{"action": "terminate", "time": "2017-09-18T08:22:00Z"}` —
 *   https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/spot-instance-termination-notices.html
 * - `GET /latest/meta-data/events/recommendations/rebalance`: 404 until EC2 recommends
 *   rebalancing, then `{"noticeTime": "2020-11-05T08:22:00Z"}` —
 *   https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/rebalance-recommendations.html
 * - the instance profile's role: `GET /latest/meta-data/iam/security-credentials/` answers the role's
 *   name (404 when the instance has no instance profile), `GET
 *   /latest/meta-data/iam/security-credentials/<role>` its temporary credentials as JSON (`Code`
 *   "Success", `LastUpdated`, `Type` "AWS-HMAC", `AccessKeyId`, `SecretAccessKey`, `Token`,
 *   `Expiration`), `GET /latest/meta-data/iam/info` the profile (`Code`, `LastUpdated`,
 *   `InstanceProfileArn`, `InstanceProfileId`) —
 *   https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/instancedata-data-retrieval.html,
 *   https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/iam-roles-for-amazon-ec2.html,
 *   https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/instancedata-data-categories.html
 *
 * A node reaches the real service at the fixed link-local address 169.254.169.254 (what s3fs
 * reads, unconfigurable); {@link serveFakeImdsInNamespace} puts that address in one test-bed host's
 * network namespace, in front of this fake.
 */
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { listenOnFreePort } from "./http-listen.js";
import { findExecutable, type Testbed } from "./testbed.js";

/** One request the fake answered. */
export interface FakeImdsRequest {
  readonly method: string;
  /** The path without the instance prefix (`/latest/meta-data/spot/instance-action`). */
  readonly path: string;
  /** The instance whose prefix it used. */
  readonly instanceId: string;
  readonly status: number;
}

/** The role an instance profile gives an instance, as the fake hands it out. Secrets. */
export interface FakeImdsRole {
  /** The role's name (the last part of `security-credentials/<role>`). */
  readonly name: string;
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  /** The session token of the temporary credentials. */
  readonly token: string;
  /** When they expire. Default: an hour from now. */
  readonly expiration?: Date;
  /** The instance profile's ARN (`iam/info`). Default: `arn:aws:iam::123456789012:instance-profile/<name>`. */
  readonly instanceProfileArn?: string;
}

/** A running fake IMDS. */
export interface FakeImds extends AsyncDisposable {
  /** `http://host:port`. */
  readonly url: string;
  /** The endpoint a node of instance `id` polls: `http://host:port/<id>`. */
  endpointFor(id: string): string;
  /** Schedules a spot interruption of instance `id` (`action` default `"terminate"`, two minutes from now). */
  interrupt(id: string, options?: { action?: "terminate" | "stop" | "hibernate"; time?: Date }): void;
  /** Posts a rebalance recommendation for instance `id`. */
  recommendRebalance(id: string, time?: Date): void;
  /** Gives instance `id` an instance profile whose role's credentials it serves (undefined: none). */
  attachRole(id: string, role: FakeImdsRole | undefined): void;
  /** Every request answered, in order. */
  readonly requests: readonly FakeImdsRequest[];
  close(): Promise<void>;
}

/** Options of {@link startFakeImds}. */
export interface FakeImdsOptions {
  /** The address to listen on: loopback (default), or a test bed's bridge address for its hosts. */
  readonly host?: string;
  /**
   * The role of an instance without one given by `attachRole`, looked up when a node asks (as the
   * real service reflects the instance profile attached at that moment): e.g. from the instance's
   * `IamInstanceProfile` at moto. Undefined: none.
   */
  readonly roleOf?: (instanceId: string) => Promise<FakeImdsRole | undefined>;
}

function isoSeconds(time: Date): string {
  return `${time.toISOString().slice(0, 19)}Z`;
}

/** Starts a fake IMDSv2 server. */
export async function startFakeImds(options: FakeImdsOptions = {}): Promise<FakeImds> {
  const tokens = new Set<string>();
  const actions = new Map<string, { action: string; time: string }>();
  const rebalances = new Map<string, { noticeTime: string }>();
  const roles = new Map<string, FakeImdsRole & { updated: string }>();
  const requests: FakeImdsRequest[] = [];

  const answer = async (request: IncomingMessage, response: ServerResponse) => {
    const url = new URL(request.url ?? "/", "http://imds");
    const [, instanceId = "", ...rest] = url.pathname.split("/");
    const path = `/${rest.join("/")}`;
    const reply = (status: number, body = "", type = "text/plain") => {
      requests.push({ method: request.method ?? "", path, instanceId, status });
      response.writeHead(status, { "content-type": type, "content-length": Buffer.byteLength(body) });
      response.end(body);
    };
    if (request.method === "PUT" && path === "/latest/api/token") {
      const ttl = Number(request.headers["x-aws-ec2-metadata-token-ttl-seconds"]);
      if (!Number.isInteger(ttl) || ttl < 1 || ttl > 21600) return reply(400);
      const token = randomBytes(16).toString("base64url");
      tokens.add(token);
      return reply(200, token);
    }
    if (request.method !== "GET") return reply(405);
    const token = request.headers["x-aws-ec2-metadata-token"];
    if (typeof token !== "string" || !tokens.has(token)) return reply(401);
    if (path === "/latest/meta-data/spot/instance-action") {
      const action = actions.get(instanceId);
      return action ? reply(200, JSON.stringify(action), "application/json") : reply(404);
    }
    if (path === "/latest/meta-data/events/recommendations/rebalance") {
      const rebalance = rebalances.get(instanceId);
      return rebalance ? reply(200, JSON.stringify(rebalance), "application/json") : reply(404);
    }
    let role = roles.get(instanceId);
    if (!role && path.startsWith("/latest/meta-data/iam/") && options.roleOf) {
      const found = await options.roleOf(instanceId).catch(() => undefined);
      if (found) role = { ...found, updated: isoSeconds(new Date()) };
    }
    const credentialsPath = "/latest/meta-data/iam/security-credentials/";
    if (path === credentialsPath || path === credentialsPath.slice(0, -1))
      return role ? reply(200, role.name) : reply(404);
    if (role && path === `${credentialsPath}${role.name}`)
      return reply(
        200,
        JSON.stringify({
          Code: "Success",
          LastUpdated: role.updated,
          Type: "AWS-HMAC",
          AccessKeyId: role.accessKeyId,
          SecretAccessKey: role.secretAccessKey,
          Token: role.token,
          Expiration: isoSeconds(role.expiration ?? new Date(Date.now() + 3_600_000)),
        }),
        "application/json",
      );
    if (role && path === "/latest/meta-data/iam/info")
      return reply(
        200,
        JSON.stringify({
          Code: "Success",
          LastUpdated: role.updated,
          InstanceProfileArn:
            role.instanceProfileArn ?? `arn:aws:iam::123456789012:instance-profile/${role.name}`,
          InstanceProfileId: "AIPAFAKEIMDSPROFILE01",
        }),
        "application/json",
      );
    return reply(404);
  };

  const server = createServer((request, response) => {
    request.resume();
    request.on("end", () => {
      answer(request, response).catch(() => {
        if (!response.headersSent) response.writeHead(500);
        response.end();
      });
    });
  });
  const { url, close } = await listenOnFreePort(server, options.host);
  return {
    url,
    endpointFor: (id) => `${url}/${id}`,
    interrupt(id, { action = "terminate", time = new Date(Date.now() + 120_000) } = {}) {
      actions.set(id, { action, time: isoSeconds(time) });
    },
    recommendRebalance(id, time = new Date()) {
      rebalances.set(id, { noticeTime: isoSeconds(time) });
    },
    attachRole(id, role) {
      if (role) roles.set(id, { ...role, updated: isoSeconds(new Date()) });
      else roles.delete(id);
    },
    requests,
    close,
    [Symbol.asyncDispose]: close,
  };
}

/** The fixed link-local address of AWS's instance metadata service. */
export const IMDS_ADDRESS = "169.254.169.254";

/**
 * A small HTTP proxy run inside a host's namespace: it listens on 169.254.169.254:80 and sends each
 * request, method, headers and body unchanged, to `argv[1]` (the fake's `endpointFor(id)`) with the
 * path appended. CommonJS, for `node -e`.
 */
const NAMESPACE_PROXY = `
const http = require("node:http");
const target = new URL(process.argv[1]);
const prefix = target.pathname.replace(/\\/+$/, "");
const server = http.createServer((request, response) => {
  const upstream = http.request(
    { host: target.hostname, port: target.port, method: request.method, path: prefix + request.url,
      headers: { ...request.headers, host: target.host } },
    (answer) => { response.writeHead(answer.statusCode, answer.headers); answer.pipe(response); },
  );
  upstream.on("error", () => { response.writeHead(502); response.end(); });
  request.pipe(upstream);
});
server.listen(80, "${IMDS_ADDRESS}", () => console.log("ready"));
process.on("SIGTERM", () => server.close(() => process.exit(0)));
`;

/** What {@link serveFakeImdsInNamespace} started: stop it with `close()` or `await using`. */
export interface NamespaceImds extends AsyncDisposable {
  close(): Promise<void>;
}

/**
 * Makes AWS's metadata address, 169.254.169.254:80, answer inside one test-bed host's network
 * namespace (and nowhere else: the address goes on that namespace's loopback, never on this
 * machine's interfaces), in front of a fake IMDS: `endpoint` is `imds.endpointFor(instanceId)`, so
 * a program on the host (s3fs with `iam_role=auto`) reads that instance's metadata. The fake must
 * listen where the namespace reaches it (the test bed's bridge address). The test bed's teardown
 * ends the proxy too, should `close()` not run.
 */
export async function serveFakeImdsInNamespace(
  bed: Testbed,
  hostIndex: number,
  endpoint: string,
): Promise<NamespaceImds> {
  const host = bed.hosts[hostIndex];
  if (!host) throw new RangeError(`hostIndex: expected 0 to ${bed.hosts.length - 1}, received ${hostIndex}`);
  const ip = findExecutable("ip");
  if (!ip) throw new Error("serving a fake IMDS in a namespace needs `ip` (iproute2)");
  const added = await bed.exec(hostIndex, [ip, "address", "add", `${IMDS_ADDRESS}/32`, "dev", "lo"]);
  if (added.exitCode !== 0 && !/exists/i.test(added.stderr))
    throw new Error(`could not add ${IMDS_ADDRESS} in ${host.namespace}: ${added.stderr.trim()}`);
  const child = spawn(
    ip,
    ["netns", "exec", host.namespace, process.execPath, "-e", NAMESPACE_PROXY, endpoint],
    {
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  let output = "";
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`the IMDS proxy did not start in 10 s: ${output}`)),
        10_000,
      );
      const onData = (chunk: Buffer) => {
        output += chunk.toString();
        if (output.includes("ready")) {
          clearTimeout(timer);
          resolve();
        }
      };
      child.stdout?.on("data", onData);
      child.stderr?.on("data", onData);
      child.once("exit", (code) => {
        clearTimeout(timer);
        reject(new Error(`the IMDS proxy exited (code ${code}) before it listened: ${output}`));
      });
    });
  } catch (error) {
    child.kill("SIGKILL");
    throw error;
  }
  child.stdout?.resume();
  child.stderr?.resume();
  let closing: Promise<void> | undefined;
  const close = () => {
    closing ??= (async () => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill("SIGTERM");
        const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
        await exited;
        clearTimeout(timer);
      }
      await bed
        .exec(hostIndex, [ip, "address", "del", `${IMDS_ADDRESS}/32`, "dev", "lo"])
        .catch(() => undefined);
    })();
    return closing;
  };
  return { close, [Symbol.asyncDispose]: close };
}
