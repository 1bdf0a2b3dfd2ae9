/**
 * An elastic Hyperstack pool attached again grows and shrinks, against the fake Infrahub API whose VMs
 * are test-bed hosts (`fake-hyperstack.ts`): a `[1, 2]` pool is detached, attached through a new
 * provider object (credentials read again, the cluster from the state file), and `resize(2)` creates a
 * second VM in the recorded cluster — its key pair, its environment — whose worker runs tasks; given
 * back, the VM is deleted, and once closed the fake holds nothing of the pool.
 */
import * as sky from "@skyward/core";
import { poolTasks, requireTestbed } from "@skyward/testing";
import { describe, expect, it } from "vitest";
import { usePooledHyperstack } from "./pooled-fake.js";

const skipReason = await requireTestbed();

describe.skipIf(skipReason !== undefined)(
  "an elastic Hyperstack pool attached again (fake API, test-bed VMs)",
  () => {
    const { pooled, provider } = usePooledHyperstack("skyward-hyperstack-attach-elastic-");

    it("creates a VM in the recorded cluster on resize, runs tasks on it, and deletes it when given back", async () => {
      const pool = await sky.compute({
        provider: provider(),
        region: "NORWAY-1",
        nodes: [1, 2],
        ttl: 60,
        image: { includes: [poolTasks.file], env: { POOL_MARK: "recorded" } },
        options: { console: false, bootstrapTimeout: 240, autoscaleIdleTimeout: 600 },
      });
      const [head] = await pool.broadcast(poolTasks.whoami());
      const id = await pool.detach();
      await using again = await sky.attach(id, { provider: provider(), options: { console: false } });
      expect(again.nodes()).toHaveLength(1);
      await again.resize(2);
      const both = await again.broadcast(poolTasks.whoami());
      expect(both.map((entry) => entry.node)).toEqual([0, 1]);
      expect(both[0]).toEqual(head);
      // A second VM, on the other test-bed host.
      expect(new Set(again.nodes().map((node) => node.privateIp)).size).toBe(2);
      // The new node was made with the recorded image: its environment is there.
      const marks = await again.broadcast(poolTasks.environment("POOL_MARK"));
      expect(marks.map((entry) => entry.value)).toEqual(["recorded", "recorded"]);
      await again.resize(1);
      expect(again.nodes()).toHaveLength(1);
      expect(await again.broadcast(poolTasks.whoami())).toEqual([head]);
      await again.close();
      expect(await pooled.fake.leftovers()).toEqual([]);
    }, 300_000);
  },
);
