/**
 * Values beyond JSON (see docs/protocol.md, _Values_): n-dimensional arrays (`$a`), Arrow tables
 * (`$t`) and opaque Python objects (`$o`).
 */
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

/** The element types an {@link NDArray} can hold (numpy's names). */
export type DType =
  | "bool"
  | "int8"
  | "uint8"
  | "int16"
  | "uint16"
  | "int32"
  | "uint32"
  | "int64"
  | "uint64"
  | "float16"
  | "float32"
  | "float64";

/** The typed array holding the elements of each {@link DType} (`float16` as raw `Uint16Array` bits, `bool` as `Uint8Array` 0/1). */
export interface DTypeArrays {
  bool: Uint8Array;
  int8: Int8Array;
  uint8: Uint8Array;
  int16: Int16Array;
  uint16: Uint16Array;
  int32: Int32Array;
  uint32: Uint32Array;
  int64: BigInt64Array;
  uint64: BigUint64Array;
  float16: Uint16Array;
  float32: Float32Array;
  float64: Float64Array;
}

/** Any typed array an {@link NDArray} can hold. */
export type TypedArray = DTypeArrays[DType];

/** The dtype a typed array stands for (a `Uint8Array` is `uint8`, a `Uint16Array` `uint16`). */
export type DTypeOf<T extends TypedArray> = T extends Float32Array
  ? "float32"
  : T extends Float64Array
    ? "float64"
    : T extends BigInt64Array
      ? "int64"
      : T extends BigUint64Array
        ? "uint64"
        : T extends Int32Array
          ? "int32"
          : T extends Uint32Array
            ? "uint32"
            : T extends Int16Array
              ? "int16"
              : T extends Uint16Array
                ? "uint16"
                : T extends Int8Array
                  ? "int8"
                  : "uint8";

type TypedArrayMaker = {
  new (buffer: ArrayBufferLike, byteOffset: number, length: number): TypedArray;
  new (length: number): TypedArray;
  BYTES_PER_ELEMENT: number;
};

const MAKERS: Record<DType, TypedArrayMaker> = {
  bool: Uint8Array,
  int8: Int8Array,
  uint8: Uint8Array,
  int16: Int16Array,
  uint16: Uint16Array,
  int32: Int32Array,
  uint32: Uint32Array,
  int64: BigInt64Array,
  uint64: BigUint64Array,
  float16: Uint16Array,
  float32: Float32Array,
  float64: Float64Array,
} as unknown as Record<DType, TypedArrayMaker>;

function dtypeOf(data: TypedArray): DType {
  if (data instanceof Float32Array) return "float32";
  if (data instanceof Float64Array) return "float64";
  if (data instanceof BigInt64Array) return "int64";
  if (data instanceof BigUint64Array) return "uint64";
  if (data instanceof Int32Array) return "int32";
  if (data instanceof Uint32Array) return "uint32";
  if (data instanceof Int16Array) return "int16";
  if (data instanceof Uint16Array) return "uint16";
  if (data instanceof Int8Array) return "int8";
  return "uint8";
}

/**
 * An n-dimensional array: a numpy array (or a CPU torch tensor) from a task, and what a task
 * receives as a numpy array. Elements are in C (row-major) order in `data`; `shape` gives the
 * dimensions. It crosses the wire as its raw buffer, never as a JSON list.
 *
 * ```ts
 * import * as sky from "@skyward/core";
 *
 * const matrix = new sky.NDArray<"float32">(new Float32Array([1, 2, 3, 4, 5, 6]), [2, 3]);
 * matrix.get(1, 2); // 6
 * ```
 */
export class NDArray<D extends DType = DType> {
  /** The element type (numpy's name). */
  readonly dtype: D;
  /** The dimensions; `[]` for a 0-d array of one element. */
  readonly shape: readonly number[];
  /** The elements in C order. */
  readonly data: DTypeArrays[D];

