import { describe, expect, it } from "vitest";
import type { MachineAdapter } from "./adapter.js";
import { setUpOrDelete } from "./set-up-or-delete.js";

const signal = new AbortController().signal;

/** An adapter whose deletes are recorded, and refused when `refuse` is set. */
function deleting(refuse?: Error) {
  const deleted: string[] = [];
  const adapter = {
    deleteRetryDelayMs: 1,
    deleteTimeoutMs: 50,
    delete: {
      one: async (id: string) => {
        if (refuse) throw refuse;
        deleted.push(id);
      },
    },
  } as unknown as MachineAdapter<{ id: string }>;
  return { adapter, deleted };
}

describe("setUpOrDelete", () => {
  const stranded = (stepError: Error, deleteError: Error) =>
    new Error(`stranded: ${stepError.message} / ${deleteError.message}`);

  it("leaves a machine whose setup worked", async () => {
    const { adapter, deleted } = deleting();
    await setUpOrDelete(adapter, "m-1", async () => "ok", signal, stranded);
    expect(deleted).toEqual([]);
  });

  it("deletes a machine whose setup failed, and throws the setup's error", async () => {
    const { adapter, deleted } = deleting();
    const failed = new Error("no key");
    await expect(
      setUpOrDelete(adapter, "m-1", async () => Promise.reject(failed), signal, stranded),
    ).rejects.toBe(failed);
    expect(deleted).toEqual(["m-1"]);
  });

  it("says the machine is stranded when the delete fails too", async () => {
    const { adapter } = deleting(new Error("delete refused"));
    const failed = new Error("no key");
    await expect(
      setUpOrDelete(adapter, "m-1", async () => Promise.reject(failed), signal, stranded),
    ).rejects.toThrow(/^stranded: no key \/ .*delete refused/);
  });
});
