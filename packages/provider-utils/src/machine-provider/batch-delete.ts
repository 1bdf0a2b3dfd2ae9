/**
 * What a batch delete did to each machine, read once for every API that deletes several machines in
 * one call and answers per machine (Verda's 207): every machine asked is deleted unless the answer
 * names it with an error; a refusal of the whole call counts for each; an error of kind `gone` or
 * `busy` becomes that outcome (the base counts it gone, or asks again).
 */
import type { MachineDeleteOutcome } from "./adapter.js";
import { machineErrorKind } from "./errors.js";

/** The outcome per id of `send`, which resolves with the machines the API refused, each with its classified error. */
export async function batchDeleteOutcomes(
  ids: readonly string[],
  signal: AbortSignal,
  send: () => Promise<Iterable<readonly [id: string, error: unknown]>>,
): Promise<Map<string, MachineDeleteOutcome>> {
  const outcomes = new Map<string, MachineDeleteOutcome>(ids.map((id) => [id, "deleted"]));
  const settle = (id: string, error: unknown) => {
    const kind = machineErrorKind(error);
    outcomes.set(id, kind === "gone" || kind === "busy" ? kind : { error });
  };
  try {
    for (const [id, error] of await send()) settle(id, error);
  } catch (error) {
    if (signal.aborted) throw signal.reason;
    for (const id of ids) settle(id, error);
  }
  return outcomes;
}

/**
 * The machines of `ids` the API knows, for a delete that needs more than their ids (their volumes):
 * one list, then a read of each id the list lacks (a list a moment behind a create); only the API's
 * "not found" leaves a machine out.
 */
export async function knownMachines<Machine>(
  ids: readonly string[],
  list: () => Promise<readonly Machine[]>,
  read: (id: string) => Promise<Machine>,
  idOf: (machine: Machine) => string,
): Promise<Machine[]> {
  const listed = new Map((await list()).map((machine) => [idOf(machine), machine]));
  const known: Machine[] = [];
  for (const id of ids) {
    try {
      const machine = listed.get(id) ?? (await read(id));
      known.push(machine);
    } catch (error) {
      if (machineErrorKind(error) !== "gone") throw error;
    }
  }
  return known;
}
