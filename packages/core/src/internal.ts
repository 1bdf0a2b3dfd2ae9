/**
 * `@skyward/core/internal` — building blocks for Skyward's own provider and plugin packages and for
 * third parties writing their own: the zod schemas behind the public types, input parsing that raises
 * path-naming configuration errors, shell quoting, the plugin hook runners, and what cloud providers
 * share (an HTTP client for their APIs, generated SSH key pairs). Not part of the stable user API.
 */

export { createProviderFromEntry, parseConfigText, validateConfig } from "./config/config-file.js";
export { skywardHome } from "./config/home.js";
export { shellQuote } from "./contract/launch-command.js";
export {
  applyImageTransforms,
  applyLaunchers,
  collectBootstrapOps,
  collectPluginBootstrapOps,
  enterAroundClient,
  pluginSchema,
  resolveWorkersPerNode,
  workerModules,
} from "./contract/plugin.js";
export { providerSchema, whyNotProvider } from "./contract/provider.js";
export { formatPath, parseInput, toConfigurationIssues } from "./errors/validation.js";
export { findPython, preparePythonEnvironment } from "./local/python-environment.js";
export type { LogFileWriterOptions, LogRotation } from "./observe/log-file.js";
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
} from "./observe/log-file.js";
export { metricCollectorSchema } from "./observe/metrics.js";
export { isSecretEnvironmentName, REDACTED, Redactor } from "./observe/redact.js";
export { TaskManager } from "./pool/task-manager.js";
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
export { pythonRuntimeDirectory } from "./protocol/python-runtime.js";
export { acceleratorSchema } from "./spec/accelerators.js";
export { imageSchema } from "./spec/image.js";
export { collectIncludedFiles, globToRegExp, type IncludedFile } from "./spec/includes.js";
export { logConfigSchema, optionsSchema, workerSchema } from "./spec/options.js";
export { nodeSpecSchema, SPEC_FIELDS, specSchema } from "./spec/spec.js";
export { volumeSchema } from "./spec/volume.js";
export type {
  BootstrapMarker,
  BootstrapScriptOptions,
  PluginOpsScriptOptions,
} from "./ssh/bootstrap-script.js";
export {
  bootstrapLayout,
  describeBootstrapFailure,
  parseBootstrapMarker,
  renderBootstrapScript,
  renderPluginOpsScript,
} from "./ssh/bootstrap-script.js";
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
} from "./ssh/provider-http.js";
export {
  answerMessage,
  answerNumberSchema,
  carriesErrorMarker,
  createProviderHttpClient,
  ProviderApiError,
  parseProviderAnswer,
  resolveProviderApiKey,
} from "./ssh/provider-http.js";
export type { SshKeyPair } from "./ssh/ssh-keys.js";
export { ensureSshKeyPair, generateEd25519KeyPair, publicKeyOfOpenSshPrivateKey } from "./ssh/ssh-keys.js";
export { launchSshWorker, stopWorkerCommand } from "./ssh/ssh-node.js";
export type {
  SshConnectOptions,
  SshExecOptions,
  SshExecResult,
  SshProcess,
  SshTarget,
  SshUploadFile,
} from "./ssh/ssh-transport.js";
export { SshConnection, sshKeyFingerprint } from "./ssh/ssh-transport.js";
