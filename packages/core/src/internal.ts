/**
 * `@skyward/core/internal` — building blocks for Skyward's own provider and plugin packages and for
 * third parties writing their own: the zod schemas behind the public types, input parsing that raises
 * path-naming configuration errors, shell quoting, the plugin hook runners, and what cloud providers
 * share (an HTTP client for their APIs, generated SSH key pairs). Not part of the stable user API.
 */

export { acceleratorSchema } from "./accelerators.js";
export type { BootstrapMarker, BootstrapScriptOptions, PluginOpsScriptOptions } from "./bootstrap-script.js";
export {
  bootstrapLayout,
  describeBootstrapFailure,
  parseBootstrapMarker,
  renderBootstrapScript,
  renderPluginOpsScript,
} from "./bootstrap-script.js";
export { createProviderFromEntry, parseConfigText, validateConfig } from "./config-file.js";
export { imageSchema } from "./image.js";
export { collectIncludedFiles, globToRegExp, type IncludedFile } from "./includes.js";
export { shellQuote } from "./launch-command.js";
export type { LogFileWriterOptions, LogRotation } from "./log-file.js";
export {
  eventLogLevel,
  eventLogRecord,
  isLogLevel,
  LOG_LEVELS,
  LogFileWriter,
  logFileGenerations,
  logLevelRank,
  parseRotation,
  resolveLogFilePath,
} from "./log-file.js";
export { metricCollectorSchema } from "./metrics.js";
export { logConfigSchema, optionsSchema, workerSchema } from "./options.js";
export {
  applyImageTransforms,
  applyLaunchers,
  collectBootstrapOps,
  collectPluginBootstrapOps,
  enterAroundClient,
  pluginSchema,
  resolveWorkersPerNode,
  workerModules,
} from "./plugin.js";
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
} from "./protocol.js";
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
} from "./protocol.js";
export { providerSchema, whyNotProvider } from "./provider.js";
export type {
  FetchFunction,
  ProviderApiErrorOptions,
  ProviderApiIdentity,
  ProviderHttpAnswer,
  ProviderHttpAttempt,
  ProviderHttpClient,
  ProviderHttpClientOptions,
  ProviderHttpRequest,
  ProviderHttpRequestFunction,
  ProviderHttpResponse,
  ProviderHttpSettings,
} from "./provider-http.js";
export {
  answerMessage,
  answerNumberSchema,
  carriesErrorMarker,
  createProviderHttpClient,
  ProviderApiError,
  parseProviderAnswer,
  resolveProviderApiKey,
} from "./provider-http.js";
export { findPython, preparePythonEnvironment, skywardHome } from "./python-environment.js";
export { isSecretEnvironmentName, REDACTED, Redactor } from "./redact.js";
export { nodeSpecSchema, SPEC_FIELDS, specSchema } from "./spec.js";
export type { SshKeyPair } from "./ssh-keys.js";
export { ensureSshKeyPair, generateEd25519KeyPair, publicKeyOfOpenSshPrivateKey } from "./ssh-keys.js";
export { startSshWorker } from "./ssh-node.js";
export type {
  SshConnectOptions,
  SshExecOptions,
  SshExecResult,
  SshProcess,
  SshTarget,
  SshUploadFile,
} from "./ssh-transport.js";
export { SshConnection, sshKeyFingerprint } from "./ssh-transport.js";
export { TaskManager } from "./task-manager.js";
export { formatPath, parseInput, toConfigurationIssues } from "./validation.js";
export { volumeSchema } from "./volume.js";
export type { ConnectionLoss, WorkerConnectionOptions } from "./worker-connection.js";
export { WorkerConnection } from "./worker-connection.js";