  /**
   * @param data the elements in C order; its type gives the dtype unless `dtype` is given.
   * @param shape the dimensions (default: one dimension of `data.length`).
   * @param dtype `"bool"` or `"float16"` for data held in a `Uint8Array`/`Uint16Array`.
   */
  constructor(data: DTypeArrays[D], shape?: readonly number[], dtype?: D) {
    const kind = (dtype ?? dtypeOf(data)) as D;
    if (!(data instanceof MAKERS[kind])) {
      throw new TypeError(
        `NDArray: dtype "${kind}" needs a ${MAKERS[kind].name}, not a ${data.constructor.name}`,
      );
    }
    const dims = shape ?? [data.length];
    let count = 1;
    for (const n of dims) {
      if (!Number.isSafeInteger(n) || n < 0)
        throw new TypeError(`NDArray: shape ${JSON.stringify(dims)} is not a list of sizes`);
      count *= n;
    }
    if (count !== data.length) {
      throw new TypeError(
        `NDArray: shape ${JSON.stringify(dims)} holds ${count} elements, data has ${data.length}`,
      );
    }
    this.dtype = kind;
    this.shape = Object.freeze([...dims]);
    this.data = data;
  }

  /**
   * An array of `data`, its dtype that of the typed array (typed as such:
   * `NDArray.of(new Float32Array(6), [2, 3])` is an `NDArray<"float32">`).
   */
  static of<T extends TypedArray>(data: T, shape?: readonly number[]): NDArray<DTypeOf<T>> {
    return new NDArray(data as unknown as DTypeArrays[DTypeOf<T>], shape);
  }

  /** The number of elements. */
  get size(): number {
    return this.data.length;
  }

  /** The element at these indices (one per dimension). */
  get(...indices: number[]): DTypeArrays[D][number] {
    if (indices.length !== this.shape.length) {
      throw new RangeError(`NDArray.get: ${indices.length} indices for ${this.shape.length} dimensions`);
    }
    let offset = 0;
    for (let axis = 0; axis < indices.length; axis++) {
      const index = indices[axis]!;
      const size = this.shape[axis]!;
      if (!Number.isInteger(index) || index < 0 || index >= size) {
        throw new RangeError(`NDArray.get: index ${index} is out of range for axis ${axis} of size ${size}`);
      }
      offset = offset * size + index;
    }
    return this.data[offset] as DTypeArrays[D][number];
  }
}

/**
 * A Python object a task returned that has no TypeScript form (a scikit-learn model, a torch
 * module…): an opaque handle holding its pickle. Pass it to any later task of the pool, where it
 * arrives as the same object. Its bytes are never unpickled in TypeScript.
 */
export class PyObject {
  /** The object's Python type, `module.Qualname`. */
  readonly type: string;
  /** Its pickle (cloudpickle when the worker has it). */
  readonly bytes: Uint8Array;

  /** @internal made by the protocol decoder */
  constructor(type: string, bytes: Uint8Array) {
    this.type = type;
    this.bytes = bytes;
  }

  /** Its size in bytes. */
  get byteLength(): number {
    return this.bytes.byteLength;
  }
}

/** Where a table came from in Python, and what it becomes there again. */
export type TableKind = "pandas" | "arrow";

const tableKinds = new WeakMap<object, TableKind>();

/** What a table passed to a task becomes there: a pandas DataFrame (the default) or a pyarrow table. */
export function tableKind(table: object): TableKind {
  return tableKinds.get(table) ?? "pandas";
}

/**
 * Marks an `apache-arrow` table to arrive in Python as a pyarrow `Table` instead of a pandas
 * `DataFrame`; returns the table.
 */
export function asArrowTable<T extends object>(table: T): T {
  tableKinds.set(table, "arrow");
  return table;
}

interface ArrowModule {
  tableFromIPC(input: Uint8Array): object;
  tableToIPC(table: object, type: "stream"): Uint8Array;
  Table: new (...args: never[]) => object;
}

let arrow: ArrowModule | undefined;

/** `apache-arrow`, loaded the first time a table crosses the boundary. */
export function loadArrow(): ArrowModule {
  if (arrow !== undefined) return arrow;
  const require = createRequire(import.meta.url);
  try {
    // Its ES module build, loaded synchronously: the same module instance as the application's
    // `import ... from "apache-arrow"` (its CommonJS build would be a second copy, whose tables
    // the first copy's writer does not recognise).
    let esm: string | undefined;
    try {
      esm = fileURLToPath(import.meta.resolve("apache-arrow"));
    } catch {
      esm = undefined;
    }
    arrow = (esm?.endsWith(".mjs") ? require(esm) : require("apache-arrow")) as ArrowModule;
  } catch (error) {
    throw new Error(
      `a table crossed the boundary but the optional peer dependency "apache-arrow" is not installed: add it to your project (pnpm add apache-arrow) (${(error as Error).message})`,
    );
  }
  return arrow;
}

