import { describe, expect, it } from "vitest";
import { z } from "zod";
import { pricedOffer } from "../offers/machine-offer.js";
import { SKYWARD_TAGS } from "../tags.js";
import { answerNumbers, answerTexts } from "./answer-fields.js";
import { standInSeam } from "./machine-instance.js";
import { mappedMachine } from "./machine-mapping.js";

interface AcmeMachine {
  readonly id: string;
  readonly status: string;
  readonly label?: string;
  readonly ip?: string;
  readonly price?: number;
  readonly spot?: boolean;
}

function acme(seam?: (address: { id: string; ip: string }) => { host: string; port: number }) {
  const standIns = standInSeam(seam, () => undefined);
  return mappedMachine<AcmeMachine, { id: string; ip: string }>(standIns, {
    statuses: { running: ["Active"], terminated: ["gone"], stopping: ["Deleting"] },
    deleting: ["deleting"],
    name: (machine) => machine.label,
    nameTag: "acme:label",
    tags: (machine): Record<string, string> =>
      machine.label ? { "skyward:cluster": machine.label.slice(0, 16) } : {},
    address: (machine) => (machine.ip ? { host: machine.ip, port: 2222 } : undefined),
    seamAddress: (id, address) => ({ id, ip: address.host }),
    spot: (machine) => machine.spot === true,
    hourlyPrice: (machine) => machine.price,
    createdAt: () => "2026-01-02T03:04:05Z",
  });
}

describe("a machine mapping", () => {
  it("describes a running machine from its fields, with its tags and its name as a tag", () => {
    const machine = {
      id: "m1",
      status: "ACTIVE",
      label: "skyward-0a1b2c3d-0",
      ip: "198.51.100.4",
      price: 1.5,
    };
    const instance = acme().describe(machine, { identityFile: "/keys/acme" });
    expect(instance).toMatchObject({
      id: "m1",
      status: "running",
      publicIp: "198.51.100.4",
      ssh: { host: "198.51.100.4", port: 2222, user: "root", identityFile: "/keys/acme" },
      spot: false,
      hourlyPrice: 1.5,
      createdAt: Date.parse("2026-01-02T03:04:05Z"),
      tags: { "skyward:cluster": "skyward-0a1b2c3d", "acme:label": "skyward-0a1b2c3d-0" },
    });
  });

  it("a machine without an address is pending; unknown words are pending; no price is null", () => {
    const mapped = acme();
    expect(mapped.describe({ id: "m2", status: "active" }, { identityFile: undefined })).toMatchObject({
      status: "pending",
      ssh: null,
      hourlyPrice: null,
    });
    expect(mapped.statusOf("booting")).toBe("pending");
    expect(mapped.statusOf("gone")).toBe("terminated");
  });

  it("puts the seam's stand-in in the machine's place, asked with the seam's address", () => {
    const asked: unknown[] = [];
    const mapped = acme((address) => {
      asked.push(address);
      return { host: "10.0.0.9", port: 22 };
    });
    const instance = mapped.describe(
      { id: "m3", status: "active", ip: "198.51.100.5" },
      { identityFile: "/k" },
    );
    expect(instance.ssh).toMatchObject({ host: "10.0.0.9", port: 22 });
    expect(asked).toEqual([{ id: "m3", ip: "198.51.100.5" }]);
  });

  it("names machines <cluster>-<index>, knows a machine being deleted, and the clusters still live", () => {
    const mapped = acme();
    expect(mapped.tags.name({ id: "skyward-0a1b2c3d", poolId: "p" }, 3)).toBe("skyward-0a1b2c3d-3");
    expect(mapped.tags.nameOf({ id: "m", status: "x", label: "" })).toBeUndefined();
    expect(mapped.tags.read({ id: "m", status: "x" })).toEqual({});
    expect(mapped.isBeingDeleted?.({ id: "m", status: "Deleting" })).toBe(true);
    expect(mapped.isBeingDeleted?.({ id: "m", status: "active" })).toBe(false);
    const machines = [
      { id: "a", status: "active", label: "skyward-0a1b2c3d-0" },
      { id: "b", status: "gone", label: "skyward-1a1b2c3d-0" },
      { id: "c", status: "booting" },
    ];
    expect([...mapped.liveClusters(machines)]).toEqual(["skyward-0a1b2c3d"]);
  });

  it("reads a machine's name from its `name` field when the mapping says not where it is", () => {
    const mapped = mappedMachine(
      standInSeam(undefined, () => undefined),
      {
        statuses: {},
        deleting: [],
        nameTag: "acme:name",
        tags: (): Record<string, string> => ({}),
        address: () => undefined,
        seamAddress: (id) => ({ id }),
      },
    );
    const machine = { id: 7, status: "booting", name: "skyward-0a1b2c3d-1" };
    expect(mapped.tags.nameOf(machine)).toBe("skyward-0a1b2c3d-1");
    expect(mapped.tags.read(machine)).toEqual({ "acme:name": "skyward-0a1b2c3d-1" });
    expect(mapped.tags.nameOf({ id: 8, name: "" })).toBeUndefined();
  });
});

