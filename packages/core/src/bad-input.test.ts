/**
 * Every kind of bad input is refused before anything starts, with a ConfigurationError naming the
 * field's path and what was expected. One row per bad input.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { resolveComputeInput } from "./compute.js";
import { parseConfigText, validateConfig } from "./config/config-file.js";
import { LaunchCommand } from "./contract/launch-command.js";
import { Plugin } from "./contract/plugin.js";
import type { Provider } from "./contract/provider.js";
import { ConfigurationError } from "./errors/errors.js";
import { metrics } from "./observe/metrics.js";
import { acceleratorFromName, accelerators } from "./spec/accelerators.js";
import type { ComputeInput } from "./spec/compute-input.js";
import { image, pipIndex } from "./spec/image.js";
import { logConfig, options, worker } from "./spec/options.js";
import { nodes, spec } from "./spec/spec.js";
import { volume } from "./spec/volume.js";

function fakeProvider(overrides: Record<string, unknown> = {}): Provider {
  const unused = async () => {
    throw new Error("not called in validation tests");
  };
  return {
    specificationVersion: "v1",
    name: "fake",
    capabilities: { spot: false },
    offers: unused,
    prepare: unused,
    provision: unused,
    getInstance: unused,
    terminate: unused,
    launchWorker: unused,
    teardown: unused,
    selfDestruct: () => "true",
    ...overrides,
  } as unknown as Provider;
}

let workDir = "";

/** Writes `text` as skyward.toml in a fresh project directory and resolves the pool named `name`. */
async function namedPool(text: string, name = "train"): Promise<unknown> {
  const cwd = await mkdtemp(join(workDir, "project-"));
  await writeFile(join(cwd, "skyward.toml"), text);
  return resolveComputeInput({ name, config: { cwd, home: join(cwd, "no-home") } });
}

/** Invalid input for `sky.compute`, bypassing the static types as a JavaScript caller could. */
const compute = (input: Record<string, unknown>) => resolveComputeInput(input as unknown as ComputeInput);

type Row = readonly [label: string, attempt: () => unknown, path: string, message: string | RegExp];

