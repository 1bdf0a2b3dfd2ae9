/**
 * The wire protocol's codec (docs/protocol.md), one module a concern: `messages.ts` (the version,
 * the limits and every message), `encoder.ts` (values and frames out), `validation.ts` (the fields each
 * known message must have), `decoder.ts` (frames in) and `expected-form.ts` (the test vectors' form).
 * This module gathers them for the rest of core.
 *
 * A frame is `u32 header length | u32 body length | JSON header | binary body`. The header is an
 * array of messages, preceded by a segment table `{"seg": [len, …]}` when the frame carries binary
 * segments. Values are JSON plus tagged forms (`$b`, `$f`, `$i`, `$d`, `$s`); this side's choices where
 * JavaScript differs from JSON are listed in `encoder.ts`.
 */

export { decodeFrame, FrameDecoder } from "./decoder.js";
export { encodeFrame, FrameBuilder, markInputStreams } from "./encoder.js";
export { fromExpectedForm, toExpectedForm } from "./expected-form.js";
export type {
  AuthorityMessage,
  CancelMessage,
  ClientMessage,
  ClusterMessage,
  ClusterMetric,
  ClusterPeer,
  ClusterPlugin,
  CollectionAnswerMessage,
  CollectionCancelMessage,
  CollectionOpMessage,
  CollectionsAddress,
  CollectMessage,
  EndMessage,
  EventMessage,
  HelloMessage,
  InputEndMessage,
  InputErrorMessage,
  InputItemMessage,
  ItemMessage,
  MetricMessage,
  OutputMessage,
  PingMessage,
  PongMessage,
  PullMessage,
  ReadyMessage,
  ReceivedMessage,
  RejectMessage,
  ReleaseMessage,
  ResultMessage,
  ShutdownMessage,
  SubcancelMessage,
  SuberrorMessage,
  SubmitMessage,
  SubresultMessage,
  SubtaskMessage,
  TaskErrorKind,
  TaskErrorMessage,
  TaskMessage,
  UnknownWireMessage,
  UnrefMessage,
  WelcomeMessage,
  WireMessage,
  WireMessageType,
  WireObject,
  WireValue,
  WithdrawMessage,
  WithdrawnMessage,
  WorkerEvent,
  WorkerExecutor,
  WorkerMessage,
} from "./messages.js";
export { InputStream, MAX_BODY_BYTES, MAX_HEADER_BYTES, PROTOCOL_VERSION } from "./messages.js";
export { isKnownMessage } from "./validation.js";
