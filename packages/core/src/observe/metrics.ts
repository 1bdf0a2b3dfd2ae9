/**
 * Telemetry collectors, the counterpart of the reference's `sky.metrics`. Each factory returns a
 * plain frozen descriptor; the list goes into `image.metrics`, the Python worker samples every
 * collector on its own interval and streams the values back as metric events.
 *
 * ```ts
 * import { image, metrics } from "@skyward/core";
 *
 * image({ metrics: [metrics.CPU({ interval: 0.5 }), metrics.GPU(), metrics.Disk("/data")] });
 * image({ metrics: metrics.Default() }); // the default set (also what an omitted `metrics` gives)
 * image({ metrics: null });              // collect nothing
 * ```
 */

import { z } from "zod";
import { nonFiniteMessage, parseInput } from "../errors/validation.js";

/** The built-in collectors, by the `collector` tag their descriptors carry. */
export type MetricCollectorKind =
  | "cpu"
  | "memory"
  | "memory_used"
  | "memory_total"
  | "gpu"
  | "gpu_memory"
  | "gpu_memory_total"
  | "gpu_temp"
  | "disk"
  | "network_rx"
  | "network_tx"
  | "custom";

interface MetricCollectorBase {
  /** Marks the object as a metric collector descriptor. */
  readonly kind: "metric";
  /** Seconds between two samples; at least 0.1. */
  readonly interval: number;
}

/** A collector whose value the worker reads itself (`/proc`, `nvidia-smi`). */
export interface BuiltinMetricCollector extends MetricCollectorBase {
  /** Which built-in collector this is. */
  readonly collector: Exclude<MetricCollectorKind, "disk" | "custom">;
  /** The metric's name in metric events; the same as `collector` for built-ins. */
  readonly name: Exclude<MetricCollectorKind, "disk" | "custom">;
}

/** Disk usage (percent used) of the filesystem holding `path` on the worker. */
export interface DiskMetricCollector extends MetricCollectorBase {
  /** Always `"disk"`. */
  readonly collector: "disk";
  /** The metric's name in metric events. */
  readonly name: "disk";
  /** An absolute path on the worker; the filesystem that holds it is measured. */
  readonly path: string;
}

/** A metric read from a shell command's standard output (a number, one per sample). */
export interface CustomMetricCollector extends MetricCollectorBase {
  /** Always `"custom"`. */
  readonly collector: "custom";
  /** The metric's name in metric events, chosen by the user. */
  readonly name: string;
  /** The shell command run on the worker at every sample. */
  readonly command: string;
}

/** One telemetry collector, as attached to `image.metrics`. */
export type MetricCollector = BuiltinMetricCollector | DiskMetricCollector | CustomMetricCollector;

/** Options every collector factory takes. */
export interface MetricOptions {
  /** Seconds between two samples, at least 0.1 (shorter is refused). Each collector has its own default. */
  interval?: number;
}

/**
 * Default sampling intervals, in seconds. Fast-moving values (utilisation, memory in use, network
 * throughput) every second; slow ones (disk usage, temperature) every 5 s; values that do not change
 * while a machine runs (total memory) every 30 s.
 */
const defaultIntervals: Readonly<Record<MetricCollectorKind, number>> = {
  cpu: 1,
  memory: 1,
  memory_used: 1,
  memory_total: 30,
  gpu: 1,
  gpu_memory: 1,
  gpu_memory_total: 30,
  gpu_temp: 5,
  disk: 5,
  network_rx: 1,
  network_tx: 1,
  custom: 3,
};

/**
 * The shortest interval accepted, seconds: each sample reads `/proc`, runs a shell command or has
 * nvidia-smi loop, so a shorter one keeps the worker busy sampling (the worker drops such collectors too).
 */
const MIN_METRIC_INTERVAL = 0.1;

const intervalSchema = z
  .number({ error: nonFiniteMessage("a positive number of seconds") })
  .superRefine((value, context) => {
    if (!(value > 0)) {
      context.addIssue({
        code: "custom",
        message: `expected a positive number of seconds, received ${value}`,
      });
    } else if (value < MIN_METRIC_INTERVAL) {
      context.addIssue({
        code: "custom",
        message: `expected at least ${MIN_METRIC_INTERVAL} seconds between samples, received ${value}`,
      });
    }
  });

const nonBlank = (what: string) =>
  z.string().refine((value) => value.trim().length > 0, { message: `expected a non-empty ${what}` });

const builtinKinds = [
  "cpu",
  "memory",
  "memory_used",
  "memory_total",
  "gpu",
  "gpu_memory",
  "gpu_memory_total",
  "gpu_temp",
  "network_rx",
  "network_tx",
] as const satisfies readonly BuiltinMetricCollector["collector"][];

const builtinSchema = z
  .strictObject({
    kind: z.literal("metric"),
    collector: z.enum(builtinKinds),
    name: z.enum(builtinKinds),
    interval: intervalSchema,
  })
  .refine((collector) => collector.name === collector.collector, {
    path: ["name"],
    message: "expected the same name as the collector for a built-in collector",
  });

const diskSchema = z.strictObject({
  kind: z.literal("metric"),
  collector: z.literal("disk"),
  name: z.literal("disk"),
  path: nonBlank("path").refine((value) => value.startsWith("/"), {
    message: 'expected an absolute path on the worker, like "/data"',
  }),
  interval: intervalSchema,
});

