// Type-level tests of remote references: what `withKeep()` gives, and where a reference may go.
import { expectTypeOf, test } from "vitest";
import type { PyObject, RemoteRef } from "../protocol/values.js";
import type { Pool } from "./pool.js";
import { type PendingTask, python } from "./python-function.js";

declare const pool: Pool;

const train = python<[epochs: number], PyObject>("tasks:train");
const score = python<[model: PyObject, data: number[]], number>("tasks:score");
const stream = python.stream<[n: number], number>("tasks:count");

test("withKeep() gives a pending task of a reference to the result", async () => {
  expectTypeOf(train(3).withKeep()).toEqualTypeOf<PendingTask<RemoteRef<PyObject>>>();
  const model = await pool.run(train(3).withKeep());
  expectTypeOf(model).toEqualTypeOf<RemoteRef<PyObject>>();
  expectTypeOf(model.fetch()).toEqualTypeOf<Promise<PyObject>>();
  expectTypeOf(await pool.broadcast(train(3).withKeep())).toMatchTypeOf<RemoteRef<PyObject>[]>();
});

test("a reference stands for an argument of its type, and of no other", async () => {
  const model = await pool.run(train(3).withKeep());
  expectTypeOf(score(model, [1, 2])).toEqualTypeOf<PendingTask<number>>();
  const count = await pool.run(score(model, [1]).withKeep());
  // @ts-expect-error a reference to a number is not a PyObject
  score(count, [1]);
  // @ts-expect-error nor a number[]
  score(model, count);
  // @ts-expect-error a generator's items cannot be kept
  stream(3).withKeep();
});