/** Whether `value` is an `apache-arrow` `Table` (without loading the package when it is not loaded). */
export function isArrowTable(value: object): boolean {
  if (arrow !== undefined && value instanceof arrow.Table) return true;
  const maker = (Object.getPrototypeOf(value) as { constructor?: { name?: string } } | null)?.constructor;
  // Duck-typed, so a table of another copy of apache-arrow is one too.
  return maker?.name === "Table" && "schema" in value && "batches" in value;
}

/**
 * Stands for a table that arrived while `apache-arrow` is missing: awaiting it (a task's result is)
 * or touching it throws the error naming the package. The connection carries on.
 */
function missingTable(error: Error): object {
  const fail = (): never => {
    throw error;
  };
  return new Proxy(Object.create(null) as object, {
    get: fail,
    has: fail,
    ownKeys: fail,
    getPrototypeOf: fail,
  });
}

const isPlain = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value);

/** Decodes `$a`'s content; `segment` resolves `{"$b": i}`. Throws a message for a protocol error. */
export function decodeArray(content: unknown, segment: (ref: unknown) => Uint8Array): NDArray {
  if (!isPlain(content) || !("dtype" in content) || !("shape" in content) || !("data" in content)) {
    throw new Error('$a must hold {"dtype", "shape", "data"}');
  }
  const { dtype, shape } = content;
  if (typeof dtype !== "string" || !(dtype in MAKERS))
    throw new Error(`$a dtype ${JSON.stringify(dtype)} is not known`);
  if (!Array.isArray(shape) || shape.some((n) => !Number.isSafeInteger(n) || n < 0)) {
    throw new Error("$a shape must be a list of non-negative integers");
  }
  const maker = MAKERS[dtype as DType];
  const bytes = segment(content.data);
  let count = 1;
  for (const n of shape as number[]) count *= n;
  if (bytes.byteLength !== count * maker.BYTES_PER_ELEMENT) {
    throw new Error(
      `$a of shape ${JSON.stringify(shape)} and dtype ${dtype} needs ${count * maker.BYTES_PER_ELEMENT} bytes, not ${bytes.byteLength}`,
    );
  }
  // A view of the frame's body when it is aligned for the element type, else one aligned copy.
  const aligned = bytes.byteOffset % maker.BYTES_PER_ELEMENT === 0 ? bytes : bytes.slice();
  const data = new maker(aligned.buffer, aligned.byteOffset, count);
  return new NDArray(data as DTypeArrays[DType], shape as number[], dtype as DType);
}

/**
 * The array a value stands for: a typed array as one dimension, a `Float16Array`'s bits as
 * `float16` (held as `Uint16Array`), a `Uint8ClampedArray` as `uint8`.
 */
function asNDArray(value: NDArray | TypedArray | Float16Array | Uint8ClampedArray): NDArray {
  if (value instanceof NDArray) return value;
  if (value instanceof Float16Array)
    return new NDArray(new Uint16Array(value.buffer, value.byteOffset, value.length), undefined, "float16");
  if (value instanceof Uint8ClampedArray)
    return new NDArray(new Uint8Array(value.buffer, value.byteOffset, value.length), undefined, "uint8");
  return new NDArray(value);
}

/** Encodes an {@link NDArray} (or a typed array other than `Uint8Array`, as one dimension). */
export function encodeNDArray(
  value: NDArray | TypedArray | Float16Array | Uint8ClampedArray,
  addSegment: (bytes: Uint8Array) => number,
): unknown {
  const array = asNDArray(value);
  const data = array.data;
  const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  return { $a: { dtype: array.dtype, shape: array.shape, data: { $b: addSegment(bytes) } } };
}

