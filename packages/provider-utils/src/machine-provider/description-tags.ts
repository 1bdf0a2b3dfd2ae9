/**
 * Skyward's tags in a machine's free-text field (Verda's instance `description`), for an API that
 * keeps no labels: `skyward skyward:cluster=… skyward:pool=…`. A text not starting with `skyward` is
 * someone else's, and carries no tags.
 */
import { tagsFromWords, tagsToWords } from "./machine-instance.js";

/** The tags as a description: `skyward` then `key=value` words. */
export function tagsToDescription(tags: Readonly<Record<string, string>>): string {
  return ["skyward", ...tagsToWords(tags)].join(" ");
}

/** The tags a description written by {@link tagsToDescription} carries; none for any other text. */
export function tagsFromDescription(description: string | null | undefined): Record<string, string> {
  const [first, ...words] = (description ?? "").trim().split(/\s+/);
  return first === "skyward" ? tagsFromWords(words) : {};
}