describe("a machine mapping's own rules", () => {
  interface VmMachine {
    readonly id: number;
    readonly status?: string | null;
    readonly ip?: string;
    readonly fixedIp?: string;
    readonly settling?: boolean;
  }
  type Seam = (address: { id: string; ip: string; fixedIp: string | null }) => {
    host: string;
    port: number;
    privateIp?: string;
  };

  function vm(seam?: Seam) {
    const standIns = standInSeam(seam, () => undefined);
    return mappedMachine(standIns, {
      statuses: { running: ["active"] },
      status: (machine: VmMachine, byWord) => (byWord === "running" && machine.settling ? "pending" : byWord),
      deleting: [],
      name: () => undefined,
      tags: (): Record<string, string> => ({ "skyward:price": "0.5" }),
      address: (machine) => (machine.ip ? { host: machine.ip, port: 22 } : undefined),
      seamAddress: (id, { host }, machine) => ({ id, ip: host, fixedIp: machine.fixedIp ?? null }),
      publicIp: (machine, status) => (status === "running" ? (machine.ip ?? null) : null),
      privateIp: (machine, standIn, publicIp) => standIn?.privateIp ?? machine.fixedIp ?? publicIp,
      spot: () => false,
      hourlyPrice: (_machine, tags) => Number(tags["skyward:price"]),
      createdAt: () => 1_000,
      user: "ubuntu",
      root: "/srv/{id}",
    });
  }

  it("reports a numeric id as text, refines the word's status, and takes the price from the tags", () => {
    const machine = { id: 42, status: "ACTIVE", ip: "198.51.100.7", fixedIp: "10.1.0.7" };
    expect(vm().describe(machine, { identityFile: undefined })).toMatchObject({
      id: "42",
      status: "running",
      publicIp: "198.51.100.7",
      privateIp: "10.1.0.7",
      ssh: { host: "198.51.100.7", port: 22, user: "ubuntu", root: "/srv/42" },
      hourlyPrice: 0.5,
      createdAt: 1_000,
      tags: { "skyward:price": "0.5" },
    });
    const settling = vm().describe({ ...machine, settling: true }, { identityFile: undefined });
    expect(settling).toMatchObject({ status: "pending", publicIp: null, privateIp: "10.1.0.7", ssh: null });
  });

  it("asks the seam with the machine's fields and lets the stand-in say the private address", () => {
    const asked: unknown[] = [];
    const mapped = vm((address) => {
      asked.push(address);
      return { host: "127.0.0.1", port: 2022, privateIp: "10.9.9.9" };
    });
    const instance = mapped.describe(
      { id: 7, status: "active", ip: "198.51.100.8", fixedIp: "10.1.0.8" },
      { identityFile: "/k" },
    );
    expect(instance).toMatchObject({ privateIp: "10.9.9.9", ssh: { host: "127.0.0.1", port: 2022 } });
    expect(asked).toEqual([{ id: "7", ip: "198.51.100.8", fixedIp: "10.1.0.8" }]);
    expect(mapped.isBeingDeleted?.({ id: 7, status: null })).toBe(false);
    expect([...mapped.liveClusters([{ id: 7, status: "active" }])]).toEqual([]);
  });
});

describe("a machine mapping's defaults", () => {
  it("reads spot and the hourly price from the tags, and dates a machine without a date now", () => {
    const mapped = mappedMachine(
      standInSeam(undefined, () => undefined),
      {
        statuses: { running: ["up"] },
        deleting: [],
        name: () => undefined,
        tags: (machine: { id: string; status: string; spot: string }) => ({
          "skyward:spot": machine.spot,
          [SKYWARD_TAGS.hourlyPrice]: "0.25",
        }),
        address: () => undefined,
        seamAddress: (id) => ({ id }),
      },
    );
    const before = Date.now();
    const spot = mapped.describe({ id: "s", status: "up", spot: "1" }, { identityFile: undefined });
    expect(spot).toMatchObject({ spot: true, hourlyPrice: 0.25 });
    expect(spot.createdAt).toBeGreaterThanOrEqual(before);
    expect(mapped.describe({ id: "o", status: "up", spot: "0" }, { identityFile: undefined }).spot).toBe(
      false,
    );
  });
});

describe("a machine whose status word has another name", () => {
  it("reads the status and the deleting test from the word `statusWord` gives", () => {
    const mapped = mappedMachine(
      standInSeam(undefined, () => undefined),
      {
        statuses: { running: ["up"], stopping: ["going"] },
        statusWord: (machine: { id: number; state: string }) => machine.state,
        deleting: ["going"],
        name: () => undefined,
        tags: () => ({}),
        address: () => ({ host: "198.51.100.9", port: 22 }),
        seamAddress: () => undefined,
        spot: () => false,
        hourlyPrice: () => null,
        createdAt: () => null,
      },
    );
    expect(mapped.describe({ id: 1, state: "UP" }, { identityFile: undefined }).status).toBe("running");
    expect(mapped.describe({ id: 1, state: "going" }, { identityFile: undefined }).status).toBe("stopping");
    expect(mapped.isBeingDeleted?.({ id: 1, state: "Going" })).toBe(true);
    expect(mapped.isBeingDeleted?.({ id: 1, state: "up" })).toBe(false);
  });
});

describe("answer fields and priced offers", () => {
  it("numbers as numbers or numeric strings, texts that may be null; a field that is neither fails", () => {
    const schema = z.object({ ...answerNumbers("price", "cores"), ...answerTexts("name") });
    expect(schema.parse({ price: "1.25", cores: 8, name: null })).toEqual({
      price: 1.25,
      cores: 8,
      name: null,
    });
    expect(schema.parse({ price: "n/a" })).toEqual({ price: null });
    expect(schema.safeParse({ name: 3 }).success).toBe(false);
  });

  it("an offer with no price on either market is none", () => {
    const facts = {
      id: "acme:1",
      provider: "acme",
      instanceType: "a1",
      accelerator: null,
      vcpus: 2,
      memoryGb: 4,
      region: "r",
      specific: {},
    };
    expect(pricedOffer({ ...facts, spotPrice: null, onDemandPrice: null })).toEqual([]);
    expect(pricedOffer({ ...facts, spotPrice: 0.5, onDemandPrice: null })).toMatchObject([
      { spotPrice: 0.5 },
    ]);
  });
});
