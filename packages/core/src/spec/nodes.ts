import { z } from "zod";
import { parseInput } from "../errors/validation.js";

/** How instances are bought: spot only, on-demand only, spot falling back to on-demand, or the cheaper of both. */
export type AllocationStrategy = "spot" | "on-demand" | "spot-if-available" | "cheapest";

/** The allocation strategies, default first. */
export const ALLOCATION_STRATEGIES: readonly AllocationStrategy[] = Object.freeze([
  "spot-if-available",
  "spot",
  "on-demand",
  "cheapest",
]);

/** CPU architectures a spec may ask for. */
export type Architecture = "x86_64" | "arm64";

/** A node topology with partial readiness and/or autoscaling, as given to {@link nodes}. */
export interface NodesInput {
  /** How many nodes to run (>= 1). */
  desired: number;
  /**
   * The floor: how many must be ready before the pool is usable (at least one, when `min` is 0), and
   * how far idle nodes are scaled down. `0` lets an idle pool scale to zero; a new task then starts a
   * node. Default: `desired`.
   */
  min?: number;
  /** Ceiling for autoscaling. Default: `desired` (no autoscaling). */
  max?: number;
}

/** A resolved node topology: `min <= desired <= max`, `desired >= 1`, `min >= 0`. */
export interface Nodes {
  readonly desired: number;
  readonly min: number;
  readonly max: number;
}

/**
 * How many nodes a pool has:
 * - `4` — exactly 4; the pool is ready when all 4 are up;
 * - `[2, 8]` — elastic: start at 2, autoscale up to 8 on queued tasks, idle nodes back down to 2;
 * - `sky.nodes({ desired: 8, min: 4 })` — usable once 4 are up, keeps growing to 8;
 * - `sky.nodes({ desired: 4, min: 2, max: 16 })` — early start and autoscaling;
 * - `sky.nodes({ desired: 1, min: 0, max: 4 })` — scales to zero when idle; a new task starts a node.
 */
export type NodeSpec = number | readonly [number, number] | NodesInput;

const nodeCount = (what: string) =>
  z
    .number({ error: `expected ${what} as a whole number >= 1` })
    .refine((value) => Number.isInteger(value) && value >= 1, {
      message: `expected ${what} as a whole number >= 1`,
    });

const nodeFloor = z
  .number({ error: "expected the minimum node count as a whole number >= 0" })
  .refine((value) => Number.isInteger(value) && value >= 0, {
    message: "expected the minimum node count as a whole number >= 0",
  });

const nodesObjectSchema = z
  .strictObject({
    desired: nodeCount("the desired node count"),
    min: nodeFloor.optional(),
    max: nodeCount("the maximum node count").optional(),
  })
  .superRefine((value, context) => {
    if (value.min !== undefined && value.max !== undefined && value.min > value.max) {
      context.addIssue({
        code: "custom",
        path: ["min"],
        message: `must be <= max (${value.max}), received ${value.min}`,
      });
      return;
    }
    if (value.min !== undefined && value.min > value.desired) {
      context.addIssue({
        code: "custom",
        path: ["min"],
        message: `must be <= desired (${value.desired}), received ${value.min}`,
      });
    }
    if (value.max !== undefined && value.max < value.desired) {
      context.addIssue({
        code: "custom",
        path: ["max"],
        message: `must be >= desired (${value.desired}), received ${value.max}`,
      });
    }
  })
  .transform(
    (value): Nodes =>
      Object.freeze({
        desired: value.desired,
        min: value.min ?? value.desired,
        max: value.max ?? value.desired,
      }),
  );

/** Validates any {@link NodeSpec} into {@link Nodes}. */
export const nodeSpecSchema = z.union(
  [
    nodeCount("the node count").transform((n): Nodes => Object.freeze({ desired: n, min: n, max: n })),
    z
      .tuple([nodeCount("the initial node count"), nodeCount("the maximum node count")], {
        error: "expected a range [min, max] of two node counts",
      })
      .superRefine(([low, high], context) => {
        if (low > high) {
          context.addIssue({
            code: "custom",
            path: [1],
            message: `must be >= the initial node count (${low}), received ${high}`,
          });
        }
      })
      .transform(([low, high]): Nodes => Object.freeze({ desired: low, min: low, max: high })),
    nodesObjectSchema,
  ],
  { message: "expected a node count (4), a range [min, max] ([2, 8]) or sky.nodes({ desired, min, max })" },
);

/** Validates a node topology: `sky.nodes({ desired: 8, min: 4 })`. */
export function nodes(input: NodesInput): Nodes {
  return parseInput(nodesObjectSchema, input, "nodes");
}
