/**
 * The client's half of telemetry: the image's collectors as the `cluster` message carries them to
 * each worker, and the worker's `metric` messages turned into `metric` events on the pool's hub.
 */
import type { ClusterMetric, MetricMessage, ReceivedMessage } from "../protocol/protocol.js";
import type { EventHub } from "./events.js";
import type { MetricCollector } from "./metrics.js";

/** The collectors of `image.metrics` as the `cluster` message names them (`null`: telemetry off). */
export function clusterMetrics(collectors: readonly MetricCollector[] | null): ClusterMetric[] {
  return (collectors ?? []).map((collector) => {
    const base = { collector: collector.collector, name: collector.name, interval: collector.interval };
    if (collector.collector === "disk") return { ...base, path: collector.path };
    if (collector.collector === "custom") return { ...base, command: collector.command };
    return base;
  });
}

/** Where metric messages come from: a worker connection's general listeners. */
export interface MetricSource {
  onMessage(listener: (message: ReceivedMessage) => void): () => void;
}

/**
 * Publishes node `node`'s `metric` messages as `metric` events (only while someone listens to them);
 * returns a function that stops.
 */
export function relayMetrics(source: MetricSource, hub: EventHub, poolId: string, node: number): () => void {
  return source.onMessage((received) => {
    if (received.t !== "metric" || !hub.listensTo("metric")) return;
    const message = received as MetricMessage;
    // Optional fields, so the validator does not check them: kept only when well-formed.
    const { gpu, worker, task, step } = message as {
      gpu?: unknown;
      worker?: unknown;
      task?: unknown;
      step?: unknown;
    };
    hub.emit({
      type: "metric",
      // The client's clock, like every other event's (a node's clock may be off).
      timestamp: Date.now(),
      poolId,
      node,
      name: message.name,
      value: message.value,
      ...(message.unit !== null ? { unit: message.unit } : {}),
      ...(typeof gpu === "number" && Number.isInteger(gpu) ? { gpu } : {}),
      ...(typeof worker === "number" && Number.isInteger(worker) ? { worker } : {}),
      ...(typeof task === "string" ? { taskId: task } : {}),
      ...(typeof step === "number" && Number.isInteger(step) ? { step } : {}),
    });
  });
}
