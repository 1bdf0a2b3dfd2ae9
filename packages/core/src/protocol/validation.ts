/**
 * The validation table: the fields of every known message and what each must be. A received
 * message of a known type is checked field by field; one of a type this version does not know
 * passes through as an `UnknownWireMessage`.
 */

import type { ReceivedMessage, WireMessage, WireMessageType } from "./messages.js";
import { isPlainObject, protocolError } from "./wire-primitives.js";

type FieldCheck = { readonly expected: string; readonly test: (value: unknown) => boolean };

const string: FieldCheck = { expected: "a string", test: (value) => typeof value === "string" };
const integer: FieldCheck = { expected: "an integer", test: (value) => Number.isInteger(value) };
const number: FieldCheck = { expected: "a number", test: (value) => typeof value === "number" };
const boolean: FieldCheck = { expected: "a boolean", test: (value) => typeof value === "boolean" };
const present: FieldCheck = { expected: "a value", test: (value) => value !== undefined };
const object: FieldCheck = { expected: "an object", test: isPlainObject };
const array: FieldCheck = { expected: "an array", test: Array.isArray };
const strings: FieldCheck = {
  expected: "an array of strings",
  test: (value) => Array.isArray(value) && value.every((item) => typeof item === "string"),
};
const nullable = (check: FieldCheck): FieldCheck => ({
  expected: `${check.expected} or null`,
  test: (value) => value === null || check.test(value),
});
const oneOf = (...choices: readonly string[]): FieldCheck => ({
  expected: `one of ${choices.map((choice) => JSON.stringify(choice)).join(", ")}`,
  test: (value) => typeof value === "string" && choices.includes(value),
});
const peers: FieldCheck = {
  expected: "an array of {node, private_ip, public_ip}",
  test: (value) =>
    Array.isArray(value) &&
    value.every(
      (peer) =>
        isPlainObject(peer) &&
        Number.isInteger(peer.node) &&
        typeof peer.private_ip === "string" &&
        (peer.public_ip === null || typeof peer.public_ip === "string"),
    ),
};
const stringRecord: FieldCheck = {
  expected: "an object of strings",
  test: (value) => isPlainObject(value) && Object.values(value).every((item) => typeof item === "string"),
};
const workerEvent: FieldCheck = {
  expected: "an object with a string type",
  test: (value) => isPlainObject(value) && typeof value.type === "string",
};

/** The fields of every known message and what each must be. */
const messageFields: { readonly [T in WireMessageType]: Readonly<Record<string, FieldCheck>> } = {
  hello: { version: integer, token: string, client: string },
  welcome: {
    version: integer,
    node: integer,
    pid: integer,
    hostname: string,
    python: string,
    executor: oneOf("thread", "process"),
    concurrency: integer,
    buffer: integer,
    results: strings,
  },
  reject: { reason: string },
  cluster: {
    node: integer,
    total_nodes: integer,
    workers_per_node: integer,
    head_addr: string,
    head_port: integer,
    job_id: string,
    peers,
    accelerators: number,
    accelerator: present,
    network: present,
    env: stringRecord,
  },
  subtask: { id: string, sub: integer, fn: string, args: array, kwargs: object, node: nullable(integer) },
  subcancel: { id: string, sub: integer },
  subresult: { id: string, sub: integer, value: present },
  suberror: {
    id: string,
    sub: integer,
    kind: oneOf("exception", "not_found", "serialization", "timeout", "cancelled", "worker_died"),
    type: string,
    message: string,
    traceback: string,
    node: integer,
  },
  ready: {},
  authority: { addr: string, port: integer },
  coll: { id: integer, owner: string, op: array },
  coll_cancel: { id: integer, owner: string },
  coll_answer: { id: integer, ok: boolean },
  submit: {
    id: string,
    fn: string,
    args: array,
    kwargs: object,
    timeout: nullable(number),
    stream: boolean,
    worker: nullable(integer),
  },
  cancel: { id: string },
  withdraw: { ids: strings },
  withdrawn: { id: string },
  result: { id: string, value: present },
  item: { id: string, seq: integer, value: present },
  end: { id: string },
  error: {
    id: string,
    kind: oneOf("exception", "not_found", "serialization", "timeout", "cancelled", "worker_died"),
    type: string,
    message: string,
    traceback: string,
    node: integer,
  },
  out: {
    id: nullable(string),
    stream: oneOf("stdout", "stderr"),
    node: integer,
    worker: nullable(integer),
    data: string,
  },
  pull: { id: string, stream: integer, n: integer },
  in: { id: string, stream: integer, value: present },
  in_end: { id: string, stream: integer },
  in_error: { id: string, stream: integer, message: string },
  ping: { ts: number },
  pong: { ts: number },
  release: { ttl: number },
  collect: { ids: strings },
  unref: { ids: strings },
  shutdown: {},
  metric: { node: integer, name: string, value: number, unit: nullable(string), ts: number },
  event: { node: integer, event: workerEvent },
};

const knownTypes: ReadonlySet<string> = new Set(Object.keys(messageFields));

/** Whether a received message is one of protocol version 1 (and so was validated field by field). */
export function isKnownMessage(message: ReceivedMessage): message is WireMessage {
  return knownTypes.has(message.t);
}

export function describeReceived(value: unknown): string {
  if (value === undefined) return "nothing";
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (value instanceof Uint8Array) return "bytes";
  if (typeof value === "string")
    return `the string ${JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value)}`;
  if (typeof value === "number" || typeof value === "boolean" || typeof value === "bigint") {
    return `${typeof value} ${String(value)}`;
  }
  return typeof value;
}

export function validateMessage(message: unknown, position: number): ReceivedMessage {
  if (!isPlainObject(message)) {
    throw protocolError(`frame message ${position} is not a JSON object: ${describeReceived(message)}`);
  }
  if (typeof message.t !== "string") {
    throw protocolError(`frame message ${position} has no string type field "t"`);
  }
  const fields = (messageFields as Readonly<Record<string, Readonly<Record<string, FieldCheck>>>>)[message.t];
  if (fields !== undefined && Object.hasOwn(messageFields, message.t)) {
    for (const name in fields) {
      const check = fields[name]!;
      const value = message[name];
      if (!check.test(value)) {
        throw protocolError(
          `"${message.t}" message field "${name}": expected ${check.expected}, received ${describeReceived(value)}`,
        );
      }
    }
  }
  return message as ReceivedMessage;
}
