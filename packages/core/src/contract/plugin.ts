/**
 * The plugin contract, version `v1` ({@link PluginV1}): a plain object with a name and optional hooks,
 * each taking one options object, that brings a framework into a pool. `Plugin.create(name).with…()`
 * is sugar that builds one, like the reference's `Plugin`:
 *
 * ```ts
 * import { extendImage, Plugin } from "@skyward/core/contract";
 *
 * export const myFramework = () =>
 *   Plugin.create("my-framework")
 *     .withImageTransform(({ image }) => extendImage(image, { pip: ["my-framework"] }))
 *     .withWorker({ module: "skyward_my_framework", path: new URL("../python/skyward_my_framework", import.meta.url) });
 * ```
 *
 * Client-side hooks (`transform`, `bootstrap`, `launcher`, `aroundClient`) are TypeScript functions;
 * worker-side hooks (`decorate`, `around_app`, `around_process`) live in a Python module of the
 * plugin package. This module holds the builder and the contract's checks (`whyNotPlugin`,
 * `normalizePlugin`, `pluginSchema`); the hook runners are in `plugin-hooks.ts`, the worker count in
 * `workers-per-node.ts`, `PluginError` in `plugin-error.ts` — all re-exported here.
 */
import { basename, isAbsolute } from "node:path";
import { fileURLToPath } from "node:url";
import { z } from "zod";
import { ConfigurationError, type ConfigurationIssue } from "../errors/errors.js";
import { describeReceived } from "./plugin-error.js";
import type {
  AroundClient,
  BootstrapFactory,
  ImageTransform,
  JsonValue,
  LauncherTransform,
  PluginSecrets,
  PluginV1,
  PluginWorker,
  PluginWorkerInput,
  WorkerModule,
  WorkersPerNode,
} from "./types.js";

export type {
  AroundClient,
  AroundClientOptions,
  AroundClientResult,
  BootstrapFactory,
  ClusterHookOptions,
  ImageTransform,
  ImageTransformOptions,
  JsonValue,
  LauncherOptions,
  LauncherTransform,
  PluginBootstrapOp,
  PluginHook,
  PluginSecrets,
  PluginV1,
  PluginWorker,
  PluginWorkerInput,
  PoolHandle,
  WorkerModule,
  WorkersPerNode,
} from "./types.js";

import { workersPerAccelerator } from "./workers-per-node.js";

export { PluginError } from "./plugin-error.js";
export {
  applyImageTransforms,
  applyLaunchers,
  collectBootstrapOps,
  collectPluginBootstrapOps,
  collectPluginSecrets,
  enterAroundClient,
} from "./plugin-hooks.js";
export type { WorkerLayout, WorkersPerAcceleratorOptions } from "./workers-per-node.js";
export {
  acceleratorsPerNode,
  isWorkersPerAccelerator,
  resolveWorkerLayout,
  resolveWorkersPerNode,
  workersPerAccelerator,
  workersPerNodeConflicts,
} from "./workers-per-node.js";

/** The version of the plugin contract this package implements. */
export const PLUGIN_SPECIFICATION_VERSION = "v1";

const pluginNamePattern = /^[a-z0-9][a-z0-9._-]*$/;
const pythonModulePattern = /^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$/;

interface PluginFields {
  readonly name: string;
  readonly transform: ImageTransform | undefined;
  readonly bootstrap: BootstrapFactory | undefined;
  readonly launcher: LauncherTransform | undefined;
  readonly aroundClient: AroundClient | undefined;
  readonly workersPerNode: WorkersPerNode | undefined;
  readonly secrets: PluginSecrets | undefined;
  readonly worker: PluginWorker | undefined;
  readonly peerNetwork: boolean | undefined;
}

function fail(path: string, message: string): never {
  throw new ConfigurationError({ issues: [{ path, message }] });
}

function requireFunction(value: unknown, path: string): void {
  if (typeof value !== "function") fail(path, `expected a function, received ${describeReceived(value)}`);
}

