/** A first-in, first-out queue: an array with a moving head, compacted now and then. */

/** A simple array-backed FIFO with O(1) amortised shift. */
export class Fifo<T> {
  #items: (T | undefined)[] = [];
  #head = 0;

  get size(): number {
    return this.#items.length - this.#head;
  }

  push(item: T): void {
    this.#items.push(item);
  }

  peek(): T | undefined {
    return this.#items[this.#head];
  }

  shift(): T | undefined {
    if (this.#head >= this.#items.length) return undefined;
    const item = this.#items[this.#head];
    this.#items[this.#head] = undefined;
    this.#head += 1;
    if (this.#head > 1024 && this.#head * 2 > this.#items.length) {
      this.#items = this.#items.slice(this.#head);
      this.#head = 0;
    }
    return item;
  }

  drain(): T[] {
    const rest = this.#items.slice(this.#head) as T[];
    this.#items = [];
    this.#head = 0;
    return rest;
  }
}
