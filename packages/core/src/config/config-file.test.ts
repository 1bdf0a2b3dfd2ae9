import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { installProviderPackage, RECORDING_FACTORY } from "../../test/fixtures/provider-package.js";
import { isProvider } from "../contract/provider.js";
import { ConfigurationError, type ConfigurationIssue } from "../errors/errors.js";
import { parseInput } from "../errors/validation.js";
import { accelerators } from "../spec/accelerators.js";
import { specSchema } from "../spec/spec.js";
import {
  createProviderFromEntry,
  installHint,
  loadConfig,
  PROVIDER_PACKAGES,
  type ProviderEntry,
  parseConfigText,
  resolveNamedPool,
  validateConfig,
} from "./config-file.js";

let root: string;
let home: string;
let cwd: string;

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), "skyward-config-"));
  home = join(root, "home");
  cwd = join(root, "project");
  await mkdir(join(home, ".skyward"), { recursive: true });
  await mkdir(cwd, { recursive: true });
});

afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

async function writeGlobal(text: string): Promise<string> {
  const file = join(home, ".skyward", "defaults.toml");
  await writeFile(file, text);
  return file;
}

async function writeProject(text: string): Promise<string> {
  const file = join(cwd, "skyward.toml");
  await writeFile(file, text);
  return file;
}

/** Installs an ES module package `name` with `source` as its index.js into the project's node_modules. */
function installPackage(name: string, source: string, exportsField?: unknown): Promise<void> {
  return installProviderPackage(cwd, name, source, exportsField);
}

/** The settings the fixture provider recorded (it keeps them on itself). */
function settingsOf(provider: unknown): unknown {
  return (provider as { settings?: unknown } | undefined)?.settings;
}

async function issuesOf(promise: Promise<unknown>): Promise<readonly ConfigurationIssue[]> {
  try {
    await promise;
  } catch (error) {
    expect(ConfigurationError.isInstance(error)).toBe(true);
    return (error as ConfigurationError).issues;
  }
  throw new Error("expected a ConfigurationError, but nothing was thrown");
}

function entry(fields: Partial<ProviderEntry> & { package: string }): ProviderEntry {
  return { name: "mine", type: "fixture", settings: {}, ...fields };
}

describe("loadConfig: which files", () => {
  it("gives an empty configuration when neither file exists", async () => {
    const config = await loadConfig({ cwd, home });
    expect(config).toEqual({ providers: {}, pools: {}, files: [] });
  });

  it("reads only the project file when there is no global one", async () => {
    const file = await writeProject("[pools.train]\nnodes = 2\n");
    const config = await loadConfig({ cwd, home });
    expect(config.files).toEqual([file]);
    expect(config.pools.train?.spec).toEqual({ nodes: 2 });
  });

  it("reads only the global file when there is no project one", async () => {
    const file = await writeGlobal("[pools.train]\nnodes = 3\n");
    const config = await loadConfig({ cwd, home });
    expect(config.files).toEqual([file]);
    expect(config.pools.train?.spec).toEqual({ nodes: 3 });
  });

  it("lists both files, global first", async () => {
    const globalFile = await writeGlobal("[pools.a]\nnodes = 1\n");
    const projectFile = await writeProject("[pools.b]\nnodes = 2\n");
    const config = await loadConfig({ cwd, home });
    expect(config.files).toEqual([globalFile, projectFile]);
    expect(Object.keys(config.pools).sort()).toEqual(["a", "b"]);
  });

  it("is frozen", async () => {
    await writeProject('[providers.x]\ntype = "aws"\n[pools.p]\nnodes = 1\n');
    const config = await loadConfig({ cwd, home });
    expect(Object.isFrozen(config)).toBe(true);
    expect(Object.isFrozen(config.pools)).toBe(true);
    expect(Object.isFrozen(config.providers)).toBe(true);
    expect(Object.isFrozen(config.pools.p)).toBe(true);
    expect(Object.isFrozen(config.providers.x)).toBe(true);
    expect(Object.isFrozen(config.providers.x?.settings)).toBe(true);
  });
});

