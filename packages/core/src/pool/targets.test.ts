import { describe, expect, it } from "vitest";
import { ConfigurationError } from "../errors/errors.js";
import { resolveTarget, type TargetNodes } from "./targets.js";

// An elastic pool with a gap: nodes 0 and 2 present, 3 being started; two workers per node.
const nodes: TargetNodes = {
  present: [0, 2],
  known: (index) => index === 0 || index === 2 || index === 3,
  workersPerNode: 2,
};

function pathOf(run: () => unknown): string | undefined {
  try {
    run();
  } catch (error) {
    expect(ConfigurationError.isInstance(error)).toBe(true);
    return (error as ConfigurationError).issues[0]?.path;
  }
  return undefined;
}

describe("run targets", () => {
  it("place a call on the head, a node, a worker of a node, or a global rank", () => {
    expect(resolveTarget(undefined, nodes)).toBeUndefined();
    expect(resolveTarget("head", nodes)).toEqual({ node: 0 });
    expect(resolveTarget(3, nodes)).toEqual({ node: 3 });
    expect(resolveTarget({ node: 2 }, nodes)).toEqual({ node: 2 });
    expect(resolveTarget({ node: 2, worker: 1 }, nodes)).toEqual({ node: 2, worker: 1 });
    expect(resolveTarget({ rank: 1 }, nodes)).toEqual({ node: 0, worker: 1 });
  });

  it("refuse what names no node of the pool, naming the field", () => {
    expect(pathOf(() => resolveTarget(1, nodes))).toBe("target");
    expect(pathOf(() => resolveTarget({ node: 5 }, nodes))).toBe("target.node");
    expect(pathOf(() => resolveTarget({ node: 0, worker: 2 }, nodes))).toBe("target.worker");
    expect(pathOf(() => resolveTarget({ rank: 2 }, nodes))).toBe("target.rank");
    expect(pathOf(() => resolveTarget({ rank: 4 }, nodes))).toBe("target.rank");
    expect(pathOf(() => resolveTarget("tail" as never, nodes))).toBe("target");
  });
});
