/**
 * What real AWS accounts do that plain moto does not, reproduced in front of moto (`aws-double.ts`,
 * which every moto suite gets, and per-test fault proxies), and the provider's answer to each:
 * eventual consistency right after `RunInstances` and `CreateSecurityGroup`
 * (https://docs.aws.amazon.com/ec2/latest/devguide/eventual-consistency.html): an instance id unknown
 * for a while to `TerminateInstances` and `DescribeInstances`, a group unknown to
 * `AuthorizeSecurityGroupIngress`; the AMI's snapshot size against `diskGb`
 * (`InvalidBlockDeviceMapping`): a smaller `diskGb` is raised.
 */
import { createServer } from "node:http";
import * as sky from "@skyward/core";
import { ProvisionError } from "@skyward/core";
import { describe, expect, it } from "vitest";
import { AWS, DEFAULT_ROOT_VOLUME_GB } from "../src/aws-provider.js";
import { MOTO_SNAPSHOT_GB } from "./aws-double.js";
import { type InjectedFault, startFaultProxy } from "./fault-proxy.js";
import { motoInventory } from "./moto-server.js";
import {
  call,
  cpuQuery,
  expectNothingLeft,
  offerOf,
  onDemandT3Cluster,
  poolSpec,
  runs,
  skipReason,
  useRealAccountSuite,
} from "./real-account-support.js";

/** Removes from a `DescribeInstances` answer every reservation holding one of `hidden`. */
function dropReservations(body: string, hidden: (id: string) => boolean): string {
  const start = body.indexOf("<reservationSet>");
  const end = body.indexOf("</reservationSet>");
  if (start < 0 || end < 0) return body;
  const inner = body.slice(start + "<reservationSet>".length, end);
  const items: string[] = [];
  let depth = 0;
  let from = 0;
  const tags = /<item>|<\/item>/g;
  for (let match = tags.exec(inner); match; match = tags.exec(inner)) {
    if (match[0] === "<item>") {
      if (depth === 0) from = match.index;
      depth += 1;
    } else {
      depth -= 1;
      if (depth === 0) items.push(inner.slice(from, match.index + "</item>".length));
    }
  }
  const kept = items.filter(
    (item) => ![...item.matchAll(/<instanceId>(i-[0-9a-f]+)<\/instanceId>/g)].some((m) => hidden(m[1] ?? "")),
  );
  return `${body.slice(0, start)}<reservationSet>${kept.join("")}${body.slice(end)}`;
}

/**
 * A proxy that behaves as EC2 does right after `RunInstances` (eventual consistency,
 * https://docs.aws.amazon.com/ec2/latest/devguide/eventual-consistency.html and
 * https://docs.aws.amazon.com/AWSEC2/latest/APIReference/query-api-troubleshooting.html#eventual-consistency):
 * for `terminateLagMs` `TerminateInstances` answers `InvalidInstanceID.NotFound` for a new instance;
 * for `describeLagMs` `DescribeInstances` by id answers the same and a filtered one leaves it out (for
 * `tagLagMs` when the filter is on a tag).
 */
async function eventuallyConsistent(
  target: string,
  lags: { terminateLagMs: number; describeLagMs: number; tagLagMs?: number },
  extraFault?: (action: string, params: URLSearchParams) => InjectedFault | undefined,
) {
  const created = new Map<string, number>();
  const within = (id: string, ms: number) => {
    const at = created.get(id);
    return at !== undefined && Date.now() - at < ms;
  };
  const idsIn = (params: URLSearchParams) =>
    [...params].filter(([key]) => /^InstanceId\.\d+$/.test(key)).map(([, value]) => value);
  const notFound = (id: string): InjectedFault => ({
    status: 400,
    code: "InvalidInstanceID.NotFound",
    message: `The instance ID '${id}' does not exist`,
  });
  const proxy = await startFaultProxy(
    target,
    (action, params) => {
      const injected = extraFault?.(action, params);
      if (injected) return injected;
      if (action === "TerminateInstances") {
        const hidden = idsIn(params).find((id) => within(id, lags.terminateLagMs));
        if (hidden) return notFound(hidden);
      }
      if (action === "DescribeInstances") {
        const hidden = idsIn(params).find((id) => within(id, lags.describeLagMs));
        if (hidden) return notFound(hidden);
      }
      return undefined;
    },
    (action, params, body) => {
      if (action === "RunInstances")
        for (const match of body.matchAll(/<instanceId>(i-[0-9a-f]+)<\/instanceId>/g))
          created.set(match[1] ?? "", Date.now());
      if (action !== "DescribeInstances") return body;
      const byTag = [...params].some(
        ([key, value]) => /^Filter\.\d+\.Name$/.test(key) && value.startsWith("tag"),
      );
      const lag = byTag ? (lags.tagLagMs ?? lags.describeLagMs) : lags.describeLagMs;
      return dropReservations(body, (id) => within(id, lag));
    },
  );
  return Object.assign(proxy, { launched: () => [...created.keys()] });
}

