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
 * plugin package. The helpers at the bottom run each hook kind over a pool's plugins in the order
 * the reference documents.
 */
import { basename, isAbsolute } from "node:path";
import { fileURLToPath } from "node:url";
import { z } from "zod";
import { ConfigurationError, type ConfigurationIssue, SkywardError } from "../errors/errors.js";
import type { Image } from "../spec/image.js";
import { LaunchCommand, type LaunchContext } from "./launch-command.js";
import type {
  AroundClient,
  BootstrapFactory,
  Cluster,
  ImageTransform,
  JsonValue,
  LauncherTransform,
  PluginBootstrapOp,
  PluginHook,
  PluginV1,
  PluginWorker,
  PluginWorkerInput,
  PoolHandle,
  ShellOp,
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
  PluginV1,
  PluginWorker,
  PluginWorkerInput,
  PoolHandle,
  WorkerModule,
  WorkersPerNode,
} from "./types.js";

/** The version of the plugin contract this package implements. */
export const PLUGIN_SPECIFICATION_VERSION = "v1";

const pluginErrorMarker = Symbol.for("skyward.error.plugin");

/** A plugin's hook threw or returned something unusable. Names the plugin and the hook. */
export class PluginError extends SkywardError {
  // biome-ignore lint/correctness/noUnusedPrivateClassMembers: read through the symbol by isInstance.
  private readonly [pluginErrorMarker] = true;
  /** The plugin's name. */
  readonly plugin: string;
  /** The hook that failed. */
  readonly hook: PluginHook;
  /** Errors raised while cleaning up after this one (exiting hooks already entered). */
  readonly suppressed: readonly unknown[];

  constructor(options: {
    plugin: string;
    hook: PluginHook;
    message?: string;
    cause?: unknown;
    suppressed?: readonly unknown[];
  }) {
    super({
      message:
        options.message ??
        `plugin "${options.plugin}": ${options.hook} hook failed: ${messageOf(options.cause)}`,
      cause: options.cause,
    });
    this.name = "PluginError";
    this.plugin = options.plugin;
    this.hook = options.hook;
    this.suppressed = options.suppressed ?? [];
  }

  /** True for a {@link PluginError} from any copy of this package. */
  static override isInstance(error: unknown): error is PluginError {
    return (
      typeof error === "object" &&
      error !== null &&
      (error as Record<symbol, unknown>)[pluginErrorMarker] === true
    );
  }
}

function messageOf(error: unknown): string {
  if (error instanceof Error) return error.message;
  return String(error);
}

const pluginNamePattern = /^[a-z0-9][a-z0-9._-]*$/;
const pythonModulePattern = /^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$/;

interface PluginFields {
  readonly name: string;
  readonly transform: ImageTransform | undefined;
  readonly bootstrap: BootstrapFactory | undefined;
  readonly launcher: LauncherTransform | undefined;
  readonly aroundClient: AroundClient | undefined;
  readonly workersPerNode: WorkersPerNode | undefined;
  readonly worker: PluginWorker | undefined;
  readonly peerNetwork: boolean | undefined;
}

function fail(path: string, message: string): never {
  throw new ConfigurationError({ issues: [{ path, message }] });
}

