// Type-level tests of the client's collections: what each operation answers, and what must not
// compile. Nothing here runs; vitest's "types" project and core's `tsc --noEmit` both check it.
import { describe, expectTypeOf, test } from "vitest";
import type { Pool } from "../pool/pool.js";

declare const pool: Pool;

describe("pool collections", () => {
  test("a dict answers its value type, undefined for a missing key", () => {
    const config = pool.dict<number>("config");
    expectTypeOf(config.get("lr")).toEqualTypeOf<Promise<number | undefined>>();
    expectTypeOf(config.pop("lr")).toEqualTypeOf<Promise<number | undefined>>();
    expectTypeOf(config.entries()).toEqualTypeOf<Promise<[string, number][]>>();
    // @ts-expect-error the values are numbers
    void config.set("lr", "fast");
    // @ts-expect-error string keys unless a key type is given
    void config.get(1);
    const byRank = pool.dict<string | null, number>("names");
    expectTypeOf(byRank.get(0)).toEqualTypeOf<Promise<string | null | undefined>>();
  });

  test("queues, sets, counters, barriers and locks", () => {
    const work = pool.queue<{ url: string }>("work");
    expectTypeOf(work.get({ timeout: 5, signal: AbortSignal.timeout(1000) })).toEqualTypeOf<
      Promise<{ url: string } | undefined>
    >();
    // @ts-expect-error items are { url }
    void work.put("a");
    expectTypeOf(pool.set<number>("seen").add(1)).toEqualTypeOf<Promise<boolean>>();
    expectTypeOf(pool.counter("n").increment()).toEqualTypeOf<Promise<number>>();
    expectTypeOf(pool.barrier("epoch", 4).wait()).toEqualTypeOf<Promise<number>>();
    expectTypeOf(pool.lock("ckpt", 30).acquire({ timeout: 1 })).toEqualTypeOf<Promise<boolean>>();
    expectTypeOf(pool.lock("ckpt").hold(async () => 42)).toEqualTypeOf<Promise<number>>();
  });
});
