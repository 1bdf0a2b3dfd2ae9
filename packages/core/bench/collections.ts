/**
 * Distributed-collection figures: operations per second, measured inside tasks, for counter
 * increments and dict reads with `"strong"` (every operation a round trip to the pool's authority
 * in the client) and `"eventual"` consistency (reads from the worker's replica, writes not waited
 * for), on one node and on every node of a 2-node pool at once (the authority serves them all).
 */
import { join } from "node:path";
import * as sky from "../dist/index.js";
import { benchDirectory } from "./python.ts";
import { median, progress } from "./stats.ts";

const image = { includes: [join(benchDirectory, "bench_tasks.py")] };
const collectionOps = sky.python<[string, string, number], number>("bench_tasks:collection_ops");

/** One figure: a kind of operation, a consistency, how many nodes ran it at once, and the ops/s. */
export interface CollectionFigure {
  readonly operation: "counter-increment" | "dict-read";
  readonly consistency: "strong" | "eventual";
  readonly nodes: number;
  /** Sum over the nodes of each task's operations per second (median of the runs). */
  readonly opsPerSecond: number;
  readonly runs: readonly number[];
}

/**
 * The client's own `pool.counter(…).increment()`: one after another, and 10,000 in flight at once
 * (`Promise.all`), each with this process's CPU time per operation (a figure the machine's load
 * disturbs less than the rate).
 */
export interface ClientOpsFigures {
  readonly incrementsPerSecond: number;
  readonly concurrentIncrementsPerSecond: number;
  readonly clientCpuMicroseconds: number;
  readonly concurrentClientCpuMicroseconds: number;
}

/** Also the client's own figures, on the 2-node pool and on a pool of one node (no copy to wait for). */
export interface CollectionsResult {
  readonly figures: readonly CollectionFigure[];
  readonly clientIncrementsPerSecond: number;
  readonly clientConcurrentIncrementsPerSecond: number;
  readonly clientOnTwoNodes: ClientOpsFigures;
  readonly clientOnOneNode: ClientOpsFigures;
  readonly opsPerTask: number;
}

function cpuMicroseconds(): number {
  const { user, system } = process.cpuUsage();
  return user + system;
}

async function measureClientOps(pool: sky.Pool, quick: boolean): Promise<ClientOpsFigures> {
  const counter = pool.counter("bench-client");
  await counter.increment();
  const clientOps = quick ? 5000 : 50_000;
  let cpuStarted = cpuMicroseconds();
  const started = performance.now();
  for (let index = 0; index < clientOps; index += 1) await counter.increment();
  const incrementsPerSecond = clientOps / ((performance.now() - started) / 1000);
  const clientCpuMicroseconds = (cpuMicroseconds() - cpuStarted) / clientOps;
  const concurrentOps = 10_000;
  cpuStarted = cpuMicroseconds();
  const concurrentStarted = performance.now();
  await Promise.all(Array.from({ length: concurrentOps }, () => counter.increment()));
  return {
    incrementsPerSecond,
    concurrentIncrementsPerSecond: concurrentOps / ((performance.now() - concurrentStarted) / 1000),
    clientCpuMicroseconds,
    concurrentClientCpuMicroseconds: (cpuMicroseconds() - cpuStarted) / concurrentOps,
  };
}

export async function measureCollections(quick: boolean): Promise<CollectionsResult> {
  const opsPerTask = quick ? 2000 : 20_000;
  const runs = quick ? 1 : 3;
  const figures: CollectionFigure[] = [];
  progress("collections: a 2-node Local pool (thread executor, concurrency 1)");
  await using pool = await sky.compute({ nodes: 2, image, options: { console: false } });
  for (const operation of ["counter-increment", "dict-read"] as const) {
    for (const consistency of ["strong", "eventual"] as const) {
      for (const nodes of [1, 2]) {
        const measured: number[] = [];
        await pool.run(collectionOps(operation, consistency, Math.min(500, opsPerTask))); // warm-up
        for (let run = 0; run < runs; run += 1) {
          const each = await Promise.all(
            Array.from({ length: nodes }, (_, node) =>
              pool.run(collectionOps(operation, consistency, opsPerTask), { target: node }),
            ),
          );
          measured.push(each.reduce((sum, value) => sum + value, 0));
        }
        figures.push({ operation, consistency, nodes, opsPerSecond: median(measured), runs: measured });
        progress(
          `collections: ${operation} ${consistency} on ${nodes} node(s): ${Math.round(median(measured))}/s`,
        );
      }
    }
  }
  const clientOnTwoNodes = await measureClientOps(pool, quick);
  progress("collections: the client's own operations on a 1-node Local pool");
  await using single = await sky.compute({ nodes: 1, options: { console: false } });
  const clientOnOneNode = await measureClientOps(single, quick);
  return {
    figures,
    clientIncrementsPerSecond: clientOnTwoNodes.incrementsPerSecond,
    clientConcurrentIncrementsPerSecond: clientOnTwoNodes.concurrentIncrementsPerSecond,
    clientOnTwoNodes,
    clientOnOneNode,
    opsPerTask,
  };
}
