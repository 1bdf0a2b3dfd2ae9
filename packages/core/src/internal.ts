/**
 * Transitional: the SSH machinery, until it moves to `@skyward/ssh`. Not public.
 */
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
export type { SshKeyPair } from "./ssh/ssh-keys.js";
export { ensureSshKeyPair, generateEd25519KeyPair, publicKeyOfOpenSshPrivateKey } from "./ssh/ssh-keys.js";
export { launchSshWorker, stopWorkerCommand } from "./ssh/ssh-node.js";
export type { SshClusterData, SshHost, SshHostInput, SshSettings } from "./ssh/ssh-provider.js";
export { SSH } from "./ssh/ssh-provider.js";
export type {
  SshConnectOptions,
  SshExecOptions,
  SshExecResult,
  SshProcess,
  SshTarget,
  SshUploadFile,
} from "./ssh/ssh-transport.js";
export { SshConnection, sshKeyFingerprint } from "./ssh/ssh-transport.js";
