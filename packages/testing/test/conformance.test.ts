/**
 * The provider conformance suite run against the built-in `Local` provider on this machine
 * (`@skyward/provider-ssh` runs it against `SSH` on a test bed).
 */
import * as sky from "@skyward/core";
import { runProviderConformance } from "../src/index.js";

runProviderConformance({
  name: "Local",
  create: () => sky.Local(),
  provisionCount: 2,
  // A local worker exits by itself when its TTL runs out; there is no machine to end.
  supports: { selfDestruct: false },
  // Two workers on this machine, started by Local's launchWorker.
  pool: true,
});
