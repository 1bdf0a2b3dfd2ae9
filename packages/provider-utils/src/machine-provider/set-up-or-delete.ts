/**
 * A machine made but unusable — a setup step after its create failed (a key not attached) — is deleted
 * rather than left billing, and the step's error thrown. When the delete fails too, the error
 * `stranded` makes says so (of a kind the base does not retry: a retry would find this unusable
 * machine by its name); an abort is thrown as it is.
 */
import type { MachineAdapter, MachineClusterData } from "./adapter.js";
import { deleteUntilGone } from "./machine-operations.js";

/** Runs `step` on the machine `id` just made; see the module comment. */
export async function setUpOrDelete<Machine, ClusterData extends MachineClusterData>(
  adapter: MachineAdapter<Machine, ClusterData>,
  id: string,
  step: () => Promise<unknown>,
  signal: AbortSignal,
  stranded: (stepError: Error, deleteError: Error) => Error,
): Promise<void> {
  try {
    await step();
  } catch (error) {
    await deleteUntilGone(adapter, [id], signal).catch((deleteError: unknown) => {
      if (signal.aborted) throw signal.reason;
      throw stranded(error as Error, deleteError as Error);
    });
    throw error;
  }
}