describe("loadConfig: project over global", () => {
  it("deep-merges a pool: the project's nodes, the global image", async () => {
    await writeGlobal(`
[pools.train]
nodes = 2
accelerator = "A100"

[pools.train.image]
pip = ["torch"]
python = "3.12"
`);
    await writeProject(`
[pools.train]
nodes = 4
`);
    const config = await loadConfig({ cwd, home });
    expect(config.pools.train?.spec).toEqual({
      nodes: 4,
      accelerator: accelerators.A100(),
      image: { pip: ["torch"], python: "3.12" },
    });
  });

  it("merges inside sub-tables and replaces arrays", async () => {
    await writeGlobal(`
[pools.train.image]
pip = ["torch", "numpy"]
env = { A = "global", B = "global" }
`);
    await writeProject(`
[pools.train.image]
pip = ["jax"]
env = { B = "project" }
`);
    const config = await loadConfig({ cwd, home });
    expect(config.pools.train?.spec.image).toEqual({ pip: ["jax"], env: { A: "global", B: "project" } });
  });

  it("merges provider settings, the project winning", async () => {
    await writeGlobal('[providers.cloud]\ntype = "aws"\nregion = "us-east-1"\ninstance_profile = "x"\n');
    await writeProject('[providers.cloud]\nregion = "eu-west-1"\n');
    const config = await loadConfig({ cwd, home });
    expect(config.providers.cloud).toEqual({
      name: "cloud",
      type: "aws",
      package: "@skyward/provider-aws",
      settings: { region: "eu-west-1", instanceProfile: "x" },
    });
  });

  it("lets a project pool use a provider defined globally", async () => {
    await writeGlobal('[providers.cloud]\ntype = "runpod"\n');
    await writeProject('[pools.p]\nprovider = "cloud"\nnodes = 1\n');
    const config = await loadConfig({ cwd, home });
    expect(config.pools.p?.provider).toBe("cloud");
  });
});

