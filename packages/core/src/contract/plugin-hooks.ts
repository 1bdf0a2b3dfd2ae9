/**
 * The hook runners: each runs one hook kind over a pool's plugins, in plugin order as the reference
 * documents — image transforms, bootstrap ops, launchers, `aroundClient`, secrets — turning a failing hook
 * into a `PluginError`. The pool calls them; the conformance suites of `@skyward/testing` too.
 */
import type { Image } from "../spec/image.js";
import { type Secrets, secretsSchema } from "../spec/secrets.js";
import { LaunchCommand, type LaunchContext } from "./launch-command.js";
import { badReturn, guarded, guardedSync, messageOf, PluginError } from "./plugin-error.js";
import type { Cluster, PluginBootstrapOp, PluginV1, PoolHandle, ShellOp } from "./types.js";

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

/**
 * Every plugin's secrets (its `secrets` hook called now, at pool start), validated as a spec's are;
 * a later plugin's source for a name replaces an earlier one's. A hook that returns no usable table is
 * a {@link PluginError} naming the entry, never quoting what it returned (it may hold a value).
 */
export function collectPluginSecrets(plugins: readonly PluginV1[]): Secrets {
  const collected: Record<string, Secrets[string]> = {};
  for (const plugin of plugins) {
    const hook = plugin.secrets;
    if (!hook) continue;
    const returned: unknown = guardedSync(plugin, "secrets", () => hook.call(plugin));
    const parsed = secretsSchema.safeParse(returned);
    if (!parsed.success) {
      const issues = parsed.error.issues.map((issue) =>
        issue.path.length > 0 ? `${issue.path.join(".")}: ${issue.message}` : issue.message,
      );
      throw new PluginError({
        plugin: plugin.name,
        hook: "secrets",
        message: `plugin "${plugin.name}": secrets hook returned no usable secrets (${issues.join("; ")})`,
      });
    }
    Object.assign(collected, parsed.data);
  }
  return Object.freeze(collected);
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
