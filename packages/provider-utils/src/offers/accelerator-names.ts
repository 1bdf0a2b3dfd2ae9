/**
 * A marketplace's GPU names as Skyward's accelerators: the names a provider has for a GPU (a display
 * name, a model id, a description) tried in order, for the canonical name, the memory and the form
 * factor each may say.
 */
import { acceleratorCatalog, acceleratorFormFactor, canonicalAcceleratorName } from "@skyward/core/contract";

/** An accelerator as a provider's names describe it (the count is the offer's). */
export interface NamedAccelerator {
  /** The canonical name (`"A100"`). */
  readonly name: string;
  /** Memory per GPU, GB: `memoryGb` when given, else the first `80GB`/`80G` of the names, else the catalog's default, else 0. */
  readonly memoryGb: number;
  /** The form factor the first name saying one says (`"SXM"`, `"PCIe"`). */
  readonly formFactor?: string;
}

/** The accelerator `names` describe, the first that names one winning; undefined when none does. */
export function acceleratorFromNames(
  names: readonly (string | null | undefined)[],
  memoryGb?: number,
): NamedAccelerator | undefined {
  const given = names.filter((entry): entry is string => typeof entry === "string" && entry !== "");
  const name = given.map((entry) => canonicalAcceleratorName(entry)).find((entry) => entry !== undefined);
  if (!name) return undefined;
  const stated = given.map((entry) => /(\d+)\s*G(?:B)?\b/i.exec(entry)?.[1]).find(Boolean);
  const fallback = Number.parseInt(
    acceleratorCatalog.find((entry) => entry.name === name)?.defaultMemory ?? "",
    10,
  );
  const memory = memoryGb ?? (stated ? Number(stated) : Number.isFinite(fallback) ? fallback : 0);
  const formFactor = given.map((entry) => acceleratorFormFactor(entry)).find((entry) => entry !== undefined);
  return { name, memoryGb: memory, ...(formFactor === undefined ? {} : { formFactor }) };
}