describe("loadConfig: pool tables", () => {
  it("reads the reference's example file", async () => {
    await writeProject(`
[providers.my-aws]
type = "aws"
region = "us-west-2"

[providers.my-vastai]
type = "vastai"
min_reliability = 0.95
geolocation = "US"

[pools.training]
provider = "my-aws"
nodes = 4
accelerator = "A100"

[pools.training.image]
python = "3.13"
pip = ["torch", "transformers"]
apt = ["ffmpeg"]

[[pools.training.volumes]]
bucket = "my-bucket"
mount = "/data"
`);
    const config = await loadConfig({ cwd, home });
    expect(config.providers["my-vastai"]).toEqual({
      name: "my-vastai",
      type: "vastai",
      package: "@skyward/provider-vastai",
      settings: { minReliability: 0.95, geolocation: "US" },
    });
    expect(config.pools.training).toEqual({
      name: "training",
      provider: "my-aws",
      spec: {
        nodes: 4,
        accelerator: accelerators.A100(),
        image: { python: "3.13", pip: ["torch", "transformers"], apt: ["ffmpeg"] },
        volumes: [{ bucket: "my-bucket", mount: "/data" }],
      },
      options: {},
    });
  });

  it("converts snake_case keys to camelCase at every level", async () => {
    await writeProject(`
[pools.x]
memory_gb = 64
disk_gb = 200
max_hourly_cost = 2.5
vcpus = 8
ttl = 0
allocation = "on-demand"
architecture = "arm64"
region = "us-east-1"

[pools.x.image]
shell_vars = { GIT_SHA = "git rev-parse HEAD" }
bootstrap_timeout = 900
env = { MY_VAR = "kept_as_is" }

[[pools.x.volumes]]
bucket = "data"
mount = "/data"
read_only = false

[pools.x.options]
provision_timeout = 600
retry_on_interruption = 5
budget = { max = 40, warn_at = 30 }
liveness_timeout = 10

[pools.x.options.worker]
concurrency = 4
reuse_processes = false

[pools.x.options.health_checker]
check = "health:gpu_ok"
interval = 10

[pools.x.options.logging]
level = "DEBUG"
`);
    const config = await loadConfig({ cwd, home });
    const pool = config.pools.x;
    expect(pool?.spec).toEqual({
      memoryGb: 64,
      diskGb: 200,
      maxHourlyCost: 2.5,
      vcpus: 8,
      ttl: 0,
      allocation: "on-demand",
      architecture: "arm64",
      region: "us-east-1",
      image: {
        shellVars: { GIT_SHA: "git rev-parse HEAD" },
        bootstrapTimeout: 900,
        env: { MY_VAR: "kept_as_is" },
      },
      volumes: [{ bucket: "data", mount: "/data", readOnly: false }],
    });
    expect(pool?.options).toEqual({
      provisionTimeout: 600,
      retryOnInterruption: 5,
      budget: { max: 40, warnAt: 30 },
      livenessTimeout: 10,
      healthChecker: { check: "health:gpu_ok", interval: 10 },
      worker: { concurrency: 4, reuseProcesses: false },
      logging: { level: "DEBUG" },
    });
  });

  it("accepts camelCase keys as written", async () => {
    await writeProject(`
[pools.x]
memoryGb = 32
maxHourlyCost = 1.0

[pools.x.image]
shellVars = { A = "echo a" }

[[pools.x.volumes]]
bucket = "data"
mount = "/data"
readOnly = false

[pools.x.options]
sshTimeout = 30
`);
    const pool = (await loadConfig({ cwd, home })).pools.x;
    expect(pool?.spec).toEqual({
      memoryGb: 32,
      maxHourlyCost: 1,
      image: { shellVars: { A: "echo a" } },
      volumes: [{ bucket: "data", mount: "/data", readOnly: false }],
    });
    expect(pool?.options).toEqual({ sshTimeout: 30 });
  });

  it("converts the keys of a volume's storage table", async () => {
    await writeProject(`
[[pools.x.volumes]]
bucket = "data"
mount = "/data"

[pools.x.volumes.storage]
endpoint = "https://r2.example.com"
access_key_env = "R2_KEY"
secret_key_env = "R2_SECRET"
path_style = true
`);
    const pool = (await loadConfig({ cwd, home })).pools.x;
    const storage = {
      endpoint: "https://r2.example.com",
      accessKeyEnv: "R2_KEY",
      secretKeyEnv: "R2_SECRET",
      pathStyle: true,
    };
    expect(pool?.spec.volumes).toEqual([{ bucket: "data", mount: "/data", storage }]);
    expect(parseInput(specSchema, pool?.spec).volumes[0]?.storage).toEqual(storage);
  });

  it("reads every node form", async () => {
    await writeProject(`
[pools.fixed]
nodes = 4
[pools.range]
nodes = [2, 8]
[pools.partial]
nodes = { desired = 8, min = 4 }
`);
    const pools = (await loadConfig({ cwd, home })).pools;
    const resolved = (name: string) => parseInput(specSchema, pools[name]?.spec).nodes;
    expect(resolved("fixed")).toEqual({ desired: 4, min: 4, max: 4 });
    expect(resolved("range")).toEqual({ desired: 2, min: 2, max: 8 });
    expect(resolved("partial")).toEqual({ desired: 8, min: 4, max: 8 });
  });

  it("replaces a node table from the global file instead of merging into it", async () => {
    await writeGlobal("[pools.p]\nnodes = { desired = 8, min = 4 }\n");
    await writeProject("[pools.p]\nnodes = { desired = 2 }\n");
    const pool = (await loadConfig({ cwd, home })).pools.p;
    expect(pool?.spec.nodes).toEqual({ desired: 2 });
    expect(parseInput(specSchema, pool?.spec).nodes).toEqual({ desired: 2, min: 2, max: 2 });
  });

  it.each([
    ["A100", accelerators.A100()],
    ["A100-40GB", accelerators.A100({ memory: "40GB" })],
    ["H100:8", accelerators.H100({ count: 8 })],
    ["a100 80GB", accelerators.A100({ memory: "80GB" })],
    ["NVIDIA GeForce RTX 4090", accelerators.RTX_4090()],
  ])("resolves the accelerator string %s", async (text, expected) => {
    await writeProject(`[pools.gpu]\naccelerator = "${text}"\n`);
    const pool = (await loadConfig({ cwd, home })).pools.gpu;
    expect(pool?.spec.accelerator).toEqual(expected);
  });

  it("leaves out the provider of a pool that names none (the built-in Local)", async () => {
    await writeProject("[pools.local]\nnodes = 2\n");
    expect((await loadConfig({ cwd, home })).pools.local?.provider).toBeUndefined();
  });

  it("reads a pool's secrets table: names kept as written, each read from the environment or a file", async () => {
    await writeProject(
      '[pools.train.secrets]\nHF_TOKEN = { env = "HF_TOKEN" }\nDB_PASSWORD = { file = "~/.db-password" }\n',
    );
    const pool = (await loadConfig({ cwd, home })).pools.train;
    expect(pool?.spec.secrets).toEqual({
      HF_TOKEN: { env: "HF_TOKEN" },
      DB_PASSWORD: { file: "~/.db-password" },
    });
    expect(parseInput(specSchema, pool?.spec).secrets).toEqual(pool?.spec.secrets);
  });

  it("refuses a secret's value written in the file, naming it without repeating it", async () => {
    await writeProject(
      '[pools.train.secrets]\nHF_TOKEN = "hf_in_the_file"\nAPI_KEY = { value = "in-the-file" }\n',
    );
    const issues = await issuesOf(loadConfig({ cwd, home }));
    expect(issues.map((issue) => issue.path)).toEqual([
      "pools.train.secrets.HF_TOKEN",
      "pools.train.secrets.API_KEY",
    ]);
    expect(issues[0]?.message).toMatch(/never written in skyward\.toml/);
    expect(JSON.stringify(issues)).not.toMatch(/hf_in_the_file|in-the-file/);
  });
});

