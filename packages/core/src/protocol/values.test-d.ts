/** The types of `NDArray`: `NDArray.of` takes its dtype from the typed array. */
import { expectTypeOf, test } from "vitest";
import { NDArray } from "./values.js";

test("NDArray.of takes the dtype from the typed array", () => {
  expectTypeOf(NDArray.of(new Float32Array(2))).toEqualTypeOf<NDArray<"float32">>();
  expectTypeOf(NDArray.of(new Float64Array(2))).toEqualTypeOf<NDArray<"float64">>();
  expectTypeOf(NDArray.of(new BigInt64Array(2))).toEqualTypeOf<NDArray<"int64">>();
  expectTypeOf(NDArray.of(new Int16Array(2)).data).toEqualTypeOf<Int16Array>();
  expectTypeOf(new NDArray(new Uint16Array(1), [1], "float16").dtype).toEqualTypeOf<"float16">();
});
