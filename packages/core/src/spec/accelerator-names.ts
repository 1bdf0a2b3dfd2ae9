/**
 * Accelerator names as people and providers write them: canonicalisation (`"NVIDIA A100-SXM4-80GB"`
 * → `A100`), form factors, count suffixes (`A100:8`), and close-name suggestions for a typo.
 */
import {
  type AcceleratorCatalogEntry,
  type AcceleratorName,
  acceleratorCatalog,
} from "./accelerator-catalog.js";

/** Values as a message lists them: each quoted, comma-separated. */
export function quoted(values: readonly string[]): string {
  return values.map((value) => JSON.stringify(value)).join(", ");
}

/** How a bad value reads in a message: strings quoted, numbers as written. */
export function describeValue(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value);
  if (typeof value === "number" || typeof value === "boolean" || typeof value === "bigint")
    return String(value);
  if (value === null) return "null";
  if (value === undefined) return "nothing";
  if (Array.isArray(value)) return "an array";
  return typeof value;
}

function normalizeKey(text: string): string {
  return text.replace(/[\s_-]+/g, "").toUpperCase();
}

const entriesByKey = new Map<string, AcceleratorCatalogEntry>();
for (const entry of acceleratorCatalog) {
  for (const key of new Set([entry.name, ...entry.aliases].map(normalizeKey))) {
    const clash = entriesByKey.get(key);
    if (clash) throw new Error(`accelerator catalog: "${key}" names both ${clash.name} and ${entry.name}`);
    entriesByKey.set(key, entry);
  }
}

/** Leading words that vendors and nvidia-smi put before the model name. */
const vendorWords = new Set([
  "NVIDIA",
  "GEFORCE",
  "TESLA",
  "AMD",
  "INSTINCT",
  "INTEL",
  "HABANA",
  "GOOGLE",
  "AWS",
]);
/** Trailing words that say nothing about which variant it is. */
const noiseWords = /^(?:HBM\d?E?|GDDR\dX?|EDITION|GENERATION)$/i;
const memoryWord = /^(\d+(?:\.\d+)?)\s*GB?$/i;

const formFactorKeys = new Map<string, string>(); // normalized key → the catalog's spelling
for (const entry of acceleratorCatalog) {
  for (const formFactor of entry.formFactors) formFactorKeys.set(normalizeKey(formFactor), formFactor);
}

function formFactorOfWords(words: readonly string[]): string | undefined {
  const key = normalizeKey(words.join(""));
  if (/^SXM\d?$/.test(key)) return "SXM";
  if (/^PCIE\d?$/.test(key)) return "PCIe";
  return formFactorKeys.get(key);
}

interface ParsedName {
  entry: AcceleratorCatalogEntry;
  memory: string | undefined;
  formFactor: string | undefined;
}

/** Resolves a model name with optional vendor prefix, memory and form-factor words; no count. */
export function parseModelName(text: string): ParsedName | undefined {
  const direct = entriesByKey.get(normalizeKey(text));
  if (direct) return { entry: direct, memory: undefined, formFactor: undefined };
  const words = text.split(/[\s_-]+/).filter((word) => word.length > 0);
  while (words.length > 1 && vendorWords.has(words[0]?.toUpperCase() ?? "")) words.shift();
  let memory: string | undefined;
  let formFactor: string | undefined;
  let stripped = true;
  while (stripped) {
    stripped = false;
    const afterVendor = entriesByKey.get(normalizeKey(words.join("")));
    if (afterVendor) return { entry: afterVendor, memory, formFactor };
    const last = words.at(-1) ?? "";
    const memoryMatch = memoryWord.exec(last);
    if (words.length > 1 && memoryMatch && memory === undefined) {
      memory = `${memoryMatch[1]}GB`;
      words.pop();
      stripped = true;
    } else if (words.length > 1 && noiseWords.test(last)) {
      words.pop();
      stripped = true;
    } else if (formFactor === undefined) {
      for (const size of [2, 1]) {
        const candidate = words.length > size ? formFactorOfWords(words.slice(-size)) : undefined;
        if (candidate !== undefined) {
          formFactor = candidate;
          words.splice(-size);
          stripped = true;
          break;
        }
      }
    }
  }
  return undefined;
}

interface ParsedText {
  model: string;
  count: number | undefined;
  countText: string | undefined;
}

const countSuffixColon = /^(.*?)\s*:\s*(.*)$/;
const countSuffixTimes = /^(.+?)[\s_-]*[x×]\s*(\d+(?:\.\d+)?)$/i;
const countPrefixTimes = /^(\d+(?:\.\d+)?)\s*[x×]\s*(.+)$/i;

