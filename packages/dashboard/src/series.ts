/**
 * A metric's history over the whole run in bounded memory: samples are averaged into buckets, and
 * when the buckets fill their capacity, neighbours are merged in pairs and each bucket from then on
 * takes twice as many samples. A 16-node pool sampling every second for two hours keeps at most
 * `capacity` points per series (the resolution halves each time the run doubles in length).
 */

/** One point of a series: the time of its last sample (ms since the epoch) and the bucket's mean. */
export interface SeriesPoint {
  readonly t: number;
  readonly v: number;
  /** The training step of its last sample, for values a task reported with one. */
  readonly step?: number;
}

/** The points a series holds by default: enough for a smooth chart at any window size. */
export const DEFAULT_SERIES_CAPACITY = 720;

export class DownsampledSeries {
  readonly #capacity: number;
  readonly #points: SeriesPoint[] = [];
  /** Samples per bucket: doubles each time the buckets are merged. */
  #samplesPerPoint = 1;
  /** The bucket being filled: its sum, count, last time and last step. */
  #sum = 0;
  #count = 0;
  #lastTime = 0;
  #lastStep: number | undefined;

  constructor(capacity: number = DEFAULT_SERIES_CAPACITY) {
    if (!Number.isInteger(capacity) || capacity < 2 || capacity % 2 !== 0) {
      throw new RangeError(`a series' capacity is an even whole number >= 2, not ${capacity}`);
    }
    this.#capacity = capacity;
  }

  /** Samples each point averages now. */
  get samplesPerPoint(): number {
    return this.#samplesPerPoint;
  }

  /** Adds a sample taken at `time`. */
  add(time: number, value: number, step?: number): void {
    this.#sum += value;
    this.#count += 1;
    this.#lastTime = time;
    this.#lastStep = step;
    if (this.#count < this.#samplesPerPoint) return;
    this.#points.push(this.#bucket());
    this.#sum = 0;
    this.#count = 0;
    if (this.#points.length >= this.#capacity) this.#mergePairs();
  }

  /** The points after `since` (ms since the epoch), the bucket still filling included. */
  points(since = Number.NEGATIVE_INFINITY): SeriesPoint[] {
    const all = this.#count > 0 ? [...this.#points, this.#bucket()] : this.#points;
    return all.filter((point) => point.t > since);
  }

  #bucket(): SeriesPoint {
    const point = { t: this.#lastTime, v: this.#sum / this.#count };
    return this.#lastStep === undefined ? point : { ...point, step: this.#lastStep };
  }

  #mergePairs(): void {
    const merged: SeriesPoint[] = [];
    for (let index = 0; index + 1 < this.#points.length; index += 2) {
      const first = this.#points[index] as SeriesPoint;
      const second = this.#points[index + 1] as SeriesPoint;
      const point = { t: second.t, v: (first.v + second.v) / 2 };
      merged.push(second.step === undefined ? point : { ...point, step: second.step });
    }
    this.#points.splice(0, this.#points.length, ...merged);
    this.#samplesPerPoint *= 2;
  }
}
