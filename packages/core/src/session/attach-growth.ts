/**
 * Whether an attached pool can start nodes: its state file keeps its node bounds and its image
 * (sealed); a node like the others is started with them through a provider the attaching caller
 * gives (`attach(id, { provider })`). Where that cannot be done, the pool keeps its present size and
 * a resize above it is refused with the reason.
 */
import type { ProviderV1 } from "../contract/types.js";
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
}

/**
 * How a detached `Local` pool may grow once attached: through `given` (a `Local` provider), with the
 * image the state file recorded, unless the pool had plugins (code the state file cannot hold).
 *
 * @throws {ConfigurationError} naming `provider` when `given` is not a `Local` provider.
 */
export async function localGrowth(
  state: DetachedPoolState,
  // biome-ignore lint/suspicious/noExplicitAny: any provider, whatever its cluster data.
  given: ProviderV1<any> | undefined,
): Promise<AttachGrowth> {
  if (given !== undefined && given.name !== "local") {
    throw new ConfigurationError({
      issues: [
        {
          path: "provider",
          message: `expected a "local" provider (pool ${state.id} runs there, and a new node of it starts through it), received "${given.name}"`,
        },
      ],
    });
  }
  const present = state.nodes.length;
  const bounds = state.nodeBounds ?? { min: present, max: present };
  const image = state.image === undefined ? undefined : (JSON.parse(await openToken(state.image)) as Image);
  const plugins = state.plugins ?? [];
  const refusal =
    image === undefined || state.nodeBounds === undefined
      ? `pool ${state.id}'s state file records no image or node bounds (an older version wrote it): it keeps its ${present} node${present === 1 ? "" : "s"}`
      : plugins.length > 0
        ? `pool ${state.id} has plugins (${plugins.join(", ")}), which are code its state file cannot hold: an attached pool cannot start a node like its others`
        : given === undefined
          ? `pool ${state.id} was attached without a provider to start nodes with: attach(id, { provider }) with a Local provider lets it grow to ${bounds.max}`
          : undefined;
  return { provider: refusal === undefined ? given : undefined, refusal, bounds, image };
}

/** The refusal of a pool on a provider other than `Local`: growing one attached is not done. */
export function remoteGrowth(state: DetachedPoolState): AttachGrowth {
  const present = state.nodes.length;
  return {
    provider: undefined,
    refusal: `pool ${state.id} runs on "${state.provider}": an attached pool there keeps its ${present} node${present === 1 ? "" : "s"} (only an attached Local pool starts new ones)`,
    bounds: state.nodeBounds ?? { min: present, max: present },
    image: undefined,
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