function requireFunction(value: unknown, path: string): void {
  if (typeof value !== "function") fail(path, `expected a function, received ${describe(value)}`);
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
        `expected a plugin name matching [a-z0-9][a-z0-9._-]* (e.g. "torch", "my-plugin"), received ${describe(name)}`,
      );
    }
    return new Plugin({
      name,
      transform: undefined,
      bootstrap: undefined,
      launcher: undefined,
      aroundClient: undefined,
      workersPerNode: undefined,
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
    fail("worker", `expected an object, received ${describe(input)}`);
  const issues: ConfigurationIssue[] = [];
  const known = new Set(["module", "path", "config"]);
  for (const key of Object.keys(input)) {
    if (!known.has(key)) issues.push({ path: `worker.${key}`, message: "unknown field" });
  }
  const { module, path, config = {} } = input;
  if (typeof module !== "string" || !pythonModulePattern.test(module)) {
    issues.push({
      path: "worker.module",
      message: `expected a Python module name (e.g. "skyward_torch" or "my_pkg.hooks"), received ${describe(module)}`,
    });
  }
  let resolvedPath: string | undefined;
  if (path !== undefined) {
    resolvedPath = toLocalPath(path);
    if (resolvedPath === undefined) {
      issues.push({
        path: "worker.path",
        message: `expected an absolute path or a file: URL, received ${describe(path)}`,
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
    issues.push({ path, message: `expected a plain object of JSON values, received ${describe(value)}` });
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
  issues.push({ path, message: `${expected}, received ${describe(value)}` });
  return undefined;
}

function describe(value: unknown): string {
  if (value === null) return "null";
  if (value === undefined) return "nothing";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "string") return `the string ${JSON.stringify(value)}`;
  if (typeof value === "number" || typeof value === "boolean") return `${typeof value} ${String(value)}`;
  if (typeof value === "function") return "a function";
  if (value instanceof URL) return `the URL ${value.href}`;
  if (typeof value === "object") {
    const constructorName = (Object.getPrototypeOf(value) as { constructor?: { name?: string } } | null)
      ?.constructor?.name;
    return constructorName && constructorName !== "Object" ? `a ${constructorName}` : "an object";
  }
  return typeof value;
}

const hookNames = ["transform", "bootstrap", "launcher", "aroundClient", "workersPerNode"] as const;

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
    return `${expected}, received ${describe(value)}`;
  const candidate = value as Record<string, unknown>;
  const label = typeof candidate.name === "string" ? `plugin "${candidate.name}"` : "the plugin";
  const version = candidate.specificationVersion;
  if (version === undefined) return `${label} has no specificationVersion`;
  if (version !== PLUGIN_SPECIFICATION_VERSION) {
    return `${label} implements specification version ${JSON.stringify(version)}, but this version of @skyward/core supports "${PLUGIN_SPECIFICATION_VERSION}"`;
  }
  if (typeof candidate.name !== "string" || !pluginNamePattern.test(candidate.name))
    return `${label} has no name matching [a-z0-9][a-z0-9._-]* (received ${describe(candidate.name)})`;
  for (const hook of hookNames) {
    if (candidate[hook] !== undefined && typeof candidate[hook] !== "function")
      return `${label} has a ${hook} hook that is not a function`;
  }
  if (candidate.peerNetwork !== undefined && typeof candidate.peerNetwork !== "boolean")
    return `${label} has a peerNetwork that is not true or false (received ${describe(candidate.peerNetwork)})`;
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

/** Runs `hook`, turning what it throws into a {@link PluginError} naming the plugin and hook. */
async function guarded<T>(plugin: PluginV1, hook: PluginHook, run: () => T | Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (error) {
    throw PluginError.isInstance(error)
      ? error
      : new PluginError({ plugin: plugin.name, hook, cause: error });
  }
}

function guardedSync<T>(plugin: PluginV1, hook: PluginHook, run: () => T): T {
  try {
    return run();
  } catch (error) {
    throw PluginError.isInstance(error)
      ? error
      : new PluginError({ plugin: plugin.name, hook, cause: error });
  }
}

function badReturn(plugin: PluginV1, hook: PluginHook, expected: string, received: unknown): PluginError {
  return new PluginError({
    plugin: plugin.name,
    hook,
    message: `plugin "${plugin.name}": ${hook} hook returned ${describe(received)}, expected ${expected}`,
  });
}

/** Runs every plugin's image transform, in plugin order, each on the previous one's result. */
export async function applyImageTransforms(
  plugins: readonly PluginV1[],
  image: Image,
  cluster: Cluster,
): Promise<Image> {
  let current = image;
  for (const plugin of plugins) {
    const transform = plugin.transform;
    if (!transform) continue;
    const next: unknown = await guarded(plugin, "transform", () =>
      transform.call(plugin, { image: current, cluster }),
    );
    if (typeof next !== "object" || next === null || Array.isArray(next)) {
      throw badReturn(plugin, "transform", "an image", next);
    }
    current = next as Image;
  }
  return current;
}

/** Every plugin's bootstrap ops with the plugin each comes from, in plugin order. */
export function collectPluginBootstrapOps(
  plugins: readonly PluginV1[],
  cluster: Cluster,
): PluginBootstrapOp[] {
  const ops: PluginBootstrapOp[] = [];
  for (const plugin of plugins) {
    const factory = plugin.bootstrap;
    if (!factory) continue;
    const returned: unknown = guardedSync(plugin, "bootstrap", () => factory.call(plugin, { cluster }));
    if (!Array.isArray(returned) || !returned.every((op) => typeof op === "string")) {
      throw badReturn(plugin, "bootstrap", "an array of shell ops (strings)", returned);
    }
    for (const op of returned as string[]) ops.push(Object.freeze({ plugin: plugin.name, op }));
  }
  return ops;
}

/** Every plugin's bootstrap ops, concatenated in plugin order. */
export function collectBootstrapOps(plugins: readonly PluginV1[], cluster: Cluster): ShellOp[] {
  return collectPluginBootstrapOps(plugins, cluster).map(({ op }) => op);
}

const perAcceleratorMarker = Symbol.for("skyward.workersPerNode.perAccelerator");

/**
 * The accelerators each node of `cluster` has: the offer's count, else the spec's (`accelerator:
 * sky.accelerators.A100({ count: 8 })` → 8); 0 for CPU nodes. A fractional share counts as none.
 */
export function acceleratorsPerNode(cluster: Cluster): number {
  const count = cluster.offer.accelerator?.count ?? cluster.spec.acceleratorCount;
  return typeof count === "number" && Number.isFinite(count) && count >= 1 ? Math.floor(count) : 0;
}

/** Options of {@link workersPerAccelerator}. */
export interface WorkersPerAcceleratorOptions {
  /**
   * Pin worker `i` of a node to device `i` (`CUDA_VISIBLE_DEVICES`: the process sees one device,
   * its `cuda:0`). Default true. False: every worker sees all of the node's devices, and the
   * framework picks device `LOCAL_RANK` (accelerate, Hugging Face `Trainer`: `cuda:<LOCAL_RANK>`).
   */
  readonly pin?: boolean;
  /**
   * Called with the count and the cluster before the hook returns it: a plugin's own checks
   * (accelerate: `num_processes` = nodes × accelerators); what it throws fails the pool's start.
   */
  readonly check?: (count: number, cluster: Cluster) => void;
}

/**
 * A {@link WorkersPerNode} hook for one worker per accelerator: the node's accelerator count
 * ({@link acceleratorsPerNode}). The pool recognises it (see {@link isWorkersPerAccelerator}): it runs
 * each worker as a process of its own, checks each node has that many GPUs, and (with `pin`) pins
 * worker `i` of a node to device `i`.
 *
 * @throws {Error} (when called) for a cluster whose nodes have no accelerator.
 */
export function workersPerAccelerator(options: WorkersPerAcceleratorOptions = {}): WorkersPerNode {
  const { pin = true, check } = options;
  const hook: WorkersPerNode = ({ cluster }) => {
    const count = acceleratorsPerNode(cluster);
    if (count < 1) {
      throw new Error(
        "one worker per accelerator needs nodes with accelerators (e.g. accelerator: sky.accelerators.A100({ count: 8 })), and this pool's nodes have none",
      );
    }
    check?.(count, cluster);
    return count;
  };
  Object.defineProperty(hook, perAcceleratorMarker, { value: Object.freeze({ pin }) });
  return hook;
}

function perAcceleratorSettings(hook: unknown): { pin: boolean } | undefined {
  if (typeof hook !== "function") return undefined;
  const settings = (hook as unknown as Record<symbol, unknown>)[perAcceleratorMarker];
  return typeof settings === "object" && settings !== null ? (settings as { pin: boolean }) : undefined;
}

/** Whether `hook` is one {@link workersPerAccelerator} made (from any copy of this package). */
export function isWorkersPerAccelerator(hook: unknown): boolean {
  return perAcceleratorSettings(hook) !== undefined;
}

/**
 * Every plugin after the first that sets its own {@link Plugin.workersPerNode} (at most one plugin
 * may decide how many workers a node runs; {@link workersPerAccelerator} hooks all agree and yield to
 * it): its index in `plugins` and a message naming both.
 */
export function workersPerNodeConflicts(plugins: readonly PluginV1[]): { index: number; message: string }[] {
  const setting = plugins
    .map((plugin, index) => ({ plugin, index }))
    .filter(
      ({ plugin }) =>
        typeof plugin.workersPerNode === "function" && !isWorkersPerAccelerator(plugin.workersPerNode),
    );
  const [first, ...others] = setting;
  if (!first) return [];
  return others.map(({ plugin, index }) => ({
    index,
    message: `plugins "${first.plugin.name}" and "${plugin.name}" both set workersPerNode; at most one plugin of a pool may decide how many workers a node runs`,
  }));
}

/**
 * The workers each node runs on `cluster`: what the one plugin that sets
 * {@link Plugin.workersPerNode} returns, else 1.
 *
 * @throws {ConfigurationError} when two plugins set it (naming both).
 * @throws {PluginError} when the hook throws or returns anything but a positive whole number.
 */
export function resolveWorkersPerNode(plugins: readonly PluginV1[], cluster: Cluster): number {
  return resolveWorkerLayout(plugins, cluster).workersPerNode;
}

/** How a pool's nodes run their workers, as {@link resolveWorkerLayout} decides. */
export interface WorkerLayout {
  /** Workers per node. */
  readonly workersPerNode: number;
  /**
   * Whether some plugin asked for one worker per accelerator ({@link workersPerAccelerator}): each
   * worker is then a process of its own (the process executor).
   */
  readonly processPerWorker: boolean;
  /**
   * Whether the count is the node's accelerators (no plugin set its own): each node then checks it
   * has that many GPUs before it starts.
   */
  readonly checkAccelerators: boolean;
  /**
   * Whether, besides, the runtime pins worker `i` of a node to device `i` (`CUDA_VISIBLE_DEVICES`):
   * when every plugin asking for one worker per accelerator pins.
   */
  readonly pinAccelerators: boolean;
}

/**
 * The workers each node runs on `cluster`: what the one plugin that sets its own
 * {@link Plugin.workersPerNode} returns; else, when a plugin asks for one worker per accelerator,
 * the node's accelerator count; else 1.
 *
 * @throws {ConfigurationError} when two plugins set their own count (naming both).
 * @throws {PluginError} when the hook throws or returns anything but a positive whole number.
 */
export function resolveWorkerLayout(plugins: readonly PluginV1[], cluster: Cluster): WorkerLayout {
  const conflicts = workersPerNodeConflicts(plugins);
  if (conflicts.length > 0) {
    throw new ConfigurationError({
      issues: conflicts.map(({ index, message }) => ({ path: `plugins[${index}]`, message })),
    });
  }
  const setting = plugins.filter((plugin) => typeof plugin.workersPerNode === "function");
  const perAccelerator = setting.filter((plugin) => isWorkersPerAccelerator(plugin.workersPerNode));
  const processPerWorker = perAccelerator.length > 0;
  const own = setting.find((plugin) => !isWorkersPerAccelerator(plugin.workersPerNode));
  // The one plugin with its own count (MIG) decides; else every per-accelerator hook runs (they agree
  // on the count, and each may check it its own way).
  let decided: number | undefined;
  for (const plugin of own ? [own] : perAccelerator) {
    const hook = plugin.workersPerNode as WorkersPerNode;
    const count: unknown = guardedSync(plugin, "workersPerNode", () => hook.call(plugin, { cluster }));
    if (typeof count !== "number" || !Number.isInteger(count) || count < 1) {
      throw badReturn(plugin, "workersPerNode", "a positive whole number", count);
    }
    decided ??= count;
  }
  const byAccelerators = own === undefined && processPerWorker;
  return {
    workersPerNode: decided ?? 1,
    processPerWorker,
    checkAccelerators: byAccelerators,
    pinAccelerators:
      byAccelerators && perAccelerator.every((plugin) => perAcceleratorSettings(plugin.workersPerNode)?.pin),
  };
}

/** `value` as a command of this copy of the package (one from another copy is rebuilt), if it is one. */
function asLaunchCommand(value: unknown): LaunchCommand | undefined {
  if (value instanceof LaunchCommand) return value;
  if (typeof value !== "object" || value === null) return undefined;
  const { launcher, entrypoint, args } = value as Partial<Record<keyof LaunchCommand, unknown>>;
  if (typeof launcher !== "string" || typeof entrypoint !== "string" || !Array.isArray(args))
    return undefined;
  try {
    return LaunchCommand.create({ launcher, entrypoint, args });
  } catch {
    return undefined;
  }
}

/** Runs every plugin's launcher transform, in plugin order, each on the previous one's command. */
export function applyLaunchers(
  plugins: readonly PluginV1[],
  command: LaunchCommand,
  context: LaunchContext,
): LaunchCommand {
  let current = command;
  for (const plugin of plugins) {
    const launcher = plugin.launcher;
    if (!launcher) continue;
    const returned: unknown = guardedSync(plugin, "launcher", () =>
      launcher.call(plugin, { command: current, context }),
    );
    const next = asLaunchCommand(returned);
    if (!next) throw badReturn(plugin, "launcher", "a LaunchCommand", returned);
    current = next;
  }
  return current;
}

function toAsyncDispose(value: unknown): (() => Promise<void>) | null | undefined {
  if (value === undefined || value === null) return null;
  if (typeof value !== "object" && typeof value !== "function") return undefined;
  const asyncDispose = (value as Partial<AsyncDisposable>)[Symbol.asyncDispose];
  if (typeof asyncDispose === "function") return async () => asyncDispose.call(value);
  const dispose = (value as Partial<Disposable>)[Symbol.dispose];
  if (typeof dispose === "function") return async () => dispose.call(value);
  return undefined;
}

interface Entered {
  readonly plugin: PluginV1;
  readonly exit: () => Promise<void>;
}

/** Exits `entered` in reverse order, every one even when some throw; returns their errors. */
async function exitAll(entered: readonly Entered[]): Promise<PluginError[]> {
  const errors: PluginError[] = [];
  for (const { plugin, exit } of [...entered].reverse()) {
    try {
      await exit();
    } catch (error) {
      errors.push(
        new PluginError({
          plugin: plugin.name,
          hook: "aroundClient",
          message: `plugin "${plugin.name}": aroundClient hook failed while exiting: ${messageOf(error)}`,
          cause: error,
        }),
      );
    }
  }
  return errors;
}

/**
 * Enters every plugin's `aroundClient` hook, in plugin order, and returns a disposable that exits
 * them in reverse order (each one even when another fails; disposing twice does nothing; failures
 * reject with the first {@link PluginError}, the others in its `suppressed`). When a hook throws,
 * the ones already entered are exited before its {@link PluginError} is rethrown.
 *
 * ```ts
 * import type { PoolSpec } from "@skyward/core";
 * import { type Cluster, enterAroundClient, type PoolHandle } from "@skyward/core/contract";
 *
 * declare const spec: PoolSpec, pool: PoolHandle, cluster: Cluster;
 * await using clientHooks = await enterAroundClient(spec.plugins, pool, cluster);
 * ```
 */
export async function enterAroundClient(
  plugins: readonly PluginV1[],
  pool: PoolHandle,
  cluster: Cluster,
): Promise<AsyncDisposable> {
  const entered: Entered[] = [];
  for (const plugin of plugins) {
    const around = plugin.aroundClient;
    if (!around) continue;
    let exit: (() => Promise<void>) | null | undefined;
    try {
      const returned: unknown = await guarded(plugin, "aroundClient", () =>
        around.call(plugin, { pool, cluster }),
      );
      exit = toAsyncDispose(returned);
      if (exit === undefined) {
        throw badReturn(plugin, "aroundClient", "an AsyncDisposable, a Disposable or nothing", returned);
      }
    } catch (error) {
      const cleanupErrors = await exitAll(entered);
      const failure = error as PluginError;
      if (cleanupErrors.length === 0) throw failure;
      throw new PluginError({
        plugin: failure.plugin,
        hook: failure.hook,
        message: failure.message,
        cause: failure.cause,
        suppressed: cleanupErrors,
      });
    }
    if (exit) entered.push({ plugin, exit });
  }
  let exiting: Promise<void> | undefined;
  return {
    [Symbol.asyncDispose]: () => {
      exiting ??= exitAll(entered).then(([first, ...rest]) => {
        if (!first) return;
        if (rest.length === 0) throw first;
        throw new PluginError({
          plugin: first.plugin,
          hook: first.hook,
          message: first.message,
          cause: first.cause,
          suppressed: rest,
        });
      });
      return exiting;
    },
  };
}

/** The plugins' worker modules, in plugin order, for shipping and for the worker to import. */
export function workerModules(plugins: readonly PluginV1[]): WorkerModule[] {
  const modules: WorkerModule[] = [];
  for (const plugin of plugins.map(normalizePlugin)) {
    if (plugin.worker)
      modules.push(Object.freeze({ plugin: plugin.name, ...(plugin.worker as PluginWorker) }));
  }
  return modules;
}
