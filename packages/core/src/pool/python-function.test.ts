import { describe, expect, it } from "vitest";
import { isPending, kwargs, python } from "./python-function.js";

describe("python function references", () => {
  const greet = python<[name: string, punctuation?: string], string>("tasks:greet");

  it("make frozen pending calls and run nothing", () => {
    const pending = greet("ada");
    expect(pending).toMatchObject({
      kind: "task",
      ref: "tasks:greet",
      args: ["ada"],
      kwargs: {},
      timeout: undefined,
    });
    expect(Object.isFrozen(pending)).toBe(true);
    expect(isPending(pending)).toBe(true);
    expect(greet.ref).toBe("tasks:greet");
  });

  it("take keyword arguments after any leading part of the positional ones", () => {
    expect(greet("ada", kwargs({ greeting: "hi" })).kwargs).toEqual({ greeting: "hi" });
    expect(greet("ada", "?", kwargs({ greeting: "hi" })).args).toEqual(["ada", "?"]);
    expect(greet(kwargs({ name: "ada" })).args).toEqual([]);
    // @ts-expect-error -- a number is not the name
    greet(1);
    expect(greet("ada").withKwargs({ a: 1 }).withKwargs({ b: 2 }).kwargs).toEqual({ a: 1, b: 2 });
  });

  it("set timeouts on copies, and refuse bad ones and bad references", () => {
    const pending = greet("ada");
    const timed = pending.withTimeout(30);
    expect(timed.timeout).toBe(30);
    expect(pending.timeout).toBeUndefined();
    expect(() => pending.withTimeout(0)).toThrow(/timeout/);
    expect(() => python("not a ref")).toThrow(/module:function/);
    expect(() => python("tasks:fn", { timeout: -1 })).toThrow(/timeout/);
    expect(python("pkg.mod:Class.method").ref).toBe("pkg.mod:Class.method");
  });

  it("mark generator functions as streams", () => {
    const count = python.stream<[n: number], number>("tasks:count");
    expect(count(3).kind).toBe("stream");
    expect(count(3).withTimeout(5).kind).toBe("stream");
  });

  it("carry a retry policy, on copies, and refuse bad ones", () => {
    expect(greet("ada").retry).toBeUndefined();
    expect(greet("ada").withRetry(false).retry).toEqual({ retries: 0 });
    expect(greet("ada").withRetry({ retries: 5 }).retry).toEqual({ retries: 5 });
    const once = python<[], number>("tasks:charge", { retry: false });
    expect(once().retry).toEqual({ retries: 0 });
    const lines = python.stream<[], string>("tasks:lines", { retry: { restartStream: true } });
    expect(lines().retry).toEqual({ restartStream: true });
    expect(() => greet("ada").withRetry({ retries: -1 })).toThrow(/retries: expected an integer >= 0/);
    // @ts-expect-error -- restartStream is for generator functions
    expect(() => greet("ada").withRetry({ restartStream: true })).toThrow(/generator functions/);
    // @ts-expect-error -- not a field
    expect(() => greet("ada").withRetry({ attempts: 2 })).toThrow(/unknown field "attempts"/);
    // @ts-expect-error -- true is not a policy
    expect(() => python("tasks:f", { retry: true })).toThrow(/expected false or/);
  });

  it("refuse options they do not know, and a result that is no schema, naming the field", () => {
    // @ts-expect-error -- a misspelt timeout would otherwise be ignored: the pool's default applies
    expect(() => python("tasks:f", { timout: 5 })).toThrow(/options: unknown field "timout"/);
    // @ts-expect-error -- "retries" belongs inside retry
    expect(() => python.stream("tasks:g", { retries: 2 })).toThrow(/unknown field "retries"/);
    // @ts-expect-error -- not a zod schema: nothing would check the result
    expect(() => python("tasks:f", { result: "number" })).toThrow(/result: expected a zod schema/);
    // @ts-expect-error -- options are an object
    expect(() => python("tasks:f", 30)).toThrow(/options: expected an object/);
    expect(python("tasks:f", { timeout: 5, retry: false, result: undefined })().timeout).toBe(5);
  });
});
