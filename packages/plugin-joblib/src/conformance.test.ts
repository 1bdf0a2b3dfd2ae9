/**
 * The built-in plugin passes the plugin conformance suite of `@skyward/testing`, as every plugin must.
 */
import { runPluginConformance } from "@skyward/testing";
import { joblib, sklearn } from "./index.js";

runPluginConformance({ name: "joblib", create: () => joblib() });
runPluginConformance({ name: "sklearn", create: () => sklearn() });
