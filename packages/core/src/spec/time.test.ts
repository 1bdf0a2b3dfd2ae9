import { describe, expect, it } from "vitest";
import { days, hours, milliseconds, minutes, seconds, time } from "./time.js";

describe("time helpers return seconds", () => {
  it("seconds is the identity", () => {
    expect(seconds(0)).toBe(0);
    expect(seconds(42)).toBe(42);
    expect(seconds(1.5)).toBe(1.5);
  });

  it("minutes, hours and days multiply out to seconds", () => {
    expect(minutes(10)).toBe(600);
    expect(minutes(0.5)).toBe(30);
    expect(hours(2)).toBe(7200);
    expect(hours(0.25)).toBe(900);
    expect(days(1)).toBe(86_400);
    expect(days(7)).toBe(604_800);
  });

  it("milliseconds divide down to (fractional) seconds", () => {
    expect(milliseconds(1500)).toBe(1.5);
    expect(milliseconds(250)).toBe(0.25);
    expect(milliseconds(0)).toBe(0);
  });

  it("the namespace holds the same functions", () => {
    expect(time).toEqual({ milliseconds, seconds, minutes, hours, days });
    expect(time.minutes(10)).toBe(600);
    expect(time.hours(1)).toBe(time.minutes(60));
    expect(time.days(1)).toBe(time.hours(24));
    expect(time.milliseconds(60_000)).toBe(time.minutes(1));
  });
});

describe("time helpers reject what is not a duration", () => {
  const helpers = Object.entries(time) as [keyof typeof time, (n: number) => number][];

  it.each(helpers)(
    "%s rejects negatives, NaN and infinities with a RangeError naming itself",
    (name, helper) => {
      for (const bad of [-1, -0.001, Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY]) {
        expect(() => helper(bad)).toThrow(RangeError);
        expect(() => helper(bad)).toThrow(
          `sky.time.${name}: expected a finite number >= 0, received ${String(bad)}`,
        );
      }
    },
  );

  it("rejects a non-number from an untyped caller", () => {
    const untyped = time.minutes as (n: unknown) => number;
    expect(() => untyped("10")).toThrow(RangeError);
    expect(() => untyped(undefined)).toThrow("received undefined");
  });
});
