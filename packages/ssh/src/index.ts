/**
 * `@skyward/ssh` — the SSH machinery every provider whose nodes are reached over SSH shares: the
 * transport (ssh2, host keys, commands, tar upload, tunnels), key pairs, the bootstrap script, and
 * the worker launcher a provider's `launchWorker` is.
 *
 * ```ts
 * import type { ProviderV1 } from "@skyward/core/contract";
 * import { launchSshWorker } from "@skyward/ssh";
 *
 * declare const rest: Omit<ProviderV1, "launchWorker">;
 * const provider: ProviderV1 = { ...rest, launchWorker: launchSshWorker };
 * ```
 */
export type { BootstrapScriptOptions } from "./bootstrap-script.js";
export { renderBootstrapScript } from "./bootstrap-script.js";
export type { SshKeyPair } from "./keys.js";
export {
  ensureSshKeyPair,
  findSshIdentityFile,
  generateEd25519KeyPair,
  publicKeyOfOpenSshPrivateKey,
} from "./keys.js";
export { sshKeyFingerprint } from "./known-hosts.js";
export {
  cleanNodeRootCommand,
  DEFAULT_NODE_ROOT,
  KEPT_NODE_ENTRIES,
  processRunsTest,
  stopWorkerCommand,
} from "./node-root.js";
export type {
  SshExecOptions,
  SshExecResult,
  SshExitStatus,
  SshProcess,
  SshSpawnOptions,
} from "./remote-command.js";
export type { SshUploadFile } from "./tar.js";
export { tarArchive } from "./tar.js";
export type { SshConnectOptions, SshTarget } from "./target.js";
export type { SshForwardOptions, SshUploadOptions } from "./transport.js";
export { SshConnection } from "./transport.js";
export {
  launchSshWorker,
  reconnectSshWorker,
  reconnectThroughGetInstance,
  runtimeFiles,
} from "./worker-launcher.js";
