import { describe, expect, it } from "vitest";
import { MapStop, STOPPED } from "./map-stop.js";

/** A promise and its resolvers, to settle by hand. */
function deferred<T>() {
  let resolve: (value: T) => void = () => {};
  let reject: (error: Error) => void = () => {};
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

describe("MapStop", () => {
  it("gives the awaited value, or its rejection, when the map has not stopped", async () => {
    const stop = new MapStop();
    const value = deferred<number>();
    const waiting = stop.until(value.promise);
    value.resolve(3);
    await expect(waiting).resolves.toBe(3);
    const failing = deferred<number>();
    const failed = stop.until(failing.promise);
    failing.reject(new Error("the source broke"));
    await expect(failed).rejects.toThrow("the source broke");
    expect(stop.stopped).toBe(false);
  });

  it("ends the wait under way with STOPPED, and every later wait at once", async () => {
    const stop = new MapStop();
    const never = deferred<number>();
    const waiting = stop.until(never.promise);
    stop.stop();
    await expect(waiting).resolves.toBe(STOPPED);
    expect(stop.stopped).toBe(true);
    const later = deferred<number>();
    await expect(stop.until(later.promise)).resolves.toBe(STOPPED);
    // Settling after the stop changes nothing, and a rejection then counts as handled.
    later.reject(new Error("too late"));
    never.resolve(1);
    await expect(waiting).resolves.toBe(STOPPED);
  });

  it("a wait that ended leaves the next wait's listener in place: a stop then ends the next", async () => {
    const stop = new MapStop();
    const first = deferred<string>();
    const waiting = stop.until(first.promise);
    first.resolve("item");
    await expect(waiting).resolves.toBe("item");
    const second = deferred<string>();
    const next = stop.until(second.promise);
    stop.stop();
    await expect(next).resolves.toBe(STOPPED);
  });
});
