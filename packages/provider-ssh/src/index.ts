/**
 * `@skyward/provider-ssh` — your own machines as a Skyward pool, reached over SSH, one node per
 * host. Nothing is provisioned and no machine is ever shut down.
 *
 * ```ts
 * import * as sky from "@skyward/core";
 * import { SSH } from "@skyward/provider-ssh";
 *
 * await using pool = await sky.compute({
 *   provider: SSH({ hosts: [{ host: "10.0.0.5", user: "ubuntu", identityFile: "~/.ssh/id_ed25519" }] }),
 * });
 * ```
 */
export type { SshClusterData, SshHost, SshHostInput, SshSettings } from "./ssh-provider.js";
export { createProviderFromConfig, SSH } from "./ssh-provider.js";
