/**
 * Values across the boundary and task code written for the Python project, end to end on a 2-node
 * Local pool (real workers, the real Python runtime).
 */
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
// The CI rule of @skyward/testing, by path: that package depends on core, so core cannot depend on it.
import { isCi } from "../../testing/src/prerequisites.js";
import * as sky from "../src/index.js";

const tasks = fileURLToPath(new URL("./fixtures/value_tasks.py", import.meta.url));

interface Info {
  node: number;
  worker: number;
  total_nodes: number;
  is_head: boolean;
  hostname: string;
  peers: { node: number; private_ip: string; public_ip: string | null }[];
}

const operators = sky.python<[number], Record<string, unknown>>("value_tasks:operators");
const declaredTimeout = sky.python<[number], string>("value_tasks:declared_timeout");
const getInstanceInfo = sky.python<[], Info>("value_tasks:get_instance_info");
const striped = sky.python<[number], number[]>("value_tasks:striped");

describe("a 2-node local pool: in-task parity with the Python project", () => {
  let pool: sky.Pool;

  beforeAll(async () => {
    pool = await sky.compute({
      nodes: 2,
      image: { includes: [tasks] },
      options: { console: false, worker: { concurrency: 2 } },
    });
  }, 120_000);

  afterAll(async () => {
    await pool?.close();
  });

  it("runs the guide 04 task shape: a task that returns instance_info()", async () => {
    const infos = await pool.broadcast(getInstanceInfo());
    expect(infos.map((info) => info.node)).toEqual([0, 1]);
    expect(infos.map((info) => info.is_head)).toEqual([true, false]);
    for (const info of infos) {
      expect(info.total_nodes).toBe(2);
      expect(info.peers.map((peer) => peer.node)).toEqual([0, 1]);
      expect(typeof info.peers[0]?.private_ip).toBe("string");
      expect(info.hostname.length).toBeGreaterThan(0);
    }
  });

  it("dispatches pending functions from inside a task with >>, @, &, > and sky.gather", async () => {
    expect(await pool.run(operators(7))).toEqual({
      one: 49,
      every_node: [0, 1],
      group: [1, 49],
      gathered: [9, 16],
      future: 25,
    });
  });

  it("honours @sky.function(timeout=…) when the call sets none, and the call's own timeout first", async () => {
    await expect(pool.run(declaredTimeout(10))).rejects.toThrow(/timed out after 1 s/);
    expect(await pool.run(declaredTimeout(1.5).withTimeout(10))).toBe("finished");
  });

  it("shards as the Python project: striped without drop_last", async () => {
    expect(await pool.broadcast(striped(7))).toEqual([
      [0, 2, 4, 6],
      [1, 3, 5],
    ]);
  });
});

const SYSTEM_PYTHON = "/usr/bin/python3";
// Found by importing them (wherever Debian's Python finds them), never by a path; under CI a missing
// one fails the suite rather than skipping the README's headline round trips.
const missing = ["numpy", "sklearn", "torch"].filter(
  (name) => spawnSync(SYSTEM_PYTHON, ["-c", `import ${name}`]).status !== 0,
);
if (missing.length > 0 && isCi()) {
  throw new Error(
    `CI requires ${missing.join(", ")} for ${SYSTEM_PYTHON} (scripts/toolchain.sh installs Debian's packages)`,
  );
}

const makeArrays = sky.python<[], { floats: sky.NDArray<"float32">; ints: sky.NDArray<"int64"> }>(
  "value_tasks:make_arrays",
);
const describeArrays = sky.python<
  [floats: sky.NDArray, ints: sky.NDArray],
  { floats: [string, number[], number[][]]; ints: [string, number[], number[][]] }
>("value_tasks:describe_arrays");
const echoValue = sky.python<[unknown], unknown>("value_tasks:echo");
const trainModel = sky.python<[seed: number], sky.PyObject>("value_tasks:train_model");
const evaluateModel = sky.python<
  [model: sky.PyObject, seed: number],
  { type: string; score: number; coef: sky.NDArray }
>("value_tasks:evaluate_model");
const trainTorch = sky.python<[epochs: number], sky.PyObject>("value_tasks:train_torch");
const evaluateTorch = sky.python<
  [model: sky.PyObject],
  { type: string; loss: number; prediction: sky.NDArray }
>("value_tasks:evaluate_torch");