describe("loadConfig: provider tables", () => {
  it.each(Object.entries(PROVIDER_PACKAGES))("type %s maps to %s", async (type, packageName) => {
    await writeProject(`[providers.p]\ntype = "${type}"\n`);
    expect((await loadConfig({ cwd, home })).providers.p?.package).toBe(packageName);
  });

  it("knows the built-in provider packages", () => {
    expect(PROVIDER_PACKAGES).toEqual({
      aws: "@skyward/provider-aws",
      gcp: "@skyward/provider-gcp",
      hyperstack: "@skyward/provider-hyperstack",
      kubernetes: "@skyward/provider-kubernetes",
      novita: "@skyward/provider-novita",
      runpod: "@skyward/provider-runpod",
      slurm: "@skyward/provider-slurm",
      ssh: "@skyward/provider-ssh",
      tensordock: "@skyward/provider-tensordock",
      vastai: "@skyward/provider-vastai",
      verda: "@skyward/provider-verda",
    });
  });

  it("converts the keys of the known nested tables (pip_indexes, AWS credentials, SSH hosts), not of data tables", async () => {
    const config = validateConfig(
      parseConfigText(`
[providers.cloud]
type = "aws"
credentials = { access_key_id = "AKIAEXAMPLE", secret_access_key = "s3cr3t", session_token = "t" }
on_demand_prices = { "g5.xlarge" = 0.9, "p4d-24xlarge" = 30 }
tags = { team_name = "ml" }

[providers.lab]
type = "ssh"

[[providers.lab.hosts]]
host = "10.0.0.5"
identity_file = "~/.ssh/id_ed25519"
host_key_fingerprint = "SHA256:abc"

[pools.x.image]
pip = ["cudf-cu12"]
env = { MY_VAR = "x", snake_name = "kept" }
shell_vars = { GIT_SHA = "git rev-parse HEAD" }

[[pools.x.image.pip_indexes]]
url = "https://pypi.nvidia.com"
packages = ["cudf-cu12"]
dependencies_from_default = true
`),
    );
    expect(config.providers.cloud?.settings).toEqual({
      credentials: { accessKeyId: "AKIAEXAMPLE", secretAccessKey: "s3cr3t", sessionToken: "t" },
      onDemandPrices: { "g5.xlarge": 0.9, "p4d-24xlarge": 30 },
      tags: { team_name: "ml" },
    });
    expect(config.providers.lab?.settings).toEqual({
      hosts: [{ host: "10.0.0.5", identityFile: "~/.ssh/id_ed25519", hostKeyFingerprint: "SHA256:abc" }],
    });
    const image = config.pools.x?.spec.image;
    expect(image).toEqual({
      pip: ["cudf-cu12"],
      env: { MY_VAR: "x", snake_name: "kept" },
      shellVars: { GIT_SHA: "git rev-parse HEAD" },
      pipIndexes: [
        { url: "https://pypi.nvidia.com", packages: ["cudf-cu12"], dependenciesFromDefault: true },
      ],
    });
    // The spec accepts what the file gave (an unconverted key is refused there as unknown).
    expect(parseInput(specSchema, config.pools.x?.spec).image.pipIndexes).toEqual([
      { url: "https://pypi.nvidia.com", packages: ["cudf-cu12"], dependenciesFromDefault: true },
    ]);
    // A key given in both spellings inside a nested table is reported at its path.
    expect(
      await issuesOf(
        Promise.resolve().then(() =>
          validateConfig(
            parseConfigText(
              '[providers.cloud]\ntype = "aws"\ncredentials = { access_key_id = "A", accessKeyId = "B" }\n',
            ),
          ),
        ),
      ),
    ).toEqual([
      { path: "providers.cloud.credentials.accessKeyId", message: 'given twice (also as "access_key_id")' },
    ]);
  });

  it("turns the other keys into camelCase settings, values untouched", async () => {
    await writeProject(`
[providers.cloud]
type = "aws"
region = "us-east-1"
instance_profile = "skyward"
subnet_ids = ["a", "b"]
use-ssm = true
tags = { team_name = "ml" }
`);
    expect((await loadConfig({ cwd, home })).providers.cloud).toEqual({
      name: "cloud",
      type: "aws",
      package: "@skyward/provider-aws",
      settings: {
        region: "us-east-1",
        instanceProfile: "skyward",
        subnetIds: ["a", "b"],
        useSsm: true,
        tags: { team_name: "ml" },
      },
    });
  });

  it("loads a third-party provider from package = …, with a free type", async () => {
    await writeProject(
      '[providers.mine]\ntype = "lambda-labs"\npackage = "skyward-provider-lambda"\napi_key_env = "X"\n',
    );
    expect((await loadConfig({ cwd, home })).providers.mine).toEqual({
      name: "mine",
      type: "lambda-labs",
      package: "skyward-provider-lambda",
      settings: { apiKeyEnv: "X" },
    });
  });

  it("lets package = … override a known type's package", async () => {
    await writeProject('[providers.fork]\ntype = "aws"\npackage = "@acme/provider-aws"\n');
    expect((await loadConfig({ cwd, home })).providers.fork?.package).toBe("@acme/provider-aws");
  });
});

