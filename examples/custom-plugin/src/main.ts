// A custom plugin: a TypeScript image transform (adds an environment variable to every node) and a
// Python `decorate` hook (times every task on the workers and wraps its result).
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";
import { extendImage, type PluginV1 } from "@skyward/core/contract";

/** The plugin's factory, as a plugin package would export it: a plain `PluginV1` object. */
function timing(options: { label: string; greeting: string }): PluginV1 {
  return {
    specificationVersion: "v1",
    name: "timing",
    transform: ({ image }) => extendImage(image, { env: { GREETING: options.greeting } }),
    worker: {
      module: "timing_plugin",
      path: fileURLToPath(new URL("./timing_plugin.py", import.meta.url)),
      config: { label: options.label },
    },
  };
}

type Timed<T> = { value: T; seconds: number; label: string };
const slowSum = sky.python<[n: number], Timed<number>>("tasks:slow_sum");
const greeting = sky.python<[], Timed<string>>("tasks:greeting");

await using pool = await sky.compute({
  nodes: 2,
  image: { includes: [fileURLToPath(new URL("./tasks.py", import.meta.url))] },
  plugins: [timing({ label: "timed", greeting: "hello from the plugin" })],
});

const summed = await pool.run(slowSum(200_000));
console.log(
  `sum of squares: ${summed.value} (the decorate hook measured ${(summed.seconds * 1000).toFixed(1)} ms)`,
);
assert.equal(summed.value, 2_666_646_666_700_000);
assert.equal(summed.label, "timed");

const greetings = await pool.broadcast(greeting());
console.log(`every node sees GREETING: ${greetings.map((entry) => entry.value).join(" | ")}`);
assert.deepEqual(
  greetings.map((entry) => entry.value),
  ["hello from the plugin", "hello from the plugin"],
);
