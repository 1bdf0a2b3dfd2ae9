import { describe, expect, it } from "vitest";
import { Reconciler } from "./reconcile.js";

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe("Reconciler", () => {
  it("runs one step for a burst of pokes, never two at once, and one more for a poke during a step", async () => {
    let running = 0;
    let most = 0;
    let steps = 0;
    let release: () => void = () => {};
    const loop = new Reconciler(
      async () => {
        steps += 1;
        running += 1;
        most = Math.max(most, running);
        await new Promise<void>((resolve) => {
          release = resolve;
        });
        running -= 1;
      },
      60_000,
      () => {},
    );
    for (let i = 0; i < 100; i += 1) loop.poke();
    await tick();
    expect(steps).toBe(1);
    loop.poke();
    loop.poke();
    release();
    await tick();
    expect(steps).toBe(2);
    release();
    await tick();
    expect(steps).toBe(2);
    expect(most).toBe(1);
    await loop.stop();
  });

  it("ticks on its interval, reports a failing step and keeps going, and stops", async () => {
    const errors: unknown[] = [];
    let steps = 0;
    const loop = new Reconciler(
      async () => {
        steps += 1;
        if (steps === 1) throw new Error("first step fails");
      },
      20,
      (error) => errors.push(error),
    );
    const deadline = Date.now() + 10_000;
    while (steps < 3 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
    await loop.stop();
    const seen = steps;
    expect(seen).toBeGreaterThanOrEqual(3);
    expect(errors).toHaveLength(1);
    await new Promise((resolve) => setTimeout(resolve, 60));
    loop.poke();
    await tick();
    expect(steps).toBe(seen);
  });
});