describe("loadConfig: errors that need files", () => {
  it("names the file, line and column of a TOML syntax error", async () => {
    const file = await writeProject("[pools.x]\nnodes = = 4\n");
    const issues = await issuesOf(loadConfig({ cwd, home }));
    expect(issues).toHaveLength(1);
    expect(issues[0]?.message).toContain(`TOML syntax error at ${file}:2:`);
  });

  it("names both files when the merged configuration is invalid", async () => {
    const globalFile = await writeGlobal("[pools.x]\nnodes = 1\n");
    const projectFile = await writeProject('[pools.x]\nprovider = "missing"\n');
    try {
      await loadConfig({ cwd, home });
      expect.unreachable("an unknown provider was accepted");
    } catch (error) {
      expect(ConfigurationError.isInstance(error)).toBe(true);
      expect((error as Error).message).toContain(`${globalFile} + ${projectFile}`);
      expect((error as ConfigurationError).issues[0]?.path).toBe("pools.x.provider");
    }
  });

  it("reports a file it cannot read", async () => {
    await mkdir(join(cwd, "skyward.toml"));
    const issues = await issuesOf(loadConfig({ cwd, home }));
    expect(issues[0]?.message).toContain("cannot read");
  });
});

describe("provider packages (dynamic import)", () => {
  it("creates the provider from the package's createProviderFromConfig, settings camelCased", async () => {
    await installPackage("skyward-provider-fixture", RECORDING_FACTORY);
    await writeProject(`
[providers.mine]
type = "fixture"
package = "skyward-provider-fixture"
api_key_env = "FIXTURE_KEY"
min_reliability = 0.9

[pools.p]
provider = "mine"
nodes = 2
accelerator = "A100"
`);
    const config = await loadConfig({ cwd, home });
    const named = await resolveNamedPool("p", config, cwd);
    expect(named.path).toBe("pools.p");
    expect(isProvider(named.spec.provider)).toBe(true);
    expect(named.spec.provider?.name).toBe("fixture");
    expect(settingsOf(named.spec.provider)).toEqual({
      apiKeyEnv: "FIXTURE_KEY",
      minReliability: 0.9,
    });
    expect(named.spec).toMatchObject({ nodes: 2, accelerator: accelerators.A100() });

    const resolved = parseInput(specSchema, named.spec, named.path);
    expect(resolved.provider).toBe(named.spec.provider);
    expect(resolved.nodes).toEqual({ desired: 2, min: 2, max: 2 });
  });

  it("works with a scoped package and an async factory", async () => {
    await installPackage(
      "@acme/skyward-provider",
      RECORDING_FACTORY.replace("export function", "export async function"),
    );
    const provider = await createProviderFromEntry(
      entry({ package: "@acme/skyward-provider", settings: { region: "r" } }),
      cwd,
    );
    expect(isProvider(provider)).toBe(true);
    expect(settingsOf(provider)).toEqual({ region: "r" });
  });

  it.each([
    ["only an import condition", { ".": { import: "./index.js" } }],
    ["types first, then import", { ".": { types: "./index.d.ts", import: "./index.js" } }],
    ["conditions without a subpath", { types: "./index.d.ts", import: "./index.js" }],
    ["nested node/import conditions", { ".": { node: { import: "./index.js" } } }],
    ["a fallback array", { ".": [{ import: "./index.js" }, "./missing.js"] }],
    ["a default condition", { ".": { default: "./index.js" } }],
  ])("resolves an ESM package from the project whose exports have %s", async (_, exportsField) => {
    await installPackage("skyward-provider-esm-only", RECORDING_FACTORY, exportsField);
    const provider = await createProviderFromEntry(entry({ package: "skyward-provider-esm-only" }), cwd);
    expect(isProvider(provider)).toBe(true);
  });

  it("resolves a package with only a main field", async () => {
    const dir = join(cwd, "node_modules", "skyward-provider-main");
    await mkdir(dir, { recursive: true });
    await writeFile(
      join(dir, "package.json"),
      JSON.stringify({ name: "skyward-provider-main", type: "module", main: "lib.js" }),
    );
    await writeFile(join(dir, "lib.js"), RECORDING_FACTORY);
    const provider = await createProviderFromEntry(entry({ package: "skyward-provider-main" }), cwd);
    expect(isProvider(provider)).toBe(true);
  });

  it("finds a package installed in a parent directory's node_modules", async () => {
    await installPackage("skyward-provider-hoisted", RECORDING_FACTORY, { ".": { import: "./index.js" } });
    const nested = join(cwd, "apps", "trainer");
    await mkdir(nested, { recursive: true });
    const provider = await createProviderFromEntry(entry({ package: "skyward-provider-hoisted" }), nested);
    expect(isProvider(provider)).toBe(true);
  });

  it("gives a pool without a provider no provider (the built-in Local)", async () => {
    await writeProject("[pools.local]\nnodes = 3\n");
    const named = await resolveNamedPool("local", await loadConfig({ cwd, home }), cwd);
    expect(named.spec).toEqual({ nodes: 3 });
    expect("provider" in named.spec).toBe(false);
    expect(named.options).toEqual({});
  });

  it("passes the pool's options along", async () => {
    await writeProject("[pools.p.options]\nssh_timeout = 30\n");
    const named = await resolveNamedPool("p", await loadConfig({ cwd, home }), cwd);
    expect(named.options).toEqual({ sshTimeout: 30 });
  });

  it("names the pools that exist when the name is unknown", async () => {
    const file = await writeProject("[pools.train]\nnodes = 1\n[pools.serve]\nnodes = 1\n");
    const issues = await issuesOf(resolveNamedPool("trian", await loadConfig({ cwd, home }), cwd));
    expect(issues).toEqual([
      { path: "name", message: `no pool named "trian" in ${file} (defined: train, serve)` },
    ]);
  });

  it("says no configuration file was found when there is none", async () => {
    const issues = await issuesOf(resolveNamedPool("train", await loadConfig({ cwd, home }), cwd));
    expect(issues[0]?.message).toContain("no configuration file found");
  });

  it("reports a third-party package that is not installed at providers.NAME.package", async () => {
    const issues = await issuesOf(
      createProviderFromEntry(entry({ package: "skyward-provider-not-installed" }), cwd),
    );
    expect(issues).toHaveLength(1);
    expect(issues[0]?.path).toBe("providers.mine.package");
    expect(issues[0]?.message).toContain(
      'provider package "skyward-provider-not-installed" could not be loaded',
    );
    expect(issues[0]?.message).toContain("npm install skyward-provider-not-installed");
  });

  it("reports an uninstalled package through resolveNamedPool too", async () => {
    await writeProject(
      '[providers.gone]\ntype = "x"\npackage = "skyward-provider-gone"\n[pools.p]\nprovider = "gone"\n',
    );
    const issues = await issuesOf(resolveNamedPool("p", await loadConfig({ cwd, home }), cwd));
    expect(issues[0]?.path).toBe("providers.gone.package");
    expect(issues[0]?.message).toContain("could not be loaded");
  });

  it("reports a package without createProviderFromConfig, naming it", async () => {
    await installPackage("skyward-provider-no-factory", "export const somethingElse = 1;\n");
    const issues = await issuesOf(
      createProviderFromEntry(entry({ package: "skyward-provider-no-factory" }), cwd),
    );
    expect(issues).toEqual([
      {
        path: "providers.mine",
        message: 'package "skyward-provider-no-factory" does not export createProviderFromConfig(settings)',
      },
    ]);
  });

  it("reports a factory that returns something that is not a provider", async () => {
    await installPackage(
      "skyward-provider-bad-return",
      'export function createProviderFromConfig() { return { specificationVersion: "v1", name: "half" }; }\n',
    );
    const issues = await issuesOf(
      createProviderFromEntry(entry({ package: "skyward-provider-bad-return" }), cwd),
    );
    expect(issues).toEqual([
      {
        path: "providers.mine",
        message: 'package "skyward-provider-bad-return" returned something that is not a v1 provider',
      },
    ]);
  });

  it("prefixes the path of a ConfigurationError the factory throws", async () => {
    await installPackage(
      "skyward-provider-picky",
      `const marker = Symbol.for("skyward.error.configuration");
export function createProviderFromConfig() {
  const error = new Error("bad settings");
  Object.defineProperty(error, Symbol.for("skyward.error"), { value: true });
  Object.defineProperty(error, marker, { value: true });
  error.issues = [{ path: "region", message: "unknown region" }, { path: "", message: "whole table" }];
  throw error;
}
`,
    );
    const issues = await issuesOf(createProviderFromEntry(entry({ package: "skyward-provider-picky" }), cwd));
    expect(issues).toEqual([
      { path: "providers.mine.region", message: "unknown region" },
      { path: "providers.mine", message: "whole table" },
    ]);
  });

  it("lets any other error from the factory through unchanged", async () => {
    await installPackage(
      "skyward-provider-throws",
      'export function createProviderFromConfig() { throw new TypeError("boom"); }\n',
    );
    await expect(createProviderFromEntry(entry({ package: "skyward-provider-throws" }), cwd)).rejects.toThrow(
      new TypeError("boom"),
    );
  });
});

describe("installHint", () => {
  it("says npm install for a third-party package, and how to get Skyward's own before they are published", () => {
    expect(installHint("skyward-provider-acme")).toBe("npm install skyward-provider-acme");
    expect(installHint("@skyward/provider-aws")).toMatch(
      /not on a registry yet: pack @skyward\/provider-aws from the Skyward repository and npm install the tarball/,
    );
  });
});
