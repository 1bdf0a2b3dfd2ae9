import { describe, expect, it } from "vitest";
import { batchDeleteOutcomes, knownMachines } from "./batch-delete.js";
import { tagsFromDescription, tagsToDescription } from "./description-tags.js";
import { machineErrorClass } from "./machine-api.js";
import { machineAdapterHalf, marketListings, readAfterCreate } from "./marketplace-machine.js";
import { deletedUnlessGone } from "./remove-unless-gone.js";

const AcmeError = machineErrorClass("acme", "AcmeApiError");
const signal = () => AbortSignal.timeout(5000);

describe("the marketplace kit", () => {
  it("a batch delete's outcome per machine: refused ones by their kind, a refusal of the whole call for each", async () => {
    const busy = new AcmeError({ kind: "busy", message: "still provisioning" });
    const refused = new AcmeError({ kind: "bad-request", message: "locked" });
    const outcomes = await batchDeleteOutcomes(["a", "b", "c", "d"], signal(), async () => [
      ["b", busy],
      ["c", new AcmeError({ kind: "gone", message: "not found" })],
      ["d", refused],
    ]);
    expect([...outcomes]).toEqual([
      ["a", "deleted"],
      ["b", "busy"],
      ["c", "gone"],
      ["d", { error: refused }],
    ]);
    const whole = await batchDeleteOutcomes(["a", "b"], signal(), async () => {
      throw busy;
    });
    expect([...whole.values()]).toEqual(["busy", "busy"]);
  });

  it("known machines: the list, then a read of each id it lacks; only 'not found' leaves one out", async () => {
    const read = async (id: string) => {
      if (id === "late") return { id };
      throw new AcmeError({ kind: id === "gone" ? "gone" : "unavailable", message: id });
    };
    const list = async () => [{ id: "listed" }];
    const known = await knownMachines(["listed", "late", "gone"], list, read, (machine) => machine.id);
    expect(known).toEqual([{ id: "listed" }, { id: "late" }]);
    await expect(knownMachines(["down"], list, read, (machine) => machine.id)).rejects.toThrow("down");
  });

  it("tags survive a description; someone else's text carries none", () => {
    const tags = { "skyward:cluster": "acme-0a1b2c3d", "skyward:pool": "p1" };
    expect(tagsToDescription(tags)).toBe("skyward skyward:cluster=acme-0a1b2c3d skyward:pool=p1");
    expect(tagsFromDescription(tagsToDescription(tags))).toEqual(tags);
    expect(tagsFromDescription("my skyward:cluster=x machine")).toEqual({});
  });

  it("asks only the markets the allocation needs, and keeps a machine whose first read failed", async () => {
    const asked: boolean[] = [];
    const list = async (spot: boolean) => {
      asked.push(spot);
      return [spot ? "spot" : "on-demand"];
    };
    expect(await marketListings({ allocation: "spot" }, list, [])).toEqual({ onDemand: [], spot: ["spot"] });
    expect(await marketListings({ allocation: "on-demand" }, list, [])).toEqual({
      onDemand: ["on-demand"],
      spot: [],
    });
    expect(asked).toEqual([true, false]);
    const failed = Promise.reject(new AcmeError({ kind: "gone", message: "not yet" }));
    expect(await readAfterCreate(failed, () => ({ id: "new" }), signal())).toEqual({ id: "new" });
    const aborted = AbortSignal.abort();
    await expect(
      readAfterCreate(Promise.reject(new Error("read")), () => ({ id: "x" }), aborted),
    ).rejects.toThrow("read");
  });

  it("the shared fields log in as root, and a worker's self-destruct deletes through the API unless a stand-in is set", () => {
    const { fields } = machineAdapterHalf({
      name: "acme",
      label: "Acme",
      settings: { retryDelayMs: 10 },
      addressOf: () => undefined,
    });
    expect(fields).toMatchObject({
      sshUser: "root",
      keyName: "acme_ed25519",
      clusterIdPrefix: "acme",
      deleteRetryDelayMs: 50,
    });
    expect(fields.capabilities.peerNetwork).toBe("none");
    const instance = { id: "i-1" } as Parameters<typeof fields.selfDestruct>[0];
    expect(fields.selfDestruct(instance, undefined as never).replaceAll("'", "")).toBe(
      "/usr/local/sbin/skyward-self-destruct i-1",
    );
  });

  it("logs in as the settings' sshUser", () => {
    const half = machineAdapterHalf({
      name: "acme",
      label: "Acme",
      settings: {
        retryDelayMs: 10,
        sshUser: "ubuntu",
        sshAddress: (address: { ip: string }) => ({ host: "10.9.0.2", port: 2222, privateIp: address.ip }),
      },
      addressOf: () => undefined,
    });
    expect(half.fields.sshUser).toBe("ubuntu");
  });

  it("a delete of what a pool made counts one the API no longer knows as not there, and throws any other refusal", async () => {
    expect(await deletedUnlessGone(Promise.resolve(undefined))).toBe(true);
    expect(
      await deletedUnlessGone(Promise.reject(new AcmeError({ kind: "gone", message: "no such key" }))),
    ).toBe(false);
    const locked = new AcmeError({ kind: "busy", message: "environment holds VMs" });
    await expect(deletedUnlessGone(Promise.reject(locked))).rejects.toBe(locked);
  });
});
