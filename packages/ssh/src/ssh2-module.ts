/**
 * ssh2, loaded without its optional native crypto binding (`sshcrypto.node`).
 *
 * ssh2 builds that binding at install time when a compiler is there (npm runs its install script;
 * this repository's pnpm does too) and then uses it for every cipher. Built against Node 24.19 or
 * newer 24.x headers (or 26.4+), an addon whose objects are `node::ObjectWrap`s aborts the whole
 * process when the garbage collector reclaims one of them — `Assertion failed: (env) != nullptr` from
 * `RemoveEnvironmentCleanupHook` in `AESGCMDecipher::~AESGCMDecipher` (ssh2 issue 1511, Node issue
 * 65446). A Skyward client is a long-running process that opens and closes SSH connections: it would
 * die some time after a connection closed, its pool left running. We saw it here on Node 24.21.
 *
 * ssh2 loads the binding in a `try` and falls back to Node's own `crypto` when it cannot: while ssh2
 * is first loaded, the loader of `.node` files refuses that one file, so ssh2 takes the fallback.
 * Nothing else is changed, and the loader is put back at once.
 */
import Module, { createRequire } from "node:module";

type Ssh2 = typeof import("ssh2");
type NodeFileLoader = (this: unknown, module: unknown, filename: string) => unknown;

const requireHere = createRequire(import.meta.url);
const BINDING = /[\\/]sshcrypto\.node$/;

/** ssh2's module, with its native crypto binding refused (the reason is in this file's header). */
export function loadSsh2(): Ssh2 {
  const extensions = (Module as unknown as { _extensions: Record<string, NodeFileLoader> })._extensions;
  const original = extensions[".node"];
  if (!original) return requireHere("ssh2") as Ssh2;
  extensions[".node"] = function loadNodeFile(module, filename) {
    if (BINDING.test(filename)) {
      throw new Error("ssh2's native crypto binding is not loaded: it aborts Node 24.19+ when collected");
    }
    return original.call(this, module, filename);
  };
  try {
    return requireHere("ssh2") as Ssh2;
  } finally {
    extensions[".node"] = original;
  }
}

/** Whether the ssh2 this package loaded uses its native crypto binding (never, by design). */
export function ssh2UsesNativeCrypto(): boolean {
  loadSsh2();
  const crypto = requireHere("ssh2/lib/protocol/crypto.js") as { bindingAvailable?: boolean };
  return crypto.bindingAvailable === true;
}