/**
 * Sugar that builds a {@link PluginV1}: a named bundle of hooks. Immutable: every `with*` method
 * returns a new plugin, leaving this one unchanged, and replaces any hook of the same kind set before.
 */
export class Plugin implements PluginV1 {
  /** The contract version. */
  readonly specificationVersion = "v1" as const;
  /** The plugin's name: lower case, `[a-z0-9][a-z0-9._-]*`; unique within a pool. */
  readonly name: string;
  /** Rewrites the image before bootstrap. */
  readonly transform: ImageTransform | undefined;
  /** Adds shell ops after the image's bootstrap phases. */
  readonly bootstrap: BootstrapFactory | undefined;
  /** Rewrites the worker's launch command. */
  readonly launcher: LauncherTransform | undefined;
  /** Client-side lifecycle around the pool's active life. */
  readonly aroundClient: AroundClient | undefined;
  /** How many worker processes each node runs; one when no plugin of the pool sets it. */
  readonly workersPerNode: WorkersPerNode | undefined;
  /** The secrets its tasks need, added to the spec's when the pool starts. */
  readonly secrets: PluginSecrets | undefined;
  /** The Python module holding the worker-side hooks. */
  readonly worker: PluginWorker | undefined;
  /** Its workers on different nodes connect to one another (a distributed-training rendezvous). */
  readonly peerNetwork: boolean | undefined;

  private constructor(fields: PluginFields) {
    this.name = fields.name;
    this.transform = fields.transform;
    this.bootstrap = fields.bootstrap;
    this.launcher = fields.launcher;
    this.aroundClient = fields.aroundClient;
    this.workersPerNode = fields.workersPerNode;
    this.secrets = fields.secrets;
    this.worker = fields.worker;
    this.peerNetwork = fields.peerNetwork;
    Object.freeze(this);
  }

  /**
   * An empty plugin with just a name; attach hooks with the `with*` methods.
   *
   * @throws {ConfigurationError} (path `name`) when the name is not `[a-z0-9][a-z0-9._-]*`.
   */
  static create(name: string): Plugin {
    if (typeof name !== "string" || !pluginNamePattern.test(name)) {
      fail(
        "name",
        `expected a plugin name matching [a-z0-9][a-z0-9._-]* (e.g. "torch", "my-plugin"), received ${describeReceived(name)}`,
      );
    }
    return new Plugin({
      name,
      transform: undefined,
      bootstrap: undefined,
      launcher: undefined,
      aroundClient: undefined,
      workersPerNode: undefined,
      secrets: undefined,
      worker: undefined,
      peerNetwork: undefined,
    });
  }

  private copy(changes: Partial<PluginFields>): Plugin {
    return new Plugin({
      name: this.name,
      transform: this.transform,
      bootstrap: this.bootstrap,
      launcher: this.launcher,
      aroundClient: this.aroundClient,
      workersPerNode: this.workersPerNode,
      secrets: this.secrets,
      worker: this.worker,
      peerNetwork: this.peerNetwork,
      ...changes,
    });
  }

  /** Attaches an image transform: `({ image, cluster }) => image`, run before bootstrap in plugin order. */
  withImageTransform(transform: ImageTransform): Plugin {
    requireFunction(transform, "transform");
    return this.copy({ transform });
  }

  /** Attaches a bootstrap factory: `({ cluster }) => shell ops`, appended after the image's phases. */
  withBootstrap(factory: BootstrapFactory): Plugin {
    requireFunction(factory, "bootstrap");
    return this.copy({ bootstrap: factory });
  }

  /** Attaches a launch command transform: `({ command, context }) => command`, chained in plugin order. */
  withLauncher(launcher: LauncherTransform): Plugin {
    requireFunction(launcher, "launcher");
    return this.copy({ launcher });
  }

  /**
   * Attaches a client-side lifecycle hook: `({ pool, cluster }) => disposable | nothing`, entered when the
   * pool is ready (in plugin order) and disposed when it ends (in reverse order).
   */
  withAroundClient(around: AroundClient): Plugin {
    requireFunction(around, "aroundClient");
    return this.copy({ aroundClient: around });
  }

