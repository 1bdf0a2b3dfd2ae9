/**
 * An elastic pool on AWS (moto), each EC2 instance a test-bed host reached over real SSH: `resize`
 * grows it by an instance, and once idle it shrinks back — the idle node's instance terminated at
 * EC2 through the provider, so nothing is left billing — then closes with nothing left at moto.
 */
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";
import { createTestbed, requireTestbed, type Testbed, testbedSshHost, waitFor } from "@skyward/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AWS, type SshAddressMapping } from "../src/index.js";
import { motoInventory, motoSkipReason } from "./moto-server.js";
import { useMotoSuite } from "./moto-suite.js";

const skipReason = motoSkipReason() ?? (await requireTestbed());
const tasks = fileURLToPath(new URL("./fixtures/aws_tasks.py", import.meta.url));
const info = sky.python<[], { node: number }>("aws_tasks:info");

describe.skipIf(skipReason !== undefined)(
  "an elastic pool on AWS (moto) whose instances are test-bed hosts",
  () => {
    const suite = useMotoSuite("skyward-aws-elastic-");
    let bed: Testbed;

    beforeAll(async () => {
      bed = await createTestbed({ hosts: 2 });
    }, 180_000);

    afterAll(async () => {
      await bed?.teardown();
    });

    it("grows by an EC2 instance on resize, terminates it at EC2 once idle, and leaves nothing after close", async () => {
      const assigned = new Map<string, number>();
      const provider = AWS({
        endpoint: suite.moto.endpoint,
        sshAddress: (instance): SshAddressMapping => {
          let index = assigned.get(instance.id);
          if (index === undefined) {
            index = assigned.size;
            assigned.set(instance.id, index);
          }
          const host = bed.hosts[index];
          if (!host) throw new Error(`no test-bed host left for ${instance.id}`);
          return { ...testbedSshHost(host), privateIp: host.host, selfDestruct: "true" };
        },
      });
      const scaling: sky.ScalingEvent[] = [];
      {
        await using pool = await sky.compute(
          {
            provider,
            nodes: [1, 2],
            vcpus: 2,
            memoryGb: 4,
            architecture: "x86_64",
            ttl: 0,
            image: { includes: [tasks] },
            options: {
              console: false,
              bootstrapTimeout: 240,
              reconcileTickInterval: 0.5,
              autoscaleIdleTimeout: 2,
            },
          },
          { onEvent: (event) => event.type === "scaling" && scaling.push(event) },
        );
        const [first] = [...assigned.keys()];
        expect((await motoInventory(suite.moto.endpoint)).liveInstances).toEqual([first]);

        await pool.resize(2);
        expect((await pool.broadcast(info())).map((entry) => entry.node)).toEqual([0, 1]);
        const second = [...assigned.keys()][1] as string;
        expect((await motoInventory(suite.moto.endpoint)).liveInstances.sort()).toEqual(
          [first, second].sort(),
        );

        // Idle past the timeout: node 1 goes, and its instance is terminated at EC2.
        await waitFor(
          async () => (await motoInventory(suite.moto.endpoint)).liveInstances.length === 1,
          60_000,
          "the idle instance to be terminated",
        );
        expect((await motoInventory(suite.moto.endpoint)).liveInstances).toEqual([first]);
        expect(pool.nodes().map((node) => node.instanceId)).toEqual([first]);
        expect(scaling.map((event) => [event.from, event.to])).toEqual([
          [1, 2],
          [2, 1],
        ]);
      }
      const left = await motoInventory(suite.moto.endpoint);
      expect(left).toEqual({ liveInstances: [], securityGroups: [], keyPairs: [], skywardVolumes: [] });
    }, 400_000);
  },
);