/** Decodes `$t`'s content to an `apache-arrow` `Table`. */
export function decodeTable(content: unknown, segment: (ref: unknown) => Uint8Array): object {
  if (
    !isPlain(content) ||
    content.format !== "arrow" ||
    (content.kind !== "pandas" && content.kind !== "arrow")
  ) {
    throw new Error('$t must hold {"format": "arrow", "kind": "pandas" | "arrow", "data"}');
  }
  const data = segment(content.data);
  let module: ArrowModule;
  try {
    module = loadArrow();
  } catch (error) {
    return missingTable(error as Error);
  }
  const table = module.tableFromIPC(data);
  tableKinds.set(table, content.kind);
  return table;
}

/** Encodes an `apache-arrow` `Table` as an Arrow IPC stream. */
export function encodeArrowTable(table: object, addSegment: (bytes: Uint8Array) => number): unknown {
  const bytes = loadArrow().tableToIPC(table, "stream");
  return { $t: { format: "arrow", kind: tableKind(table), data: { $b: addSegment(bytes) } } };
}

/** Decodes `$o`'s content to a {@link PyObject} handle. */
export function decodeObject(content: unknown, segment: (ref: unknown) => Uint8Array): PyObject {
  if (!isPlain(content) || typeof content.type !== "string") {
    throw new Error('$o must hold {"type": "module.Qualname", "data": {"$b": i}}');
  }
  return new PyObject(content.type, segment(content.data));
}

/** Encodes a {@link PyObject} handle as it came. */
export function encodePyObject(handle: PyObject, addSegment: (bytes: Uint8Array) => number): unknown {
  return { $o: { type: handle.type, data: { $b: addSegment(handle.bytes) } } };
}

/** What a pool does for the remote references it made (see {@link RemoteRef}). */
export interface RemoteRefOwner {
  /** The kept value, brought to the client. */
  fetch(ref: RemoteRef, options?: { signal?: AbortSignal }): Promise<unknown>;
  /** Frees it on every node holding it. */
  release(ref: RemoteRef): Promise<void>;
  /** Whether it can still be used. */
  state(ref: RemoteRef): RemoteRefState;
  /** The nodes holding it now. */
  holders(ref: RemoteRef): readonly number[];
}

/** Whether a remote reference can be used: `held`, or `released`, or `lost` with every node holding it. */
export type RemoteRefState = "held" | "released" | "lost";

const refOwners = new WeakMap<RemoteRef, RemoteRefOwner>();

/** @internal Ties a reference to the pool that made it. */
export function bindRemoteRef(ref: RemoteRef, owner: RemoteRefOwner): void {
  refOwners.set(ref, owner);
}

/** @internal The pool a reference belongs to, if any. */
export function remoteRefOwner(ref: RemoteRef): RemoteRefOwner | undefined {
  return refOwners.get(ref);
}

/**
 * A task's result kept on the node that computed it (`pending.withKeep()`): a handle, not the value.
 * Pass it as an argument to later tasks of the same pool — a task on a node holding it receives the
 * object itself and no bytes move; a task on another node receives it after it moved there once (it
 * stays there too). `fetch()` brings the value to the client; `release()` frees it on its nodes, and
 * closing the pool frees them all. A reference belongs to the pool object that made it: after
 * `pool.detach()` it can no longer be used (an attached pool starts without references).
 *
 * ```ts
 * import * as sky from "@skyward/core";
 *
 * const train = sky.python<[epochs: number], sky.PyObject>("tasks:train");
 * const score = sky.python<[model: sky.PyObject], number>("tasks:score");
 *
 * await using pool = await sky.compute({ nodes: 2 });
 * const model = await pool.run(train(10).withKeep()); // RemoteRef<sky.PyObject>, on one node
 * await pool.run(score(model));                       // runs there: no bytes move
 * await pool.run(score(model), { target: 1 });        // moves it to node 1 once
 * await model.release();
 * ```
 */
export class RemoteRef<T = unknown> {
  /** Its id, unique in the pool (`r0-…`). */
  readonly id: string;
  /** The node that computed and keeps it. */
  readonly node: number;
  /** The value's Python type, `module.Qualname`. */
  readonly type: string;
  /** The size of its pickle in bytes: what moving it to another node carries. */
  readonly size: number;
  /** Never set: carries the type of the value {@link fetch} brings. */
  declare readonly __value?: T;

