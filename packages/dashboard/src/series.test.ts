import { describe, expect, it } from "vitest";
import { DownsampledSeries } from "./series.js";

describe("DownsampledSeries", () => {
  it("keeps every sample until its capacity", () => {
    const series = new DownsampledSeries(8);
    for (let index = 0; index < 7; index++) series.add(index * 1000, index);
    expect(series.points().map((point) => point.v)).toEqual([0, 1, 2, 3, 4, 5, 6]);
    expect(series.samplesPerPoint).toBe(1);
  });

  it("merges neighbours in pairs when full, and stays within its capacity over a long run", () => {
    const series = new DownsampledSeries(8);
    for (let index = 0; index < 8; index++) series.add(index * 1000, index);
    expect(series.points()).toEqual([
      { t: 1000, v: 0.5 },
      { t: 3000, v: 2.5 },
      { t: 5000, v: 4.5 },
      { t: 7000, v: 6.5 },
    ]);
    expect(series.samplesPerPoint).toBe(2);
    // Two hours at one sample a second.
    for (let index = 8; index < 7200; index++) series.add(index * 1000, index);
    expect(series.points().length).toBeLessThanOrEqual(8);
    expect(series.points().at(-1)?.t).toBe(7_199_000);
    expect(series.points()[0]?.t).toBeLessThan(2_000_000);
  });

  it("shows the bucket still filling, and only points after `since`", () => {
    const series = new DownsampledSeries(4);
    for (let index = 0; index < 5; index++) series.add(index * 1000, 10 * index, index);
    // Buckets of two after the first merge: [0,1] [2,3] and the filling one holding 4.
    expect(series.points()).toEqual([
      { t: 1000, v: 5, step: 1 },
      { t: 3000, v: 25, step: 3 },
      { t: 4000, v: 40, step: 4 },
    ]);
    expect(series.points(3000).map((point) => point.t)).toEqual([4000]);
  });

  it("refuses a capacity it cannot halve", () => {
    expect(() => new DownsampledSeries(5)).toThrow(/even whole number/);
  });
});
