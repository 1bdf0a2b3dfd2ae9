/**
 * ssh2's native crypto binding aborts Node 24.19+ when the garbage collector reclaims one of its
 * ciphers (ssh2-module.ts). A child process makes 2,000 AES-GCM deciphers through ssh2's own
 * `createDecipher`, drops them and collects: with ssh2 loaded plainly and the binding built (as this
 * repository's install builds it), the child aborts; with `loadSsh2` it exits cleanly.
 */
import { spawnSync } from "node:child_process";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { loadSsh2, ssh2UsesNativeCrypto } from "./ssh2-module.js";

const requireHere = createRequire(import.meta.url);
const moduleFile = fileURLToPath(new URL("./ssh2-module.ts", import.meta.url));
const cryptoFile = requireHere.resolve("ssh2/lib/protocol/crypto.js");

/** Runs `load` (code that sets `crypto` to ssh2's crypto module) then makes and collects ciphers. */
function churn(load: string) {
  const script = `
    ${load}
    const info = crypto.CIPHER_INFO["aes128-gcm@openssh.com"];
    for (let i = 0; i < 2000; i++) {
      crypto.createDecipher({ inbound: { onPayload() {}, decipherInfo: info,
        decipherKey: Buffer.alloc(16), decipherIV: Buffer.alloc(12), seqno: 0 } });
    }
    for (let i = 0; i < 5; i++) globalThis.gc();
    setTimeout(() => { globalThis.gc(); console.log("binding:" + crypto.bindingAvailable); }, 50);
  `;
  return spawnSync(process.execPath, ["--expose-gc", "--input-type=module", "-e", script], {
    encoding: "utf8",
    timeout: 60_000,
  });
}

describe("loadSsh2", () => {
  it("gives ssh2 with its client, and never its native crypto binding", () => {
    expect(typeof loadSsh2().Client).toBe("function");
    expect(ssh2UsesNativeCrypto()).toBe(false);
  });

  it("keeps a process that collects ssh2 ciphers alive, where the plainly loaded binding aborts it", () => {
    const ours = churn(`
      const { loadSsh2 } = await import(${JSON.stringify(moduleFile)});
      loadSsh2();
      const { createRequire } = await import("node:module");
      const crypto = createRequire(${JSON.stringify(cryptoFile)})(${JSON.stringify(cryptoFile)});
    `);
    expect(ours.signal, ours.stderr).toBeNull();
    expect(ours.status, ours.stderr).toBe(0);
    expect(ours.stdout).toContain("binding:false");

    const plain = churn(`
      const { createRequire } = await import("node:module");
      const crypto = createRequire(${JSON.stringify(cryptoFile)})(${JSON.stringify(cryptoFile)});
    `);
    if (plain.stdout.includes("binding:false")) return; // no binding built here: nothing to abort
    // The binding was built and loaded: on an affected Node the child dies as ssh2 issue 1511 says.
    if (plain.signal === "SIGABRT") expect(plain.stderr).toContain("RemoveEnvironmentCleanupHook");
    else expect(plain.stdout).toContain("binding:true");
  });
});