  /** @internal made by the protocol decoder */
  constructor(id: string, node: number, type: string, size: number) {
    this.id = id;
    this.node = node;
    this.type = type;
    this.size = size;
  }

  /** `held` while it can be used; `released` or `lost` (every node holding it was lost) after. */
  get state(): RemoteRefState {
    return refOwners.get(this)?.state(this) ?? "released";
  }

  /** The nodes holding it now: its own, and those it moved to. */
  get nodes(): readonly number[] {
    return refOwners.get(this)?.holders(this) ?? [];
  }

  /**
   * Brings the value to the client (as a task's result arrives: `NDArray`, `PyObject`, JSON…); it
   * stays on its nodes.
   *
   * @throws {RemoteRefError} when it was released or lost.
   */
  fetch(options?: { signal?: AbortSignal }): Promise<T> {
    const owner = refOwners.get(this);
    if (owner === undefined)
      return Promise.reject(new Error(`remote reference ${this.id} belongs to no pool`));
    return owner.fetch(this, options) as Promise<T>;
  }

  /** Frees it on every node holding it; later uses fail with a `RemoteRefError`. Idempotent. */
  release(): Promise<void> {
    return refOwners.get(this)?.release(this) ?? Promise.resolve();
  }

  /** `RemoteRef(r0-…, ref_tasks.Counter, 1234 bytes, node 0)`. */
  toString(): string {
    return `RemoteRef(${this.id}, ${this.type}, ${this.size} bytes, node ${this.node})`;
  }
}

/**
 * A remote reference as an argument of one task bound for `node`: sent as `{"$r": {"id"}}` when
 * that node holds it by the time the `submit` is written, else with its pickle along (`payload`).
 */
export class RefArgument {
  readonly ref: RemoteRef;
  /** The pickle to carry; given late when a move node to node failed before the `submit`. */
  payload: PyObject | undefined;
  readonly #heldThere: () => boolean;

  constructor(ref: RemoteRef, payload: PyObject | undefined, heldThere: () => boolean) {
    this.ref = ref;
    this.payload = payload;
    this.#heldThere = heldThere;
  }

  /** Whether this `submit` brings the object along (asked when it is encoded). */
  get carries(): boolean {
    return this.payload !== undefined && !this.#heldThere();
  }
}

/**
 * Decodes `$r`'s content: a {@link RemoteRef} (a worker's kept result), or — with `value`, the
 * object brought along — a {@link RefArgument} that carries it. `decodeObjectValue` decodes `value`.
 */
export function decodeRemoteRef(
  content: unknown,
  decodeObjectValue: (value: unknown) => unknown,
): RemoteRef | RefArgument {
  if (
    !isPlain(content) ||
    typeof content.id !== "string" ||
    !Number.isSafeInteger(content.node) ||
    typeof content.type !== "string" ||
    !Number.isSafeInteger(content.size) ||
    Object.keys(content).some((key) => !["id", "node", "type", "size", "value"].includes(key))
  ) {
    throw new Error(
      '$r must hold {"id", "node", "type", "size"}, and "value": {"$o": …} when it brings the object',
    );
  }
  const ref = new RemoteRef(content.id, content.node as number, content.type, content.size as number);
  if (!("value" in content)) return ref;
  const payload = decodeObjectValue(content.value);
  if (!(payload instanceof PyObject))
    throw new Error('the value a $r brings along must be an object {"$o": …}');
  return new RefArgument(ref, payload, () => false);
}

function describeRef(ref: RemoteRef): { id: string; node: number; type: string; size: number } {
  return { id: ref.id, node: ref.node, type: ref.type, size: ref.size };
}

/**
 * Encodes a reference argument: `{"$r": {"id", "node", "type", "size"}}`, with `"value": {"$o": …}`
 * when it carries the object.
 */
export function encodeRefArgument(
  value: RemoteRef | RefArgument,
  addSegment: (bytes: Uint8Array) => number,
): unknown {
  if (value instanceof RemoteRef) return { $r: describeRef(value) };
  if (!value.carries) return { $r: describeRef(value.ref) };
  return { $r: { ...describeRef(value.ref), value: encodePyObject(value.payload!, addSegment) } };
}
