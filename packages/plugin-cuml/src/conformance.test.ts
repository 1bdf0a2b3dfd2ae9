/**
 * The built-in plugin passes the plugin conformance suite of `@skyward/testing`, as every plugin must.
 */
import { runPluginConformance } from "@skyward/testing";
import { cuml } from "./index.js";

runPluginConformance({ name: "cuml", create: () => cuml() });
