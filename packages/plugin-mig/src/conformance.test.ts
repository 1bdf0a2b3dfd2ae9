/**
 * The built-in plugin passes the plugin conformance suite of `@skyward/testing`, as every plugin must.
 */
import type { Cluster } from "@skyward/core/contract";
import { fakeCluster, runPluginConformance } from "@skyward/testing";
import { mig } from "./index.js";

// MIG partitions GPUs: its hooks are given a cluster of A100 80 GB nodes.
const cluster = fakeCluster({
  spec: { acceleratorName: "A100", acceleratorCount: 1, acceleratorMemoryGb: 80 } as Cluster["spec"],
  offer: { accelerator: { name: "A100", count: 1, memoryGb: 80 } } as Cluster["offer"],
});
runPluginConformance({ name: "mig", create: () => mig("1g.10gb"), cluster });