  /**
   * Sets how many worker processes each node runs: `({ cluster }) => count`, a positive whole number
   * (the MIG plugin: one per GPU instance the node's GPU holds). The pool starts that many workers
   * per node, with a task slot each, and tells every worker its index (`instance_info().worker`).
   * At most one plugin of a pool may set it.
   */
  withWorkersPerNode(workersPerNode: WorkersPerNode): Plugin {
    requireFunction(workersPerNode, "workersPerNode");
    return this.copy({ workersPerNode });
  }

  /**
   * One worker per accelerator: each node runs as many workers as it has accelerators
   * ({@link acceleratorsPerNode}), each a process of its own (the pool uses the process executor; an explicit `worker.executor: "thread"` is refused).
   * With `pin` (the default) worker `i` of a node sees only device `i` (`CUDA_VISIBLE_DEVICES`);
   * with `pin: false` every worker sees all of them and the framework picks device `LOCAL_RANK`
   * (as torchrun's processes do). Sets `workersPerNode` to {@link workersPerAccelerator}; several
   * plugins of a pool may ask for it (they agree on the count; the devices are pinned only if all of
   * them pin), and a plugin that sets its own count (MIG: one per GPU instance) decides instead —
   * its slices are then the accelerators, and it pins the workers itself.
   */
  withWorkersPerAccelerator(options: { readonly pin?: boolean } = {}): Plugin {
    return this.copy({ workersPerNode: workersPerAccelerator(options) });
  }

  /**
   * Attaches the secrets its tasks need: `() => secrets`, in the spec's `secrets` shape (`{ HF_TOKEN:
   * { env: "HF_TOKEN" } }`), called when the pool starts. They are read, sent and masked as the
   * spec's own are (docs/secrets.md); a name the spec names too keeps the spec's source.
   */
  withSecrets(secrets: PluginSecrets): Plugin {
    requireFunction(secrets, "secrets");
    return this.copy({ secrets });
  }

  /**
   * Attaches the worker side: a Python module defining any of `decorate`, `around_app` and
   * `around_process`, and the JSON config handed to them.
   *
   * @throws {ConfigurationError} naming the field (`worker.module`, `worker.path`,
   *   `worker.config.…`) when the module name, path or config is not usable.
   */
  withWorker(worker: PluginWorkerInput): Plugin {
    return this.copy({ worker: parseWorker(worker) });
  }

  /**
   * Marks the plugin as needing a peer network: its workers on different nodes connect to one another
   * (a distributed-training rendezvous on the head's private address). A pool of more than one node
   * refuses it, before anything starts, on a provider whose instances cannot reach one another.
   */
  withPeerNetwork(): Plugin {
    return this.copy({ peerNetwork: true });
  }
}

function parseWorker(input: PluginWorkerInput): PluginWorker {
  if (typeof input !== "object" || input === null)
    fail("worker", `expected an object, received ${describeReceived(input)}`);
  const issues: ConfigurationIssue[] = [];
  const known = new Set(["module", "path", "config"]);
  for (const key of Object.keys(input)) {
    if (!known.has(key)) issues.push({ path: `worker.${key}`, message: "unknown field" });
  }
  const { module, path, config = {} } = input;
  if (typeof module !== "string" || !pythonModulePattern.test(module)) {
    issues.push({
      path: "worker.module",
      message: `expected a Python module name (e.g. "skyward_torch" or "my_pkg.hooks"), received ${describeReceived(module)}`,
    });
  }
  let resolvedPath: string | undefined;
  if (path !== undefined) {
    resolvedPath = toLocalPath(path);
    if (resolvedPath === undefined) {
      issues.push({
        path: "worker.path",
        message: `expected an absolute path or a file: URL, received ${describeReceived(path)}`,
      });
    } else if (typeof module === "string" && pythonModulePattern.test(module)) {
      const topLevel = module.split(".")[0];
      const shipped = basename(resolvedPath).replace(/\.py$/, "");
      if (shipped !== topLevel) {
        issues.push({
          path: "worker.path",
          message: `expected the package directory or file of module "${topLevel}" (named "${topLevel}" or "${topLevel}.py"), received ${JSON.stringify(resolvedPath)}`,
        });
      }
    }
  }
  const frozenConfig = toJsonObject(config, "worker.config", issues);
  if (issues.length > 0) throw new ConfigurationError({ issues });
  return Object.freeze({ module, path: resolvedPath, config: frozenConfig ?? Object.freeze({}) });
}