describe.skipIf(skipReason !== undefined)("AWS real account: eventual consistency, root volume", () => {
  const suite = useRealAccountSuite();

  describe("eventual consistency", () => {
    it("terminate right after a start failing at SSH retries an id EC2 does not know yet; nothing is left", async () => {
      const proxy = await eventuallyConsistent(suite.moto.endpoint, {
        terminateLagMs: 6000,
        describeLagMs: 1500,
      });
      try {
        const aws = AWS({ endpoint: proxy.endpoint });
        const cluster = await onDemandT3Cluster(aws);
        const instances = await aws.provision({ cluster, count: 2, ...call() });
        expect(instances).toHaveLength(2);
        // The pool could not reach them over SSH: it terminates them at once.
        await aws.terminate({ cluster, ids: instances.map((instance) => instance.id), ...call() });
        const terminates = proxy.calls.filter((entry) => entry.action === "TerminateInstances");
        expect(terminates.length).toBeGreaterThan(2); // answered NotFound first, asked again
        expect((await motoInventory(suite.moto.endpoint)).liveInstances).toEqual([]);
        await aws.teardown({ cluster, ...call() });
      } finally {
        await proxy.close();
      }
    });

    it("a pool whose start fails at SSH leaves nothing, though EC2 does not know its instances yet", async () => {
      // Every instance is mapped to a closed port on this machine: SSH fails after sshTimeout.
      const closed = createServer();
      await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
      const port = (closed.address() as { port: number }).port;
      await new Promise<void>((resolve) => closed.close(() => resolve()));
      const proxy = await eventuallyConsistent(suite.moto.endpoint, {
        terminateLagMs: 20_000,
        describeLagMs: 1000,
        // A tag filter does not show them for a minute either: only terminating by id, retried, ends them.
        tagLagMs: 60_000,
      });
      try {
        const failure = await sky
          .compute({
            provider: AWS({ endpoint: proxy.endpoint, sshAddress: () => ({ host: "127.0.0.1", port }) }),
            nodes: 1,
            vcpus: 2,
            memoryGb: 4,
            architecture: "x86_64",
            allocation: "on-demand",
            options: { console: false, sshTimeout: 2, maxProvisionAttempts: 1 },
          })
          .then(
            async (pool) => {
              await pool[Symbol.asyncDispose]();
              return undefined;
            },
            (error: unknown) => error,
          );
        expect(failure).toBeInstanceOf(Error);
        expect(runs(proxy.calls).length).toBeGreaterThan(0);
        // The first TerminateInstances came within the lag and was answered NotFound; asked again.
        const terminates = proxy.calls.filter((entry) => entry.action === "TerminateInstances");
        expect(terminates.length).toBeGreaterThan(1);
        await expectNothingLeft(suite.moto.endpoint);
      } finally {
        await proxy.close();
      }
    });

    it("instances the pool gives up right after RunInstances are terminated, though EC2 does not know them yet", async () => {
      let failDescribe = true;
      const proxy = await eventuallyConsistent(
        suite.moto.endpoint,
        { terminateLagMs: 5000, describeLagMs: 30_000 },
        (action) => {
          if (action !== "DescribeInstances" || !failDescribe) return undefined;
          const started = proxy.calls.some((entry) => entry.action === "RunInstances");
          if (!started) return undefined;
          failDescribe = false;
          return {
            status: 400,
            code: "UnauthorizedOperation",
            message: "You are not authorized to perform this operation.",
          };
        },
      );
      try {
        const aws = AWS({ endpoint: proxy.endpoint });
        const cluster = await onDemandT3Cluster(aws);
        // provision hands the instances back as RunInstances answered; the pool's wait for "running"
        // (getInstance) then fails, and the pool terminates what provision returned.
        const launched = await aws.provision({ cluster, count: 2, ...call() });
        expect(launched.map((instance) => instance.status)).toEqual(["pending", "pending"]);
        const failure = await aws
          .getInstance({ cluster, id: launched[0]?.id as string, ...call() })
          .catch((error: unknown) => error);
        expect(ProvisionError.isInstance(failure)).toBe(true);
        await aws.terminate({ cluster, ids: launched.map((instance) => instance.id), ...call() });
        expect(runs(proxy.calls)).toHaveLength(1);
        expect((await motoInventory(suite.moto.endpoint)).liveInstances).toEqual([]);
        // Not visible yet: pending to the provider that launched it, unknown to one that did not.
        const [id] = proxy.launched();
        expect((await aws.getInstance({ cluster, id: id as string, ...call() }))?.status).toBe("pending");
        expect(
          await AWS({ endpoint: proxy.endpoint }).getInstance({ cluster, id: id as string, ...call() }),
        ).toBeNull();
        await aws.teardown({ cluster, ...call() });
      } finally {
        await proxy.close();
      }
    });

    it("teardown right after provision terminates instances a tag filter does not show yet", async () => {
      const proxy = await eventuallyConsistent(suite.moto.endpoint, {
        terminateLagMs: 4000,
        describeLagMs: 1000,
        tagLagMs: 60_000,
      });
      try {
        const aws = AWS({ endpoint: proxy.endpoint });
        const cluster = await onDemandT3Cluster(aws);
        const instances = await aws.provision({ cluster, count: 1, ...call() });
        expect(instances).toHaveLength(1);
        await aws.teardown({ cluster, ...call() });
        await expectNothingLeft(suite.moto.endpoint);
      } finally {
        await proxy.close();
      }
    });

    it("teardown after a provision stopped mid-launch terminates the instance EC2 launched, once it shows", async () => {
      // Ctrl-C while RunInstances is answered: EC2 launched the instance, the answer never came, and
      // for a while neither its client token nor its tags find it. The pool's teardown must still end
      // it when it shows, not wait on it until the deadline while it bills.
      const launchedAt = new Map<string, number>();
      let accepted: () => void = () => undefined;
      const launchAccepted = new Promise<void>((resolve) => {
        accepted = resolve;
      });
      const proxy = await startFaultProxy(
        suite.moto.endpoint,
        () => undefined,
        (action, _params, body) => {
          if (action === "RunInstances") {
            for (const match of body.matchAll(/<instanceId>(i-[0-9a-f]+)<\/instanceId>/g))
              launchedAt.set(match[1] ?? "", Date.now());
            accepted();
            return new Promise<string>(() => undefined);
          }
          if (action !== "DescribeInstances") return body;
          return dropReservations(body, (id) => Date.now() - (launchedAt.get(id) ?? 0) < 8000);
        },
      );
      try {
        const aws = AWS({ endpoint: proxy.endpoint });
        const cluster = await onDemandT3Cluster(aws);
        const stop = new AbortController();
        const provisioning = aws.provision({ cluster, count: 1, signal: stop.signal });
        await launchAccepted;
        stop.abort(new Error("interrupted"));
        await expect(provisioning).rejects.toThrow("interrupted");
        await aws.teardown({ cluster, signal: AbortSignal.timeout(90_000) });
        await expectNothingLeft(suite.moto.endpoint);
      } finally {
        await proxy.close();
      }
    });

    it("retries a security group EC2 does not know yet right after creating it", async () => {
      let authorizeRefusals = 2;
      let runRefusals = 1;
      const proxy = await startFaultProxy(suite.moto.endpoint, (action, params) => {
        if (action === "AuthorizeSecurityGroupIngress" && authorizeRefusals > 0) {
          authorizeRefusals -= 1;
          return {
            status: 400,
            code: "InvalidGroup.NotFound",
            message: `The security group '${params.get("GroupId")}' does not exist`,
          };
        }
        if (action === "RunInstances" && runRefusals > 0) {
          runRefusals -= 1;
          return {
            status: 400,
            code: "InvalidGroup.NotFound",
            message: "The security group does not exist in VPC",
          };
        }
        return undefined;
      });
      try {
        const aws = AWS({ endpoint: proxy.endpoint });
        const cluster = await onDemandT3Cluster(aws);
        expect(proxy.calls.filter((entry) => entry.action === "AuthorizeSecurityGroupIngress")).toHaveLength(
          3,
        );
        const instances = await aws.provision({ cluster, count: 1, ...call() });
        expect(instances).toHaveLength(1);
        expect(runs(proxy.calls)).toHaveLength(2);
        await aws.teardown({ cluster, ...call() });
      } finally {
        await proxy.close();
      }
    });
  });

  describe("root volume", () => {
    it("sizes the root volume from diskGb and the AMI's snapshot, 64 GiB by default; a diskGb below the snapshot is raised to it", async () => {
      const proxy = await startFaultProxy(suite.moto.endpoint, () => undefined);
      try {
        const aws = AWS({ endpoint: proxy.endpoint });
        const offer = await offerOf(aws, cpuQuery, "t3.medium");
        // diskGb is a minimum (spec.ts): below the image's snapshot, which EC2 refuses
        // (InvalidBlockDeviceMapping, the double's answer), the snapshot's size is asked instead —
        // a GPU image's ~100 GiB rather than a pool that fails every AWS offer.
        const sizes: string[] = [];
        for (const diskGb of [undefined, 100, 10]) {
          const cluster = await aws.prepare({
            spec: poolSpec({ allocation: "on-demand", ...(diskGb !== undefined ? { diskGb } : {}) }),
            offer,
            ...call(),
          });
          await aws.provision({ cluster, count: 1, ...call() });
          sizes.push(runs(proxy.calls).at(-1)?.params.get("BlockDeviceMapping.1.Ebs.VolumeSize") ?? "none");
          await aws.teardown({ cluster, ...call() });
        }
        expect(sizes).toEqual([String(DEFAULT_ROOT_VOLUME_GB), "100", String(MOTO_SNAPSHOT_GB)]);
      } finally {
        await proxy.close();
      }
    });
  });
});
