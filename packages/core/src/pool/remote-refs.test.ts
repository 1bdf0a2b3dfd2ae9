import { describe, expect, it } from "vitest";
import { RemoteRefError } from "../errors/errors.js";
import { decodeFrame, encodeFrame } from "../protocol/protocol.js";
import { PyObject, RefArgument, RemoteRef } from "../protocol/values.js";
import type { PendingTask } from "./python-function.js";
import { RemoteRefRegistry, remoteRefsIn } from "./remote-refs.js";

/** A registry whose pool records what it was asked to do; `pickled` answers `skyward.refs:pickled`. */
function registry() {
  const runs: { ref: string; node: number }[] = [];
  const unrefs: { node: number; ids: readonly string[] }[] = [];
  const refs = new RemoteRefRegistry({
    run: async (pending: PendingTask<unknown>, node: number) => {
      runs.push({ ref: pending.ref, node });
      return new PyObject("builtins.bytes", new Uint8Array([1, 2, 3]));
    },
    unref: (node, ids) => unrefs.push({ node, ids }),
  });
  return { refs, runs, unrefs };
}

/** The `$r` a submit carrying `args` holds, as the worker reads it. */
function wireOf(args: readonly unknown[]): unknown {
  const frame = Buffer.concat(
    encodeFrame([
      {
        t: "submit",
        id: "t",
        fn: "m:f",
        args: args as never,
        kwargs: {},
        timeout: null,
        stream: false,
        worker: null,
      },
    ]),
  );
  const header = frame.subarray(8, 8 + frame.readUInt32BE(0)).toString("utf8");
  decodeFrame(frame);
  return JSON.parse(header).at(-1).args[0];
}

/**
 * A registry moving references node to node, whose pool answers serve (node 0's peer server at
 * 10.0.0.1:4100), pull (100 bytes, or a refusal once `peerUp` is false) and pickled.
 */
function peerRegistry() {
  const runs: { ref: string; node: number; args: readonly unknown[] }[] = [];
  const notices: { message: string; node: number }[] = [];
  const peers = {
    runs,
    notices,
    peerUp: true,
    refs: new RemoteRefRegistry({
      run: async (pending: PendingTask<unknown>, node: number) => {
        runs.push({ ref: pending.ref, node, args: pending.args });
        if (pending.ref === "skyward.refs:serve") return { addr: "10.0.0.1", port: 4100 };
        if (pending.ref === "skyward.refs:pull") {
          if (!peers.peerUp) throw new Error("could not fetch r0-a from 10.0.0.1:4100: Connection refused");
          return { bytes: 100 };
        }
        return new PyObject("builtins.bytes", new Uint8Array([1, 2, 3]));
      },
      unref: () => {},
      betweenNodes: true,
      notice: (message, node) => notices.push({ message, node }),
    }),
  };
  return peers;
}