function toLocalPath(path: unknown): string | undefined {
  if (path instanceof URL) return path.protocol === "file:" ? fileURLToPath(path) : undefined;
  if (typeof path === "string" && path.startsWith("file:")) {
    try {
      return fileURLToPath(path);
    } catch {
      return undefined;
    }
  }
  if (typeof path === "string" && isAbsolute(path)) return path;
  return undefined;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== "object" || value === null) return false;
  const prototype = Object.getPrototypeOf(value);
  return prototype === Object.prototype || prototype === null;
}

/** Validates and deep-copies a JSON object, recording an issue per bad value; undefined when it is not one. */
function toJsonObject(
  value: unknown,
  path: string,
  issues: ConfigurationIssue[],
): { readonly [key: string]: JsonValue } | undefined {
  if (!isPlainObject(value)) {
    issues.push({
      path,
      message: `expected a plain object of JSON values, received ${describeReceived(value)}`,
    });
    return undefined;
  }
  const copy = toJson(value, path, issues, new Set());
  return copy as { readonly [key: string]: JsonValue } | undefined;
}

function toJson(
  value: unknown,
  path: string,
  issues: ConfigurationIssue[],
  ancestors: Set<object>,
): JsonValue | undefined {
  const expected = "expected a JSON value (string, finite number, boolean, null, array or plain object)";
  if (value === null || typeof value === "string" || typeof value === "boolean") return value;
  if (typeof value === "number") {
    if (Number.isFinite(value)) return value;
    issues.push({ path, message: `expected a finite number, received ${String(value)}` });
    return undefined;
  }
  if (Array.isArray(value) || isPlainObject(value)) {
    if (ancestors.has(value)) {
      issues.push({ path, message: "expected a JSON value, received a circular reference" });
      return undefined;
    }
    ancestors.add(value);
    let copy: JsonValue;
    if (Array.isArray(value)) {
      copy = Object.freeze(
        value.map((item, index) => toJson(item, `${path}[${index}]`, issues, ancestors) ?? null),
      );
    } else {
      const entries: Record<string, JsonValue> = {};
      for (const [key, item] of Object.entries(value)) {
        const itemPath = /^[A-Za-z_$][\w$-]*$/.test(key)
          ? `${path}.${key}`
          : `${path}[${JSON.stringify(key)}]`;
        entries[key] = toJson(item, itemPath, issues, ancestors) ?? null;
      }
      copy = Object.freeze(entries);
    }
    ancestors.delete(value);
    return copy;
  }
  issues.push({ path, message: `${expected}, received ${describeReceived(value)}` });
  return undefined;
}

const hookNames = [
  "transform",
  "bootstrap",
  "launcher",
  "aroundClient",
  "workersPerNode",
  "secrets",
] as const;

/**
 * Why `value` is not a usable plugin, in words, or undefined when it is one: a wrong contract version,
 * a bad name, a hook that is not a function.
 */