const customSchema = z.strictObject({
  kind: z.literal("metric"),
  collector: z.literal("custom"),
  name: nonBlank("name"),
  command: nonBlank("command"),
  interval: intervalSchema,
});

/**
 * Validates one collector descriptor (as the factories make them) and returns it frozen. Used by the
 * image schema for `image.metrics[i]`.
 */
export const metricCollectorSchema: z.ZodType<MetricCollector, MetricCollector> = z
  .discriminatedUnion("collector", [builtinSchema, diskSchema, customSchema], {
    error: (issue) =>
      issue.code === "invalid_union" || issue.code === "invalid_type"
        ? `expected a metric collector made by sky.metrics (collector one of ${[
            ...builtinKinds,
            "disk",
            "custom",
          ]
            .map((kind) => `"${kind}"`)
            .join(", ")})`
        : undefined,
  })
  .transform((collector): MetricCollector => Object.freeze({ ...collector }));

function build(factory: string, descriptor: MetricCollector): MetricCollector {
  return parseInput(metricCollectorSchema, descriptor, `metrics.${factory}`);
}

function builtin(
  factory: string,
  collector: BuiltinMetricCollector["collector"],
  options: MetricOptions = {},
): MetricCollector {
  return build(factory, {
    kind: "metric",
    collector,
    name: collector,
    interval: options.interval ?? defaultIntervals[collector],
  });
}

/** CPU utilisation, percent over all cores. Default interval 1 s. */
export function CPU(options?: MetricOptions): MetricCollector {
  return builtin("CPU", "cpu", options);
}

/** Memory utilisation, percent of total RAM in use. Default interval 1 s. */
export function Memory(options?: MetricOptions): MetricCollector {
  return builtin("Memory", "memory", options);
}

/** Memory in use, in bytes. Default interval 1 s. */
export function MemoryUsed(options?: MetricOptions): MetricCollector {
  return builtin("MemoryUsed", "memory_used", options);
}

/** Total memory, in bytes. Default interval 30 s (it does not change while the machine runs). */
export function MemoryTotal(options?: MetricOptions): MetricCollector {
  return builtin("MemoryTotal", "memory_total", options);
}

/** GPU utilisation, percent, per GPU (via `nvidia-smi`). Default interval 1 s. */
export function GPU(options?: MetricOptions): MetricCollector {
  return builtin("GPU", "gpu", options);
}

/** GPU memory in use, per GPU (via `nvidia-smi`). Default interval 1 s. */
export function GPUMemory(options?: MetricOptions): MetricCollector {
  return builtin("GPUMemory", "gpu_memory", options);
}

/** Total GPU memory, per GPU (via `nvidia-smi`). Default interval 30 s. */
export function GPUMemoryTotal(options?: MetricOptions): MetricCollector {
  return builtin("GPUMemoryTotal", "gpu_memory_total", options);
}

/** GPU temperature in °C, per GPU (via `nvidia-smi`). Default interval 5 s. */
export function GPUTemp(options?: MetricOptions): MetricCollector {
  return builtin("GPUTemp", "gpu_temp", options);
}

/**
 * Disk usage, percent used, of the filesystem holding `path` (an absolute path on the worker,
 * default `/`). Default interval 5 s.
 */
export function Disk(path = "/", options: MetricOptions = {}): MetricCollector {
  return build("Disk", {
    kind: "metric",
    collector: "disk",
    name: "disk",
    path,
    interval: options.interval ?? defaultIntervals.disk,
  });
}

/** Bytes received per second over all network interfaces. Default interval 1 s. */
export function NetworkRx(options?: MetricOptions): MetricCollector {
  return builtin("NetworkRx", "network_rx", options);
}

/** Bytes sent per second over all network interfaces. Default interval 1 s. */
export function NetworkTx(options?: MetricOptions): MetricCollector {
  return builtin("NetworkTx", "network_tx", options);
}

/**
 * A metric produced by a shell command run on the worker every `interval` seconds (default 3); its
 * standard output, a number, is the sample. `name` is the metric's name in metric events.
 */
export function Custom(name: string, command: string, options: MetricOptions = {}): MetricCollector {
  return build("Custom", {
    kind: "metric",
    collector: "custom",
    name,
    command,
    interval: options.interval ?? defaultIntervals.custom,
  });
}

/**
 * The default set, what an image collects when `metrics` is not given: CPU utilisation, memory
 * utilisation, GPU utilisation and GPU memory in use (GPU collectors report nothing on machines
 * without `nvidia-smi`). `interval`, when given, applies to all four.
 */
export function Default(options: MetricOptions = {}): readonly MetricCollector[] {
  if (options.interval !== undefined)
    parseInput(intervalSchema, options.interval, "metrics.Default.interval");
  return Object.freeze([CPU(options), Memory(options), GPU(options), GPUMemory(options)]);
}

/** The collector factories as one namespace: `sky.metrics.CPU({ interval: 0.5 })`. */
export const metrics = {
  CPU,
  Memory,
  MemoryUsed,
  MemoryTotal,
  GPU,
  GPUMemory,
  GPUMemoryTotal,
  GPUTemp,
  Disk,
  NetworkRx,
  NetworkTx,
  Custom,
  Default,
} as const;