describe("remote references, the pool's side", () => {
  it("finds references in arguments, nested in arrays and plain objects, each once", () => {
    const a = new RemoteRef("r0-a", 0, "int", 28);
    const b = new RemoteRef("r1-b", 1, "int", 28);
    expect(remoteRefsIn([a, [a, { x: b }]], { k: [b] })).toEqual([a, b]);
    expect(remoteRefsIn([1, "x", new Uint8Array(2)], {})).toEqual([]);
  });

  it("tracks holders: a lost node takes its copies; a reference no node holds is lost", () => {
    const { refs } = registry();
    const ref = new RemoteRef("r0-a", 0, "bytes", 100);
    refs.adopt(ref);
    expect([ref.state, ref.nodes]).toEqual(["held", [0]]);
    refs.nodeLost(1);
    expect(ref.state).toBe("held");
    refs.nodeLost(0);
    expect(ref.state).toBe("lost");
    expect(() => refs.check(ref)).toThrow(RemoteRefError);
    expect(() => refs.check(ref)).toThrow(/r0-a \(bytes, from node 0\) is lost/);
  });

  it("brings the object to the client once for a call bound elsewhere, and carries it only where it is not held", async () => {
    const { refs, runs } = registry();
    const ref = new RemoteRef("r0-a", 0, "bytes", 100);
    refs.adopt(ref);

    const here = refs.prepare([ref], [ref], {}, 0, [0, 1], false);
    expect(here.ready).toBe(true);
    expect(runs).toEqual([]);

    const there = refs.prepare([ref], [ref], {}, 1, [0, 1], false);
    expect(there.ready).toBe(false);
    if (there.ready) return;
    const call = await there.later;
    expect(runs).toEqual([{ ref: "skyward.refs:pickled", node: 0 }]);
    const argument = call.args[0] as RefArgument;
    expect(argument).toBeInstanceOf(RefArgument);
    call.hooks.sending?.(1);
    expect(wireOf(call.args)).toEqual({
      $r: {
        id: "r0-a",
        node: 0,
        type: "bytes",
        size: 100,
        value: { $o: { type: "builtins.bytes", data: { $b: 0 } } },
      },
    });
    call.hooks.sent?.(1);
    expect(ref.nodes).toEqual([0, 1]);
    // Written after node 1 got it: the description only.
    expect(wireOf(call.args)).toEqual({ $r: { id: "r0-a", node: 0, type: "bytes", size: 100 } });
    expect(refs.stats()).toEqual({
      count: 1,
      bytes: 100,
      nodes: [
        { node: 0, count: 1, bytes: 100 },
        { node: 1, count: 1, bytes: 100 },
      ],
    });
  });

  it("keeps every key of an object beside a reference, __proto__ included (a key of JSON data)", () => {
    const { refs } = registry();
    const ref = new RemoteRef("r0-a", 0, "bytes", 100);
    refs.adopt(ref);
    const options = JSON.parse('{"__proto__": {"depth": 3}, "lr": 0.1}') as Record<string, unknown>;
    const call = refs.prepare([ref], [ref, options], {}, 0, [0, 1], false);
    expect(call.ready).toBe(true);
    if (!call.ready) return;
    const sent = call.args[1] as Record<string, unknown>;
    expect(Object.keys(sent)).toEqual(["__proto__", "lr"]);
    expect(Object.getPrototypeOf(sent)).toBe(Object.prototype);
  });

  it("releases on every holder once, and refuses later uses naming the reference", async () => {
    const { refs, unrefs } = registry();
    const ref = new RemoteRef("r0-a", 0, "bytes", 100);
    refs.adopt(ref);
    const call = refs.prepare([ref], [ref], {}, 1, [0, 1], false);
    if (!call.ready) (await call.later).hooks.sent?.(1);
    await ref.release();
    await ref.release();
    expect(unrefs).toEqual([
      { node: 0, ids: ["r0-a"] },
      { node: 1, ids: ["r0-a"] },
    ]);
    expect(refs.stats()).toEqual({ count: 0, bytes: 0, nodes: [] });
    const error = (() => {
      try {
        refs.prepare([ref], [ref], {}, undefined, [0, 1], false);
      } catch (caught) {
        return caught;
      }
    })();
    expect(RemoteRefError.isInstance(error)).toBe(true);
    expect((error as RemoteRefError).problem).toBe("released");
  });

  it("refuses a reference of another pool, and one whose pool closed", () => {
    const first = registry();
    const second = registry();
    const ref = new RemoteRef("r0-a", 0, "bytes", 100);
    first.refs.adopt(ref);
    expect(() => second.refs.check(ref)).toThrow(/belongs to another pool/);
    first.refs.closeAll();
    expect(ref.state).toBe("released");
    expect(() => first.refs.check(ref)).toThrow(/was released/);
  });

  it("moves a reference node to node for a call bound to a node, once, and through the client when the peer fails", async () => {
    const peers = peerRegistry();
    const { refs, runs, notices } = peers;
    const ref = new RemoteRef("r0-a", 0, "bytes", 100);
    refs.adopt(ref);
    const first = refs.prepare([ref], [ref], {}, 1, [0, 1, 2], false);
    const second = refs.prepare([ref], [ref], {}, 1, [0, 1, 2], false);
    if (first.ready || second.ready) throw new Error("a reference node 1 lacks must move first");
    const [call] = await Promise.all([first.later, second.later]);
    // One server asked, one pull (for both calls); the call names the reference without carrying it.
    expect(runs.map((run) => [run.ref, run.node])).toEqual([
      ["skyward.refs:serve", 0],
      ["skyward.refs:pull", 1],
    ]);
    expect(runs[1]!.args).toEqual([{ id: "r0-a", addr: "10.0.0.1", port: 4100 }]);
    call.hooks.sending?.(1);
    expect(wireOf(call.args)).toEqual({ $r: { id: "r0-a", node: 0, type: "bytes", size: 100 } });
    expect(ref.nodes).toEqual([0, 1]);
    expect([refs.peerBytes(0), refs.peerBytes(1)]).toEqual([
      { served: 100, fetched: 0 },
      { served: 0, fetched: 100 },
    ]);

    // The peer cannot be reached: said in a notice, and the object goes through the client.
    peers.peerUp = false;
    runs.length = 0;
    const third = refs.prepare([ref], [ref], {}, 2, [0, 1, 2], false);
    if (third.ready) throw new Error("a reference node 2 lacks must move first");
    const carried = await third.later;
    expect(runs.map((run) => [run.ref, run.node])).toEqual([
      ["skyward.refs:pull", 2],
      ["skyward.refs:pickled", 0],
    ]);
    expect(notices).toEqual([
      {
        node: 2,
        message:
          "remote reference r0-a could not move from node 0 to node 2 directly (could not fetch r0-a from 10.0.0.1:4100: Connection refused): it goes through the client instead",
      },
    ]);
    carried.hooks.sending?.(2);
    expect(carried.args[0]).toBeInstanceOf(RefArgument);
    expect((carried.args[0] as RefArgument).carries).toBe(true);
    expect(refs.peerBytes(2)).toEqual({ served: 0, fetched: 0 });
  });

  it("moves a reference node to node once the task manager gives an unbound call its node, once per node", async () => {
    const peers = peerRegistry();
    const { refs, runs } = peers;
    const ref = new RemoteRef("r0-a", 0, "bytes", 100);
    refs.adopt(ref);
    // Any node may run it: nothing moves before the task manager picks one.
    const first = refs.prepare([ref], [ref, { again: ref }], {}, undefined, [0, 1, 2], true);
    const second = refs.prepare([ref], [ref], {}, undefined, [0, 1, 2], true);
    if (!first.ready || !second.ready) throw new Error("an unbound call waits for no move");
    expect(runs).toEqual([]);
    // On its holder: nothing to do.
    expect(first.hooks.readying?.(0)).toBeUndefined();
    // Two calls given node 1 at once: one server asked, one pull.
    await Promise.all([first.hooks.readying?.(1), second.hooks.readying?.(1)]);
    expect(runs.map((run) => [run.ref, run.node])).toEqual([
      ["skyward.refs:serve", 0],
      ["skyward.refs:pull", 1],
    ]);
    first.hooks.sending?.(1);
    expect(wireOf(first.args)).toEqual({ $r: { id: "r0-a", node: 0, type: "bytes", size: 100 } });
    expect(ref.nodes).toEqual([0, 1]);
    expect(second.hooks.readying?.(1)).toBeUndefined();

    // The peer fails for node 2: the pickle comes through the client, and both arguments carry it.
    peers.peerUp = false;
    runs.length = 0;
    await first.hooks.readying?.(2);
    expect(runs.map((run) => [run.ref, run.node])).toEqual([
      ["skyward.refs:pull", 2],
      ["skyward.refs:pickled", 0],
    ]);
    expect(peers.notices.map((notice) => notice.node)).toEqual([2]);
    first.hooks.sending?.(2);
    const [direct, nested] = first.args as [RefArgument, { again: RefArgument }];
    expect([direct.carries, nested.again.carries]).toEqual([true, true]);
    first.hooks.sent?.(2);
    expect(ref.nodes).toEqual([0, 1, 2]);

    // Released before its node was given: the call fails naming it.
    const third = refs.prepare([ref], [ref], {}, undefined, [0, 1, 2, 3], true);
    if (!third.ready) throw new Error("an unbound call waits for no move");
    await ref.release();
    await expect(third.hooks.readying?.(3)).rejects.toThrow(/was released/);
  });
});