const rows: Row[] = [
  // --- node topology -------------------------------------------------------------------------
  [
    "nodes as a string",
    () => compute({ nodes: "4" }),
    "nodes",
    "expected a node count (4), a range [min, max]",
  ],
  ["nodes zero", () => compute({ nodes: 0 }), "nodes", "whole number >= 1"],
  ["nodes fractional", () => compute({ nodes: 2.5 }), "nodes", "whole number >= 1"],
  [
    "nodes range reversed",
    () => compute({ nodes: [8, 2] }),
    "nodes[1]",
    "must be >= the initial node count (8)",
  ],
  ["nodes range of three", () => compute({ nodes: [1, 2, 3] }), "nodes", "a range [min, max]"],
  [
    "nodes min above max",
    () => compute({ nodes: { desired: 4, min: 6, max: 5 } }),
    "nodes.min",
    "must be <= max (5)",
  ],
  [
    "nodes min above desired",
    () => compute({ nodes: { desired: 4, min: 5 } }),
    "nodes.min",
    "must be <= desired (4)",
  ],
  [
    "nodes max below desired",
    () => compute({ nodes: { desired: 4, max: 2 } }),
    "nodes.max",
    "must be >= desired (4)",
  ],
  [
    "nodes unknown key",
    () => compute({ nodes: { desired: 4, maximum: 8 } }),
    "nodes.maximum",
    "unknown field",
  ],
  [
    "sky.nodes desired zero",
    () => nodes({ desired: 0 }),
    "nodes.desired",
    "desired node count as a whole number >= 1",
  ],
  ["sky.nodes min not integer", () => nodes({ desired: 4, min: 1.5 }), "nodes.min", "minimum node count"],
  // --- hardware fields -----------------------------------------------------------------------
  ["vcpus negative", () => compute({ vcpus: -1 }), "vcpus", "expected vCPUs as a number > 0"],
  ["vcpus as a string", () => compute({ vcpus: "8" }), "vcpus", "expected vCPUs as a number > 0"],
  ["memoryGb zero", () => compute({ memoryGb: 0 }), "memoryGb", "memory in GB as a number > 0"],
  ["diskGb fractional", () => compute({ diskGb: 10.5 }), "diskGb", "whole number > 0"],
  [
    "architecture unknown",
    () => compute({ architecture: "x86" }),
    "architecture",
    'expected "x86_64" or "arm64"',
  ],
  [
    "allocation unknown",
    () => compute({ allocation: "spot-only" }),
    "allocation",
    'expected "spot-if-available", "spot", "on-demand" or "cheapest"',
  ],
  ["region empty", () => compute({ region: "" }), "region", "expected a region name"],
  ["maxHourlyCost negative", () => compute({ maxHourlyCost: -2 }), "maxHourlyCost", "USD per node per hour"],
  ["ttl negative", () => compute({ ttl: -1 }), "ttl", "expected seconds as a whole number >= 0"],
  ["ttl fractional", () => compute({ ttl: 1.5 }), "ttl", "expected seconds as a whole number >= 0"],
  ["unknown flat field", () => compute({ gpu: "A100" }), "gpu", "unknown field"],
  // --- accelerators --------------------------------------------------------------------------
  [
    "accelerator as a string",
    () => compute({ accelerator: "A100" }),
    "accelerator",
    "expected an accelerator from sky.accelerators",
  ],
  [
    "accelerator forged",
    () => compute({ accelerator: { ...accelerators.A100(), name: "FOO" } }),
    "accelerator.name",
    'unknown accelerator "FOO"',
  ],
  [
    "A100 memory variant",
    () => accelerators.A100({ memory: "20GB" as never }),
    "A100.memory",
    'expected one of "40GB", "80GB", received "20GB"',
  ],
  ["H100 count zero", () => accelerators.H100({ count: 0 }), "H100.count", /positive/],
  ["A100 unknown option", () => accelerators.A100({ gpus: 2 } as never), "A100.gpus", "unknown field"],
  ["Custom without a name", () => accelerators.Custom(""), "Custom.name", /name/],
  ["Custom memory malformed", () => accelerators.Custom("My-GPU", { memory: "lots" }), "Custom.memory", /GB/],
  [
    "accelerator name unknown",
    () => acceleratorFromName("H1OO", "accelerator"),
    "accelerator",
    'unknown accelerator "H1OO"; did you mean "H100"?',
  ],
  // --- volumes -------------------------------------------------------------------------------
  [
    "volume mount relative",
    () => compute({ volumes: [{ bucket: "data", mount: "data" }] }),
    "volumes[0].mount",
    "expected an absolute path",
  ],
  [
    "volume mount /tmp",
    () => compute({ volumes: [{ bucket: "data", mount: "/tmp" }] }),
    "volumes[0].mount",
    "must not be one of",
  ],
  [
    "volume mount /root/",
    () => compute({ volumes: [{ bucket: "data", mount: "/root/" }] }),
    "volumes[0].mount",
    "must not be one of",
  ],
  [
    "volume mount /opt/skyward",
    () => volume({ bucket: "data", mount: "/opt/skyward" }),
    "volume.mount",
    "must not be one of",
  ],
  [
    "volume mount inside /opt/skyward",
    () => volume({ bucket: "data", mount: "/opt/skyward/data" }),
    "volume.mount",
    "must not be inside /opt/skyward",
  ],
  [
    "volume mount /etc",
    () => volume({ bucket: "data", mount: "/etc" }),
    "volume.mount",
    "must not be one of",
  ],
  ["volume mount /", () => volume({ bucket: "data", mount: "/" }), "volume.mount", "must not be one of"],
  [
    "volume mount with ..",
    () => volume({ bucket: "data", mount: "/data/../root" }),
    "volume.mount",
    "must not contain '..'",
  ],
  [
    // /proc/mounts writes a space as \040: the node's check never saw the mount made (it failed the
    // node after it was paid for) and its unmount never found it.
    "volume mount with a space",
    () => volume({ bucket: "data", mount: "/mnt/my data" }),
    "volume.mount",
    "must not contain whitespace or a backslash",
  ],
  [
    "volume bucket malformed",
    () => compute({ volumes: [{ bucket: "Bad Bucket!", mount: "/data" }] }),
    "volumes[0].bucket",
    "expected a bucket name",
  ],
  [
    "volume duplicate mount",
    () =>
      compute({
        volumes: [
          { bucket: "a1", mount: "/data" },
          { bucket: "b1", mount: "/data/" },
        ],
      }),
    "volumes[1].mount",
    "duplicate mount point /data",
  ],
  [
    // Mounted in order, /data hid /data/cache (silently: the task read bucket a1's cache folder).
    "volume mount inside another volume's",
    () =>
      compute({
        volumes: [
          { bucket: "b1", mount: "/data/cache" },
          { bucket: "a1", mount: "/data" },
        ],
      }),
    "volumes[1].mount",
    "/data holds volumes[0]'s mount point /data/cache: one would hide the other",
  ],
  [
    "volumes not an array",
    () => compute({ volumes: { bucket: "a1", mount: "/data" } }),
    "volumes",
    "expected an array of volumes",
  ],
  [
    "volume unknown key",
    () => compute({ volumes: [{ bucket: "a1", mount: "/data", readonly: true }] }),
    "volumes[0].readonly",
    "unknown field",
  ],
  [
    "volume storage endpoint",
    () => volume({ bucket: "a1", mount: "/data", storage: { endpoint: "not a url" } }),
    "volume.storage.endpoint",
    "expected an http(s) URL",
  ],
  // --- images --------------------------------------------------------------------------------
  ["image pip as a string", () => compute({ image: { pip: "numpy" } }), "image.pip", /array|list/],
  ["image env key", () => compute({ image: { env: { "1BAD": "x" } } }), 'image.env["1BAD"]', /variable name/],
  ["image unknown field", () => compute({ image: { pipp: ["numpy"] } }), "image.pipp", "unknown field"],
  ["image bootstrapTimeout zero", () => image({ bootstrapTimeout: 0 }), "image.bootstrapTimeout", /positive/],
  ["image python version", () => image({ python: "three" }), "image.python", /"auto"|version/],
  ["image python too old", () => image({ python: "2.7" }), "image.python", /3\.10/],
  ["image pip option smuggled", () => image({ pip: ["--index-url=http://x"] }), "image.pip[0]", /./],
  ["image apt name", () => image({ apt: ["bad name!"] }), "image.apt[0]", /package name/],
  [
    "image shellVars key",
    () => image({ shellVars: { "A-B": "$(hostname)" } }),
    "image.shellVars.A-B",
    /environment variable name|variable/,
  ],
  [
    "image metrics entry",
    () => compute({ image: { metrics: ["cpu"] } }),
    "image.metrics[0]",
    "expected a metric collector made by sky.metrics",
  ],
  ["pipIndex url", () => pipIndex({ url: "not a url", packages: ["torch"] }), "pipIndex.url", /URL/],
  [
    "pipIndex packages empty",
    () => pipIndex({ url: "https://download.pytorch.org/whl/cpu", packages: [] }),
    "pipIndex.packages",
    /./,
  ],
  [
    "metric interval",
    () => metrics.CPU({ interval: -1 }),
    "metrics.CPU.interval",
    "expected a positive number of seconds",
  ],
  ["metric custom command", () => metrics.Custom("queue", ""), "metrics.Custom.command", /command/],
  // --- plugins and providers -----------------------------------------------------------------
  [
    "plugin as a string",
    () => compute({ plugins: ["torch"] }),
    "plugins[0]",
    "expected a plugin (e.g. torch",
  ],
  [
    "plugin twice",
    () => compute({ plugins: [Plugin.create("torch"), Plugin.create("torch")] }),
    "plugins[1]",
    'duplicate plugin "torch"',
  ],
  ["plugin name", () => Plugin.create("Not Valid"), "name", /./],
  [
    "provider empty object",
    () => compute({ provider: {} }),
    "provider",
    'expected a provider (e.g. sky.Local(), AWS(...)) with specificationVersion "v1"',
  ],
  [
    "provider of another version",
    () => compute({ provider: fakeProvider({ specificationVersion: "v2" }) }),
    "provider",
    'implements specification version "v2", but this version of @skyward/core supports "v1"',
  ],
  [
    "provider missing a method",
    () => compute({ provider: fakeProvider({ terminate: undefined }) }),
    "provider",
    "missing method terminate",
  ],
  // --- the three forms of sky.compute --------------------------------------------------------
  [
    "flat fields mixed with specs",
    () => compute({ nodes: 2, specs: [{}] }),
    "specs",
    "cannot be combined with flat spec fields (nodes)",
  ],
  [
    "name with specs",
    () => compute({ name: "train", specs: [{}] }),
    "name",
    "a named pool cannot be combined with specs",
  ],
  [
    "name with flat fields",
    () => compute({ name: "train", ttl: 5 }),
    "name",
    "a named pool cannot be combined with spec fields (ttl)",
  ],
  ["name empty", () => compute({ name: "" }), "name", "expected the name of a [pools.*] entry"],
  ["specs empty", () => compute({ specs: [] }), "specs", "expected at least one spec"],
  ["specs not an array", () => compute({ specs: "aws" }), "specs", "expected an array of specs"],
  ["spec inside specs", () => compute({ specs: [{}, { nodes: 0 }] }), "specs[1].nodes", "whole number >= 1"],
  ["config without name", () => compute({ config: { cwd: "." } }), "config", "only allowed with name"],
  [
    "input not an object",
    () => compute(null as unknown as Record<string, unknown>),
    "",
    "expected an object",
  ],
  [
    "spec() with unknown field",
    () => spec({ node: 3 } as never, "specs[0]"),
    "specs[0].node",
    "unknown field",
  ],
  // --- options -------------------------------------------------------------------------------
  [
    "selection unknown",
    () => compute({ options: { selection: "fastest" } }),
    "options.selection",
    'expected "cheapest" or "first"',
  ],
  [
    "worker concurrency zero",
    () => compute({ options: { worker: { concurrency: 0 } } }),
    "options.worker.concurrency",
    "expected an integer >= 1",
  ],
  [
    "worker executor unknown",
    () => compute({ options: { worker: { executor: "fork" } } }),
    "options.worker.executor",
    'expected "auto", "thread" or "process"',
  ],
  ["worker buffer negative", () => worker({ buffer: -1 }), "worker.buffer", "expected an integer >= 0"],
  ["worker unknown field", () => worker({ threads: 2 } as never), "worker.threads", "unknown field"],
  [
    "logging level unknown",
    () => compute({ options: { logging: { level: "VERBOSE" } } }),
    "options.logging.level",
    '"TRACE", "DEBUG", "INFO", "WARNING" or "ERROR"',
  ],
  [
    "logging rotation",
    () => logConfig({ rotation: "big" }),
    "logging.rotation",
    'expected a size like "50 MB"',
  ],
  [
    "logging rotation of zero",
    () => options({ logging: { rotation: "0 MB" } }),
    "options.logging.rotation",
    'expected a size like "50 MB"',
  ],
  [
    "logging as a string",
    () => options({ logging: "yes" as never }),
    "options.logging",
    "expected true, false or a log configuration",
  ],
  [
    "console mode unknown",
    () => options({ console: "fancy" as never }),
    "options.console",
    'expected true, false, "rich", "minimal", "log" or "silent"',
  ],
  [
    "defaultComputeTimeout zero",
    () => options({ defaultComputeTimeout: 0 }),
    "options.defaultComputeTimeout",
    "expected a number of seconds > 0",
  ],
  [
    "maxProvisionAttempts zero",
    () => options({ maxProvisionAttempts: 0 }),
    "options.maxProvisionAttempts",
    "expected an integer >= 1",
  ],
  [
    "retryOnInterruption negative",
    () => options({ retryOnInterruption: -1 }),
    "options.retryOnInterruption",
    "expected an integer >= 0",
  ],
  ["options unknown field", () => options({ retries: 3 } as never), "options.retries", "unknown field"],
  // --- launch commands -----------------------------------------------------------------------
  [
    "launcher with a newline",
    () => LaunchCommand.create({ launcher: "accelerate launch\nrm -rf /" }).render(),
    "launcher",
    /./,
  ],
  [
    "launch argument with NUL",
    () => LaunchCommand.create({ entrypoint: "w.py", args: ["a\u0000b"] }).render(),
    "args[0]",
    /./,
  ],
  // --- skyward.toml --------------------------------------------------------------------------
  [
    "TOML syntax error",
    () => parseConfigText("[pools.train\nnodes = 4\n"),
    "",
    /TOML syntax error at skyward\.toml:1:/,
  ],
  [
    "TOML unknown top-level table",
    () => validateConfig(parseConfigText("[pool.train]\nnodes = 4\n")),
    "pool",
    "unknown field",
  ],
  [
    "TOML provider without type",
    () => validateConfig(parseConfigText("[providers.x]\nregion = 'eu'\n")),
    "providers.x.type",
    "expected a provider type",
  ],
  [
    "TOML provider type unknown",
    () => validateConfig(parseConfigText('[providers.x]\ntype = "nimbus"\n')),
    "providers.x.type",
    'unknown provider type "nimbus"',
  ],
  [
    "TOML pool unknown key",
    () => validateConfig(parseConfigText('[pools.train]\nacelerator = "A100"\n')),
    "pools.train.acelerator",
    "unknown field",
  ],
  [
    "TOML accelerator unknown",
    () => validateConfig(parseConfigText('[pools.train]\naccelerator = "A1000"\n')),
    "pools.train.accelerator",
    'unknown accelerator "A1000"',
  ],
  [
    "TOML accelerator not a string",
    () => validateConfig(parseConfigText("[pools.train]\naccelerator = 100\n")),
    "pools.train.accelerator",
    "expected an accelerator name",
  ],
  [
    "TOML pool provider undefined",
    () => validateConfig(parseConfigText('[pools.train]\nprovider = "nope"\n')),
    "pools.train.provider",
    'no provider named "nope"',
  ],
  [
    "TOML key in both spellings",
    () => validateConfig(parseConfigText("[pools.train]\nmemory_gb = 8\nmemoryGb = 16\n")),
    "pools.train.memoryGb",
    'given twice (also as "memory_gb")',
  ],
  [
    "TOML nodes as a string",
    () => namedPool('[pools.train]\nnodes = "four"\n'),
    "pools.train.nodes",
    "expected a node count",
  ],
  [
    "TOML nodes min above max",
    () => namedPool("[pools.train]\nnodes = { desired = 4, min = 6, max = 5 }\n"),
    "pools.train.nodes.min",
    "must be <= max (5)",
  ],
  [
    "TOML image pip as a string",
    () => namedPool('[pools.train]\n[pools.train.image]\npip = "numpy"\n'),
    "pools.train.image.pip",
    /array|list/,
  ],
  [
    "TOML volume mount relative",
    () => namedPool('[pools.train]\n[[pools.train.volumes]]\nbucket = "data"\nmount = "data"\n'),
    "pools.train.volumes[0].mount",
    "expected an absolute path",
  ],
  ["TOML pool missing", () => namedPool("[pools.other]\nnodes = 1\n"), "name", 'no pool named "train"'],
  [
    "TOML options worker",
    () => namedPool("[pools.train]\n[pools.train.options.worker]\nconcurrency = 0\n"),
    "options.worker.concurrency",
    "expected an integer >= 1",
  ],
  [
    "TOML provider package missing",
    () =>
      namedPool(
        '[providers.cloud]\ntype = "acme"\npackage = "skyward-provider-not-installed"\n[pools.train]\nprovider = "cloud"\n',
      ),
    "providers.cloud.package",
    'provider package "skyward-provider-not-installed" could not be loaded',
  ],
  // --- local paths, checked before any provider is called ------------------------------------
  [
    "includes entry missing (relative)",
    () => compute({ image: { includes: ["./no-such-package"] } }),
    "image.includes[0]",
    `relative paths resolve against the working directory ${process.cwd()}`,
  ],
  [
    "includes entry missing, second of two, in specs",
    () => compute({ specs: [{ image: { includes: [workDir, join(workDir, "missing.py")] } }] }),
    "specs[0].image.includes[1]",
    /^expected a directory or a \.py file that exists, but \/\S+\/missing\.py does not exist$/,
  ],
  [
    "includes entry neither a directory nor a .py file",
    () => compute({ image: { includes: [join(workDir, "notes.txt")] } }),
    "image.includes[0]",
    "is a file that is not .py",
  ],
  [
    "includes landing on the same name",
    () => compute({ image: { includes: [join(workDir, "task.py"), join(workDir, ".", "task.py")] } }),
    "image.includes[1]",
    "already taken",
  ],
  [
    "plugin worker module missing",
    () =>
      compute({
        plugins: [
          Plugin.create("lost").withWorker({ module: "lost_worker", path: join(workDir, "lost_worker") }),
        ],
      }),
    "plugins[0].worker.path",
    "expected a directory or a .py file that exists",
  ],
  [
    "Local interpreter path missing",
    () => compute({ image: { python: join(workDir, "bin", "python3") } }),
    "image.python",
    "expected a Python interpreter that exists on this machine",
  ],
  [
    "TOML includes entry missing",
    () => namedPool('[pools.train]\n[pools.train.image]\nincludes = ["./src/nope"]\n'),
    "pools.train.image.includes[0]",
    "does not exist",
  ],
];

