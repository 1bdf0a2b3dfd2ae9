/**
 * `@skyward/core/protocol` — the wire protocol between the client and every worker
 * (`docs/protocol.md`): frames and their messages, and a client connection to one worker. For tools
 * that talk to workers themselves (a provider's own health probe, a debugger); a pool needs none of it.
 */

export type { ConnectionLoss, WorkerConnectionOptions } from "./pool/worker-connection.js";
export { WorkerConnection } from "./pool/worker-connection.js";
export type {
  ClientMessage,
  ClusterMessage,
  ReceivedMessage,
  TaskErrorKind,
  TaskMessage,
  WelcomeMessage,
  WireMessage,
  WireValue,
  WorkerMessage,
} from "./protocol/protocol.js";
export {
  decodeFrame,
  encodeFrame,
  FrameBuilder,
  FrameDecoder,
  InputStream,
  MAX_BODY_BYTES,
  MAX_HEADER_BYTES,
  markInputStreams,
  PROTOCOL_VERSION,
} from "./protocol/protocol.js";