describe.skipIf(missing.length > 0)(
  `arrays and Python objects on a 2-node local pool (Debian's Python; missing: ${missing.join(", ") || "none"})`,
  () => {
    let pool: sky.Pool;

    beforeAll(async () => {
      pool = await sky.compute({
        nodes: 2,
        image: { python: SYSTEM_PYTHON, includes: [tasks] },
        options: { console: false, worker: { concurrency: 2 } },
      });
    }, 240_000);

    afterAll(async () => {
      await pool?.close();
    });

    it("brings a 2-D float32 and an int64 array back as typed arrays with dtype and shape", async () => {
      const { floats, ints } = await pool.run(makeArrays());
      expect(floats).toBeInstanceOf(sky.NDArray);
      expect([floats.dtype, floats.shape]).toEqual(["float32", [2, 3]]);
      expect(floats.data).toBeInstanceOf(Float32Array);
      expect(Array.from(floats.data)).toEqual([0, 0.5, 1, 1.5, 2, 2.5]);
      expect(floats.get(1, 2)).toBe(2.5);
      expect([ints.dtype, ints.shape]).toEqual(["int64", [2, 2]]);
      expect(ints.data).toBeInstanceOf(BigInt64Array);
      expect(Array.from(ints.data)).toEqual([1n, -2n, 3n, 2n ** 40n]);
    });

    it("sends a 2-D float32 and an int64 array to a task, where they are numpy arrays", async () => {
      const floats = sky.NDArray.of(new Float32Array([1, 2, 3, 4, 5, 6]), [3, 2]);
      const ints = new sky.NDArray(new BigInt64Array([7n, -(2n ** 40n)]), [1, 2]);
      expect(await pool.run(describeArrays(floats, ints))).toEqual({
        floats: [
          "float32",
          [3, 2],
          [
            [2, 4],
            [6, 8],
            [10, 12],
          ],
        ],
        ints: ["int64", [1, 2], [[7, -(2 ** 40)]]],
      });
      const back = (await pool.run(echoValue(floats))) as sky.NDArray<"float32">;
      expect([back.dtype, back.shape, Array.from(back.data)]).toEqual([
        "float32",
        [3, 2],
        [1, 2, 3, 4, 5, 6],
      ]);
    });

    it("returns a scikit-learn model as a handle that the next task uses as the same model", async () => {
      const model = await pool.run(trainModel(1));
      expect(model).toBeInstanceOf(sky.PyObject);
      expect(model.type).toBe("sklearn.linear_model._logistic.LogisticRegression");
      const scores = await Promise.all(
        [0, 1].map((node) => pool.run(evaluateModel(model, 1), { target: node })),
      );
      for (const result of scores) {
        expect(result.type).toBe("LogisticRegression");
        expect(result.score).toBeGreaterThan(0.8);
        expect([result.coef.dtype, result.coef.shape]).toEqual(["float64", [1, 5]]);
      }
      expect(scores[0]).toEqual(scores[1]);
    });

    it("runs the guide 15 shape: a torch module trained in one task and evaluated in the next (CPU)", async () => {
      const model = await pool.run(trainTorch(200));
      expect(model.type).toBe("torch.nn.modules.linear.Linear");
      const result = await pool.run(evaluateTorch(model));
      expect(result.type).toBe("Linear");
      expect(result.loss).toBeLessThan(1e-3);
      expect([result.prediction.dtype, result.prediction.shape]).toEqual(["float32", [8, 1]]);
    });
  },
);

interface ArrowTable {
  numRows: number;
  schema: { fields: { name: string }[] };
  getChild(name: string): { toArray(): ArrayLike<unknown>; get(index: number): unknown } | null;
}
const arrow = (await import("apache-arrow")) as unknown as {
  tableFromArrays(columns: Record<string, unknown>): ArrowTable;
};
const makeFrame = sky.python<[n: number], ArrowTable>("value_tasks:make_frame");
const describeTable = sky.python<
  [table: ArrowTable],
  { kind: string; columns: string[]; rows: number; frame: ArrowTable }
>("value_tasks:describe_table");
const makeArrowTable = sky.python<[], ArrowTable>("value_tasks:make_arrow_table");
const shardFrame = sky.python<
  [n: number, shuffle: boolean],
  { types: string[]; rows: number[]; series: number[]; expected: number[] }
>("value_tasks:shard_frame");

describe("tables on a local pool with pandas and pyarrow (pip)", () => {
  let pool: sky.Pool;

  beforeAll(async () => {
    pool = await sky.compute({
      nodes: 1,
      image: { pip: ["pandas", "pyarrow"], includes: [tasks] },
      options: { console: false },
    });
  }, 600_000);

  afterAll(async () => {
    await pool?.close();
  });

  it("brings a DataFrame back as an apache-arrow table, and sends one that arrives as a DataFrame", async () => {
    const frame = await pool.run(makeFrame(5));
    expect(frame.numRows).toBe(5);
    expect(frame.schema.fields.map((field) => field.name)).toEqual(["id", "name", "score"]);
    expect(Array.from(frame.getChild("id")!.toArray())).toEqual([0n, 1n, 2n, 3n, 4n]);
    expect(frame.getChild("name")!.get(3)).toBe("row 3");
    expect(sky.tableKind(frame)).toBe("pandas");

    const described = await pool.run(describeTable(frame));
    expect(described.kind).toBe("pandas.DataFrame");
    expect([described.columns, described.rows]).toEqual([["id", "name", "score", "double"], 5]);
    expect(Array.from(described.frame.getChild("double")!.toArray())).toEqual([0, 0.5, 1, 1.5, 2]);

    const built = arrow.tableFromArrays({ score: new Float64Array([1, 2]) });
    expect((await pool.run(describeTable(built))).kind).toBe("pandas.DataFrame");
    expect((await pool.run(describeTable(sky.asArrowTable(built)))).kind).toBe("pyarrow.Table");
  });

  it("shards a DataFrame and a Series by position, shuffled too", async () => {
    // Shuffled, a DataFrame's rows were looked up by label (frame[i] is column i: KeyError), as a
    // Series's were (its index 100…: KeyError); the slices are taken by position now.
    for (const shuffle of [false, true]) {
      const sharded = await pool.run(shardFrame(9, shuffle));
      expect(sharded.types).toEqual(["DataFrame", "Series"]);
      expect(sharded.rows).toEqual(sharded.expected);
      expect(sharded.series).toEqual(sharded.expected);
      expect(sharded.expected).toHaveLength(5);
    }
  });

  it("brings a pyarrow table back, nulls kept", async () => {
    const table = await pool.run(makeArrowTable());
    expect(sky.tableKind(table)).toBe("arrow");
    expect(Array.from(table.getChild("x")!.toArray())).toEqual([1, 2, 3]);
    expect(table.getChild("label")!.get(2)).toBeNull();
  });
});
