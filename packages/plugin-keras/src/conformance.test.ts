/**
 * The built-in plugin passes the plugin conformance suite of `@skyward/testing`, as every plugin must.
 * Its stand-in pool lists `jax()` before it: with the JAX backend on two nodes keras needs it there.
 */
import { options, spec } from "@skyward/core";
import { resolvePoolSpec } from "@skyward/core/contract";
import { jax } from "@skyward/plugin-jax";
import { conformanceCluster, runPluginConformance } from "@skyward/testing";
import { keras } from "./index.js";

const plugins = [jax({ cuda: "cpu" }), keras({ backend: "jax" })];
runPluginConformance({
  name: "keras",
  create: () => keras({ backend: "jax" }),
  cluster: conformanceCluster({ spec: resolvePoolSpec(spec({ nodes: 2, plugins }), options()) }),
});
