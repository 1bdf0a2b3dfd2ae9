/**
 * What the plugin contract's hooks exchange that refers to no pool or cluster: shell operations,
 * worker modules and their input, the launcher's options, JSON values, the hooks' names. The hooks themselves and
 * `PluginV1` are in `types.ts`, beside the spec and the cluster they take.
 */
import type { LaunchCommand, LaunchContext } from "./launch-command.js";

/** What a {@link LauncherTransform} is given. */
export interface LauncherOptions {
  /** The command so far (after the plugins before this one). */
  readonly command: LaunchCommand;
  /** Where and how the worker runs. */
  readonly context: LaunchContext;
}

/** Rewrites the worker's launch command, e.g. wrapping it with `accelerate launch`. */
export type LauncherTransform = (options: LauncherOptions) => LaunchCommand;

/** What an `aroundClient` hook returns: something to exit when the pool ends, or nothing. */
// biome-ignore lint/suspicious/noConfusingVoidType: lets `async ({ pool }) => { register(pool); }` be a hook.
export type AroundClientResult = AsyncDisposable | Disposable | undefined | void;

/** A JSON value: what a plugin may hand to its worker module. */
export type JsonValue =
  | string
  | number
  | boolean
  | null
  | readonly JsonValue[]
  | { readonly [key: string]: JsonValue };

/** The worker side of a plugin, as given to {@link Plugin.withWorker}. */
export interface PluginWorkerInput {
  /** The Python module (dotted name) defining any of `decorate`, `around_app`, `around_process`. */
  module: string;
  /**
   * Where to ship the module from: an absolute path, or a `file:` URL (`new URL("../python/x",
   * import.meta.url)`), of the module's top-level package directory or `.py` file. Omit it when the
   * module is installed on the workers some other way (e.g. by the plugin's image transform).
   */
  path?: string | URL;
  /** JSON-serialisable settings handed to the module's hooks. Default `{}`. */
  config?: { readonly [key: string]: JsonValue };
}

/** The worker side of a plugin, validated. */
export interface PluginWorker {
  /** The Python module's dotted name. */
  readonly module: string;
  /** The absolute path it ships from, or undefined when it is not shipped. */
  readonly path: string | undefined;
  /** Settings handed to its hooks (a frozen deep copy). */
  readonly config: { readonly [key: string]: JsonValue };
}

/** One plugin's worker module, as {@link workerModules} lists it for the bootstrap and the worker. */
export interface WorkerModule extends PluginWorker {
  /** The plugin's name. */
  readonly plugin: string;
}

/** The client-side hooks, as named in {@link PluginError.hook}. */
export type PluginHook =
  | "transform"
  | "bootstrap"
  | "launcher"
  | "aroundClient"
  | "workersPerNode"
  | "secrets";

/** One plugin bootstrap op and the plugin it comes from, so a failure can name the plugin. */
export interface PluginBootstrapOp {
  /** The plugin's name. */
  readonly plugin: string;
  /** The shell op, run as `bash -c op`. */
  readonly op: ShellOp;
}

/**
 * One shell operation run on a node by `sh` (a command line, or a short script). Used for plugin
 * bootstrap ops and a provider's self-destruct command.
 */
export type ShellOp = string;
