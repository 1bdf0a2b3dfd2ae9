/**
 * The plugin conformance suite run against plugins written here: a plain v1 object with every hook and
 * a Python worker module, and one built with the `Plugin` builder; then plugins that each break the
 * contract in one way (`test/fixtures/plugin-breaks.suite.ts`), each failing exactly its check.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Plugin, type PluginV1 } from "@skyward/core/contract";
import { describe, expect, it } from "vitest";
import { suiteFailures } from "../test/fixtures/suite-failures.js";
import { runPluginConformance } from "./plugin-conformance.js";

const moduleDirectory = mkdtempSync(join(tmpdir(), "skyward-plugin-conformance-"));
const modulePath = join(moduleDirectory, "skyward_conformance_probe.py");
writeFileSync(
  modulePath,
  [
    "import contextlib",
    "",
    "def decorate(fn, config):",
    "    return fn",
    "",
    "@contextlib.contextmanager",
    "def around_app(info, config):",
    "    yield",
    "",
  ].join("\n"),
);

const complete = (): PluginV1 => ({
  specificationVersion: "v1",
  name: "probe",
  transform: ({ image }) => ({ ...image, env: { ...image.env, PROBE: "1" } }),
  bootstrap: () => ['mkdir -p "$SKYWARD_ROOT/probe"', "test -d /tmp || exit 1"],
  launcher: ({ command }) => command.with({ launcher: `nice -n 5 ${command.launcher}` }),
  aroundClient: () => ({ [Symbol.dispose]: () => undefined }),
  workersPerNode: () => 2,
  worker: { module: "skyward_conformance_probe", path: modulePath, config: { level: 1 } },
});

runPluginConformance({ name: "a plain v1 object with every hook", create: complete });
runPluginConformance({
  name: "a builder plugin",
  create: () =>
    Plugin.create("built")
      .withBootstrap(() => ["true"])
      .withLauncher(({ command }) => command),
});

const SHAPE = "is a v1 plugin by shape, with a usable worker side";
const TRANSFORM = "transforms the image into a valid one, leaving its input as it was";
const BOOTSTRAP = "has bootstrap ops that are shell bash accepts";
const LAUNCHER = "keeps starting the worker from its launcher";
const AROUND = "enters and exits around the client";
const WORKERS = "asks for a positive whole number of workers per node";
const WORKER = "ships a worker module that the worker runtime imports, its hooks callable";

describe("runPluginConformance", () => {
  it("passes a well-behaved plugin and fails each broken one exactly where it breaks the contract", async () => {
    const { failures } = await suiteFailures(
      "test/fixtures/plugin-breaks.vitest.config.ts",
      "plugin conformance: ",
      120_000,
    );
    expect(failures).toEqual({
      none: [],
      "mutates-image": [TRANSFORM],
      "invalid-image": [TRANSFORM],
      "bad-shell": [BOOTSTRAP],
      "drops-worker": [LAUNCHER],
      "zero-workers": [WORKERS],
      "around-fails": [AROUND],
      "worker-import-fails": [WORKER],
      "worker-missing": [WORKER],
      "not-v1": [SHAPE, WORKER],
      "fine-worker": [],
    });
  }, 180_000);
});
