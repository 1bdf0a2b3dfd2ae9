/**
 * Skyward's tags in a machine's short free-text label, for an API that keeps nothing else of ours and
 * too few characters for {@link tagsToDescription}'s words: `<machine name> <offer id>`, then the pool
 * id (its blanks dropped) when there is one, the name being `<cluster id>-<index>`
 * (`skyward-1a2b3c4d-0 vastai:123 train`). A label of another shape carries no tags but itself.
 */
import type { Cluster } from "@skyward/core/contract";
import { skywardTags } from "../tags.js";

/** The label codec of `provider` (its labels kept as the tag `<provider>:label`), cluster ids `<prefix>-…`. */
export function labelTags(provider: string, prefix = "skyward") {
  const pattern = new RegExp(`^(${prefix}-[0-9a-f]{8})(?:-\\d+)? (\\S+)(?: (\\S+))?$`);
  return {
    /** The label of the machine `name` of `cluster`. */
    label: (name: string, cluster: Pick<Cluster, "offer" | "poolId">) =>
      `${name} ${cluster.offer.id}${cluster.poolId ? ` ${cluster.poolId.replace(/\s+/g, "")}` : ""}`,
    /** The machine's name in its label. */
    name: (label: string | null | undefined) => label?.split(" ")[0],
    /** Skyward's tags in `label` and the label itself; none for no label. */
    tags(label: string | null | undefined): Record<string, string> {
      const [, cluster, offer = "", pool] = pattern.exec(label ?? "") ?? [];
      const tags: Record<string, string> = cluster
        ? skywardTags({ cluster, offer, ...(pool ? { pool } : {}) })
        : {};
      if (label) tags[`${provider}:label`] = label;
      return tags;
    },
  };
}