export function whyNotPlugin(value: unknown): string | undefined {
  const expected =
    'expected a plugin (e.g. torch({ backend: "nccl" }), Plugin.create(name) or a PluginV1 object)';
  if (typeof value === "function")
    return `${expected}, received a function (a plugin factory must be called: torch(), not torch)`;
  if (typeof value !== "object" || value === null || Array.isArray(value))
    return `${expected}, received ${describeReceived(value)}`;
  const candidate = value as Record<string, unknown>;
  const label = typeof candidate.name === "string" ? `plugin "${candidate.name}"` : "the plugin";
  const version = candidate.specificationVersion;
  if (version === undefined) return `${label} has no specificationVersion`;
  if (version !== PLUGIN_SPECIFICATION_VERSION) {
    return `${label} implements specification version ${JSON.stringify(version)}, but this version of @skyward/core supports "${PLUGIN_SPECIFICATION_VERSION}"`;
  }
  if (typeof candidate.name !== "string" || !pluginNamePattern.test(candidate.name))
    return `${label} has no name matching [a-z0-9][a-z0-9._-]* (received ${describeReceived(candidate.name)})`;
  for (const hook of hookNames) {
    if (candidate[hook] !== undefined && typeof candidate[hook] !== "function")
      return `${label} has a ${hook} hook that is not a function`;
  }
  if (candidate.peerNetwork !== undefined && typeof candidate.peerNetwork !== "boolean")
    return `${label} has a peerNetwork that is not true or false (received ${describeReceived(candidate.peerNetwork)})`;
  return undefined;
}

/** True when `value` implements the `v1` plugin contract (checked by shape, not by class). */
export function isPlugin(value: unknown): value is PluginV1 {
  return whyNotPlugin(value) === undefined;
}

/**
 * A plugin as a pool uses it: checked, its worker side validated (`worker.path` an absolute path),
 * frozen. A plugin already normalised is returned as it is.
 *
 * @throws {ConfigurationError} naming the field when the plugin or its worker side is not usable.
 */
export function normalizePlugin(value: unknown): PluginV1 {
  const reason = whyNotPlugin(value);
  if (reason) fail("", reason);
  const plugin = value as PluginV1;
  if (normalized.has(plugin)) return plugin;
  const cached = normalizedFrom.get(plugin);
  if (cached) return cached;
  const worker = plugin.worker === undefined ? undefined : parseWorker(plugin.worker as PluginWorkerInput);
  const result: PluginV1 = Object.freeze({
    specificationVersion: "v1" as const,
    name: plugin.name,
    ...Object.fromEntries(
      hookNames.filter((hook) => plugin[hook] !== undefined).map((hook) => [hook, plugin[hook]]),
    ),
    ...(worker ? { worker } : {}),
    ...(plugin.peerNetwork === true ? { peerNetwork: true } : {}),
  });
  normalized.add(result);
  normalizedFrom.set(plugin, result);
  return result;
}

/** `worker.config["a b"][0]` as zod path segments, so the spec's error names the whole path. */
function pathSegments(path: string): (string | number)[] {
  const segments: (string | number)[] = [];
  for (const match of path.matchAll(/([^.[\]]+)|\[(\d+)\]|\[("(?:[^"\\]|\\.)*")\]/g)) {
    if (match[1] !== undefined) segments.push(match[1]);
    else if (match[2] !== undefined) segments.push(Number(match[2]));
    else if (match[3] !== undefined) segments.push(JSON.parse(match[3]) as string);
  }
  return segments;
}

const normalized = new WeakSet<PluginV1>();
const normalizedFrom = new WeakMap<PluginV1, PluginV1>();

/**
 * Validates one entry of a spec's `plugins`: the contract's shape and its worker side. The plugin is
 * kept as it is (the same object); the issue says what was expected.
 */
export const pluginSchema = z.custom<PluginV1>().superRefine((input, context) => {
  const reason = whyNotPlugin(input);
  if (reason) {
    context.addIssue({ code: "custom", message: reason });
    return;
  }
  try {
    normalizePlugin(input);
  } catch (error) {
    if (!ConfigurationError.isInstance(error)) throw error;
    for (const issue of error.issues)
      context.addIssue({ code: "custom", message: issue.message, path: pathSegments(issue.path) });
  }
});

/** The plugins' worker modules, in plugin order, for shipping and for the worker to import. */
export function workerModules(plugins: readonly PluginV1[]): WorkerModule[] {
  const modules: WorkerModule[] = [];
  for (const plugin of plugins.map(normalizePlugin)) {
    if (plugin.worker)
      modules.push(Object.freeze({ plugin: plugin.name, ...(plugin.worker as PluginWorker) }));
  }
  return modules;
}