beforeAll(async () => {
  workDir = await mkdtemp(join(tmpdir(), "skyward-bad-input-"));
  await writeFile(join(workDir, "notes.txt"), "not Python\n");
  await writeFile(join(workDir, "task.py"), "def run():\n    return 1\n");
});

afterAll(async () => {
  await rm(workDir, { recursive: true, force: true });
});

describe("bad input is refused with the field's path and what was expected", () => {
  it("has at least 60 cases, each with a distinct label", () => {
    expect(rows.length).toBeGreaterThanOrEqual(60);
    expect(new Set(rows.map(([label]) => label)).size).toBe(rows.length);
  });

  it.each(rows)("%s", async (_label, attempt, path, message) => {
    let thrown: unknown;
    try {
      await attempt();
    } catch (error) {
      thrown = error;
    }
    expect(thrown, "expected a ConfigurationError, but nothing was thrown").toBeDefined();
    if (!ConfigurationError.isInstance(thrown)) throw thrown;
    const issue = thrown.issues.find((candidate) => candidate.path === path);
    expect(issue, `no issue at "${path}"; issues: ${JSON.stringify(thrown.issues)}`).toBeDefined();
    if (typeof message === "string") expect(issue?.message).toContain(message);
    else expect(issue?.message).toMatch(message);
    if (path) expect(thrown.message).toContain(path);
  });
});
