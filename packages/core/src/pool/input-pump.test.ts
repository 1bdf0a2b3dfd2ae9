import { describe, expect, it } from "vitest";
import { InputPump } from "./input-pump.js";

type Sent = { t: string; value?: unknown; message?: string };

/** The unhandled rejections seen while `run` runs and a turn of the event loop after it (Node reports them between turns). */
async function unhandledRejections(run: () => Promise<void>): Promise<unknown[]> {
  const seen: unknown[] = [];
  const onRejection = (reason: unknown) => seen.push(reason);
  process.on("unhandledRejection", onRejection);
  try {
    await run();
    await new Promise((resolve) => setImmediate(resolve));
  } finally {
    process.off("unhandledRejection", onRejection);
  }
  return seen;
}

describe("InputPump: a task's streamed argument", () => {
  it("sends what the worker grants, then the end", async () => {
    const sent: Sent[] = [];
    const pump = new InputPump([1, 2, 3], (message) => sent.push(message));
    pump.grant(2);
    await expect
      .poll(() => sent)
      .toEqual([
        { t: "in", value: 1 },
        { t: "in", value: 2 },
      ]);
    pump.grant(5);
    await expect.poll(() => sent.at(-1)).toEqual({ t: "in_end" });
    expect(sent.map((message) => message.value ?? message.t)).toEqual([1, 2, 3, "in_end"]);
  });

  it("closes a source the task did not read to its end, and a failing close fails nothing", async () => {
    let closed = false;
    const disconnect = async () => {
      closed = true;
      throw new Error("the source's own cleanup failed");
    };
    async function* source() {
      try {
        yield 1;
        yield 2;
      } finally {
        await disconnect();
      }
    }
    const sent: Sent[] = [];
    const pump = new InputPump(source(), (message) => sent.push(message));
    pump.grant(1);
    await expect.poll(() => sent).toEqual([{ t: "in", value: 1 }]);
    const seen = await unhandledRejections(async () => {
      pump.close(); // the task ended having read one item
      await expect.poll(() => closed).toBe(true);
    });
    expect(seen).toEqual([]);
  });
});
