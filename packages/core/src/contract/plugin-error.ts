/**
 * `PluginError`, and the guards the hook runners call a hook through, so that whatever a plugin's
 * hook throws or wrongly returns reaches the pool as one error naming the plugin and the hook.
 */
import { SkywardError } from "../errors/errors.js";
import type { PluginHook, PluginV1 } from "./types.js";

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

/** What an error says, for a message: its own message, or the thrown value as text. */
export function messageOf(error: unknown): string {
  if (error instanceof Error) return error.message;
  return String(error);
}

/** Runs `hook`, turning what it throws into a {@link PluginError} naming the plugin and hook. */
export async function guarded<T>(plugin: PluginV1, hook: PluginHook, run: () => T | Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (error) {
    throw PluginError.isInstance(error)
      ? error
      : new PluginError({ plugin: plugin.name, hook, cause: error });
  }
}

/** {@link guarded} for a hook that must not be async. */
export function guardedSync<T>(plugin: PluginV1, hook: PluginHook, run: () => T): T {
  try {
    return run();
  } catch (error) {
    throw PluginError.isInstance(error)
      ? error
      : new PluginError({ plugin: plugin.name, hook, cause: error });
  }
}

/** The error for a hook that returned something other than what its kind must. */
export function badReturn(
  plugin: PluginV1,
  hook: PluginHook,
  expected: string,
  received: unknown,
): PluginError {
  return new PluginError({
    plugin: plugin.name,
    hook,
    message: `plugin "${plugin.name}": ${hook} hook returned ${describeReceived(received)}, expected ${expected}`,
  });
}

/** How a value a hook or a plugin field received reads in a message (`the string "x"`, `a function`). */
export function describeReceived(value: unknown): string {
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
