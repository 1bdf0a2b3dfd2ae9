/**
 * Deleting what a pool made beside its machines (a key, a script, an environment) where the API may
 * have removed it already: one it no longer knows (`gone`) is not an error, and says it was not there.
 */
import { machineErrorKind } from "./errors.js";
import type { MachineJsonClient } from "./machine-api.js";

/** `DELETE path`: true when deleted, false when the API no longer knew it; its error otherwise. */
export function removeUnlessGone(
  client: MachineJsonClient,
  path: string,
  purpose: string,
  signal: AbortSignal,
): Promise<boolean> {
  return deletedUnlessGone(client.remove("delete", path, purpose, signal));
}

/** A delete's call (a declared endpoint's): true when done, false when the API no longer knew it; its error otherwise. */
export async function deletedUnlessGone(removal: Promise<unknown>): Promise<boolean> {
  try {
    await removal;
    return true;
  } catch (error) {
    if (machineErrorKind(error) === "gone") return false;
    throw error;
  }
}
