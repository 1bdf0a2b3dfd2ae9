/**
 * Whether an attached pool can start nodes: its state file keeps its node bounds and its image
 * (sealed); a node like the others is started with them through the provider the attaching caller
 * gives (`attach(id, { provider })`), with the plugins it passes again (`plugins`: code, which a
 * state file cannot hold). Where that cannot be done, the pool keeps its present size and a resize
 * above it is refused with the reason.
 */
import type { PluginV1, ProviderV1 } from "../contract/types.js";
import { ConfigurationError } from "../errors/errors.js";
import type { Image } from "../spec/image.js";
import type { NodesInput } from "../spec/nodes.js";
import { type DetachedPoolState, openToken } from "./state.js";

/** What an attached pool may do about its size. */
export interface AttachGrowth {
  /** The provider a new node is started with; undefined when the pool cannot grow. */
  readonly provider: ProviderV1 | undefined;
  /** Why the pool cannot grow (a resize above its size is refused with it); undefined when it can. */
  readonly refusal: string | undefined;
  /** The detached pool's node bounds (its present size where the state file has none). */
  readonly bounds: { readonly min: number; readonly max: number };
  /** The detached pool's image, when its state file has it. */
  readonly image: Image | undefined;
  /** The plugins a new node is made with: the caller's, once they match the recorded names. */
  readonly plugins: readonly PluginV1[];
}

const listed = (names: readonly string[]) => (names.length === 0 ? "none" : names.join(", "));

/**
 * Refuses `given` plugins that are not the ones the pool was started with (by name, in order): a node
 * made with others would not be like the pool's.
 *
 * @throws {ConfigurationError} naming `plugins`, with both lists.
 */
function checkPlugins(state: DetachedPoolState, given: readonly PluginV1[]): void {
  const recorded = state.plugins ?? [];
  const names = given.map((plugin) => plugin.name);
  if (names.length === recorded.length && names.every((name, index) => name === recorded[index])) return;
  throw new ConfigurationError({
    issues: [
      {
        path: "plugins",
        message: `expected the plugins pool ${state.id} was started with, in order (${listed(recorded)}), received ${listed(names)}`,
      },
    ],
  });
}

/**
 * How a detached pool may grow once attached: through `given` (a provider of the pool's type; for a
 * `Local` pool it is optional, and checked here), with the image the state file recorded and the
 * caller's `plugins`, which must be the recorded ones. A pool whose state file has no image or
 * bounds (an older version wrote it), or that had plugins the caller did not pass again, keeps its
 * present size.
 *
 * @throws {ConfigurationError} naming `provider` when `given` is of another type than the pool's, or
 *   `plugins` when they are not the pool's.
 */
export async function attachGrowth(
  state: DetachedPoolState,
  // biome-ignore lint/suspicious/noExplicitAny: any provider, whatever its cluster data.
  given: ProviderV1<any> | undefined,
  plugins: readonly PluginV1[] | undefined,
): Promise<AttachGrowth> {
  if (given !== undefined && given.name !== state.provider) {
    throw new ConfigurationError({
      issues: [
        {
          path: "provider",
          message: `expected a "${state.provider}" provider (pool ${state.id} runs there, and a new node of it starts through it), received "${given.name}"`,
        },
      ],
    });
  }
  if (plugins !== undefined) checkPlugins(state, plugins);
  const present = state.nodes.length;
  const bounds = state.nodeBounds ?? { min: present, max: present };
  const image = state.image === undefined ? undefined : (JSON.parse(await openToken(state.image)) as Image);
  const recorded = state.plugins ?? [];
  const refusal =
    image === undefined || state.nodeBounds === undefined
      ? `pool ${state.id}'s state file records no image or node bounds (an older version wrote it): it keeps its ${present} node${present === 1 ? "" : "s"}`
      : recorded.length > 0 && plugins === undefined
        ? `pool ${state.id} has plugins (${recorded.join(", ")}), which are code its state file cannot hold: attach(id, { provider, plugins }) with them again lets it start nodes like its others`
        : given === undefined
          ? `pool ${state.id} was attached without a provider to start nodes with: attach(id, { provider }) with a "${state.provider}" provider lets it grow to ${bounds.max}`
          : undefined;
  return {
    provider: refusal === undefined ? given : undefined,
    refusal,
    bounds,
    image,
    plugins: plugins ?? [],
  };
}

/** The attached pool's nodes: its present size, within its bounds when it can grow, else fixed. */
export function attachedNodes(state: DetachedPoolState, growth: AttachGrowth): NodesInput {
  const present = state.nodes.length;
  if (growth.provider === undefined) return { desired: present, min: present, max: present };
  return {
    desired: present,
    min: Math.min(growth.bounds.min, present),
    max: Math.max(growth.bounds.max, present),
  };
}
