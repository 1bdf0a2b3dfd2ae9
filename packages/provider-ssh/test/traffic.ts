/** What the remote-reference suites read from `pool.traffic()`: each node's bytes since a snapshot. */
import type * as sky from "@skyward/core";

/** Per node connected now: bytes through the client (`sent`, `received`) and node to node (`served`, `fetched`) since `before`. */
export function trafficSince(
  before: readonly sky.NodeTraffic[],
  now: readonly sky.NodeTraffic[],
): sky.NodeTraffic[] {
  return now.map((entry) => {
    const then = before.find((each) => each.node === entry.node)!;
    return {
      node: entry.node,
      sent: entry.sent - then.sent,
      received: entry.received - then.received,
      served: entry.served - then.served,
      fetched: entry.fetched - then.fetched,
    };
  });
}
