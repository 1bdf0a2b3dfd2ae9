/**
 * Helpers for testing plugins: a stand-in cluster for their hooks, the issues of options they refuse,
 * and a node's real bootstrap script run on this machine — with fake programs first on `PATH` — to
 * check what the plugin's bootstrap ops do.
 */
import { spawnSync } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import {
  type Accelerator,
  ConfigurationError,
  type ConfigurationIssue,
  image as createImage,
  type Image,
  type PoolSpec,
  spec as poolSpec,
  version,
} from "@skyward/core";
import { type Cluster, type Offer, Plugin, type ProviderV1 } from "@skyward/core/contract";
import { renderBootstrapScript } from "@skyward/ssh";
import { expect } from "vitest";

/**
 * A cluster for calling plugin hooks (`transform`, `bootstrap`…) without a provider: id `cluster`,
 * provider `fake`, pool `pool`, region `local`, no SSH, and an empty `spec` and `offer` — give those in
 * `overrides` when the hook under test reads them.
 */
export function fakeCluster(overrides: Partial<Cluster> = {}): Cluster {
  return {
    id: "cluster",
    provider: "fake",
    poolId: "pool",
    region: "local",
    spec: {} as PoolSpec,
    offer: {} as Offer,
    ssh: null,
    specific: {},
    ...overrides,
  };
}

/**
 * The issues of the `ConfigurationError` that `run` throws. Any other error is rethrown; returning
 * normally is an error ("expected a ConfigurationError").
 */
export function configurationIssuesOf(run: () => unknown): readonly ConfigurationIssue[] {
  try {
    run();
  } catch (error) {
    if (ConfigurationError.isInstance(error)) return error.issues;
    throw error;
  }
  throw new Error("expected a ConfigurationError");
}

/** What {@link runBootstrapScript} runs. */
export interface BootstrapRunOptions {
  /** Where the node's root directory is made: a fresh `root-*` directory inside it. */
  readonly directory: string;
  /** The image the script sets up. Default `image()`. */
  readonly image?: Image;
  /** Plugin bootstrap ops, as `collectBootstrapOps` returns them. Default none. */
  readonly pluginOps?: readonly string[];
  /** Environment variables over this process's: fake programs first on `PATH`, their state files… */
  readonly env?: Readonly<Record<string, string>>;
  /** Deadline of the run, ms. Default 180000. */
  readonly timeoutMs?: number;
}

/** How a bootstrap run ended. */
export interface BootstrapRun {
  /** The node's root directory (`$SKYWARD_ROOT`): the runtime, the environment, `bootstrap.log`. */
  readonly root: string;
  /** bash's exit code; null when it was killed (the deadline). */
  readonly code: number | null;
  /** stdout, stderr and the bootstrap log: everything the run printed. */
  readonly printed: string;
}

/** What {@link bootstrapScriptText} renders. */
export interface BootstrapScriptTextOptions {
  /** The image the script sets up. Default `image()`. */
  readonly image?: Image;
  /** Plugin bootstrap ops, as `collectBootstrapOps` returns them. Default none. */
  readonly pluginOps?: readonly string[];
  /** The node's root directory (`$SKYWARD_ROOT`). Default `/opt/skyward`. */
  readonly root?: string;
}

/**
 * The text of the bootstrap script a node runs for an image and plugin ops, without running it: to
 * check what a plugin's image changes become (the pip phase's index options, say).
 */
export function bootstrapScriptText(options: BootstrapScriptTextOptions = {}): string {
  return renderBootstrapScript({
    image: options.image ?? createImage(),
    root: options.root ?? "/opt/skyward",
    skywardVersion: version,
    pluginOps: options.pluginOps ?? [],
  });
}

/**
 * Runs the real bootstrap script `@skyward/ssh` renders for an image and plugin ops with bash on this
 * machine, as a node would run it (the Python runtime uploaded by copying it into the root). Use it to
 * test a plugin's bootstrap ops against fake programs put first on `PATH` through `env`.
 */
export function runBootstrapScript(options: BootstrapRunOptions): BootstrapRun {
  const root = mkdtempSync(join(options.directory, "root-"));
  const runtime = join(
    dirname(createRequire(import.meta.url).resolve("@skyward/core/package.json")),
    "python",
  );
  cpSync(join(runtime, "skyward"), join(root, "runtime", "skyward"), {
    recursive: true,
    filter: (source) => !source.includes("__pycache__"),
  });
  cpSync(join(runtime, "skyward_worker.py"), join(root, "runtime", "skyward_worker.py"));
  const script = join(root, "bootstrap.sh");
  const rendered = bootstrapScriptText({ ...options, root });
  writeFileSync(script, rendered, { mode: 0o700 });
  const result = spawnSync("bash", [script], {
    env: { ...process.env, ...options.env },
    encoding: "utf8",
    timeout: options.timeoutMs ?? 180_000,
  });
  const log = readFileSync(join(root, "bootstrap.log"), "utf8");
  return { root, code: result.status, printed: `${result.stdout}\n${result.stderr}\n${log}` };
}

/**
 * Expects what a provider whose instances share no network (`capabilities.peerNetwork: "none"`) does
 * with a plugin whose workers connect to one another across nodes: the spec is refused at validation
 * on two nodes, naming the plugin and the provider, and accepted on one. A `create` call per spec.
 */
export function expectPeerPluginRefused(create: () => ProviderV1, accelerator: Accelerator): void {
  const ddp = Plugin.create("ddp").withPeerNetwork();
  const provider = create();
  expect(provider.capabilities.peerNetwork).toBe("none");
  expect(() => poolSpec({ provider: create(), accelerator, nodes: 2, plugins: [ddp] })).toThrow(
    `plugin "ddp" connects its workers on different nodes to one another, but ${provider.name}'s instances share no network`,
  );
  expect(poolSpec({ provider: create(), accelerator, nodes: 1, plugins: [ddp] }).nodes.max).toBe(1);
}
