/**
 * The provider conformance suite run against the built-in `Local` provider on this machine
 * (`@skyward/provider-ssh` runs it against `SSH` on a test bed), and the fault matrix, whose cells
 * are all about a cloud API `Local` does not have: each is declared not applicable, with the reason.
 */
import * as sky from "@skyward/core";
import { apiCellsNotApplicable, runFaultMatrix, runProviderConformance } from "../src/index.js";

runProviderConformance({
  name: "Local",
  create: () => sky.Local(),
  provisionCount: 2,
  // A local worker exits by itself when its TTL runs out; there is no machine to end.
  supports: { selfDestruct: false },
  // Two workers on this machine, started by Local's launchWorker.
  pool: true,
});

/** Local makes no instance through any API: its "instances" are worker processes on this machine. */
const noApi = "Local calls no cloud API: its instances are processes on this machine";
runFaultMatrix({
  name: "local",
  create: () => sky.Local(),
  // Nothing Local makes bills.
  faults: () => ({ live: () => [], created: () => [] }),
  notApplicable: {
    ...apiCellsNotApplicable(noApi),
    "instance-reclaimed":
      "a local process is never taken back by a cloud; a worker that dies is the pool's node-lost case",
    "client-killed-after-create":
      "Local's workers are children of the client and exit with it (or when their TTL runs out); nothing bills",
  },
});