/** Splits a count (`A100:8`, `A100x8`, `8x A100`) off the model name. */
export function splitCount(text: string): ParsedText {
  const colon = countSuffixColon.exec(text);
  if (colon) {
    const countText = colon[2] ?? "";
    return {
      model: colon[1] ?? "",
      count: /^\d+(?:\.\d+)?$/.test(countText) ? Number(countText) : Number.NaN,
      countText,
    };
  }
  for (const [pattern, modelIndex, countIndex] of [
    [countSuffixTimes, 1, 2],
    [countPrefixTimes, 2, 1],
  ] as const) {
    const match = pattern.exec(text);
    const model = match?.[modelIndex];
    const countText = match?.[countIndex];
    // "GTX1080" must not read as "GT" × 1080: the x form counts only when the rest is a known name.
    if (model !== undefined && countText !== undefined && parseModelName(model)) {
      return { model, count: Number(countText), countText };
    }
  }
  return { model: text, count: undefined, countText: undefined };
}

function levenshtein(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, index) => index);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const substitution = (previous[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1);
      current.push(Math.min((previous[j] ?? 0) + 1, (current[j - 1] ?? 0) + 1, substitution));
    }
    previous = current;
  }
  return previous[b.length] ?? 0;
}

/** Up to `limit` catalog names closest to `text`, closest first; nothing when nothing is close. */
function closestAcceleratorNames(text: string, limit = 3): string[] {
  const key = normalizeKey(text);
  if (key.length === 0) return [];
  const best = new Map<string, number>();
  for (const [candidateKey, entry] of entriesByKey) {
    const distance =
      candidateKey.includes(key) || key.includes(candidateKey)
        ? Math.abs(candidateKey.length - key.length) / 2
        : levenshtein(key, candidateKey);
    const known = best.get(entry.name);
    if (known === undefined || distance < known) best.set(entry.name, distance);
  }
  const threshold = Math.max(2, Math.ceil(key.length / 2));
  return [...best]
    .filter(([, distance]) => distance <= threshold)
    .sort((a, b) => a[1] - b[1] || a[0].localeCompare(b[0]))
    .slice(0, limit)
    .map(([name]) => name);
}

export function unknownNameMessage(name: string): string {
  const suggestions = closestAcceleratorNames(name);
  const hint = suggestions.length > 0 ? `; did you mean ${quoted(suggestions)}?` : "";
  return `unknown accelerator ${JSON.stringify(name)}${hint}`;
}

/**
 * The canonical catalog name for an accelerator name as a provider or a person writes it, or
 * undefined when it names nothing in the catalog. Accepts everything {@link acceleratorFromName}
 * accepts and ignores the variant: `"NVIDIA A100-SXM4-80GB"` → `"A100"`, `"rtx 4090"` → `"RTX_4090"`,
 * `"H100 NVL"` → `"H100"`, `"Tesla V100-SXM2-16GB"` → `"V100"`.
 */
export function canonicalAcceleratorName(text: string): AcceleratorName | undefined {
  if (typeof text !== "string") return undefined;
  return parseModelName(splitCount(text.trim()).model)?.entry.name;
}

/**
 * The form factor an accelerator name as a provider writes it says, in the catalog's spelling, or
 * undefined when it says none, names nothing in the catalog, or names one its catalog entry has no
 * variant of (an RTX 4090 is only ever PCIe: `"GeForce RTX 4090 PCIe"` → undefined): `"H100 SXM"` →
 * `"SXM"`, `"NVIDIA A100-SXM4-80GB"` → `"SXM"`, `"NVIDIA H100 PCIe"` → `"PCIe"`, `"H100 NVL"` →
 * `"NVL"`, `"NVIDIA H100 80GB HBM3"` → undefined. For providers labelling their offers
 * (`Offer.accelerator.formFactor`).
 */
export function acceleratorFormFactor(text: string): string | undefined {
  if (typeof text !== "string") return undefined;
  const parsed = parseModelName(splitCount(text.trim()).model);
  return parsed?.formFactor !== undefined && parsed.entry.formFactors.includes(parsed.formFactor)
    ? parsed.formFactor
    : undefined;
}

/**
 * A form factor in the catalog's spelling (`"sxm5"` → `"SXM"`, `"PCIE"` → `"PCIe"`, `"nvl"` →
 * `"NVL"`), or the text itself trimmed when the catalog does not know it (a custom accelerator's);
 * undefined for nothing or blank text. Two form factors are the same when their canonical forms
 * are equal, case aside.
 */
export function canonicalFormFactor(text: string | undefined): string | undefined {
  if (typeof text !== "string" || text.trim() === "") return undefined;
  const words = text.trim().split(/[\s_-]+/);
  return formFactorOfWords(words) ?? text.trim();
}
