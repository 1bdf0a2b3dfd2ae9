/**
 * The key pair `@skyward/ssh` generates for providers (`ensureSshKeyPair`, used by RunPod and
 * Vast.ai) logs in over real SSH: its public half authorised on a test-bed host (a real sshd in a
 * network namespace), `@skyward/ssh`'s transport connects with the private key file, as the pool does with the instances'
 * `identityFile`. Skipped where the test bed cannot run.
 */
import { appendFile, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { ensureSshKeyPair, SshConnection } from "@skyward/ssh";
import { describe, expect, it } from "vitest";
import { createTestbed, requireTestbed } from "../src/index.js";

const skipReason = await requireTestbed();

describe.skipIf(skipReason !== undefined)("the generated SSH key", () => {
  it("logs in to a real sshd through the core's SSH transport", async () => {
    const directory = await mkdtemp(join(tmpdir(), "skyward-key-login-"));
    try {
      await using bed = await createTestbed({ hosts: 1 });
      const host = bed.hosts[0]!;
      const keys = await ensureSshKeyPair(join(directory, "keys"), "provider_ed25519");
      await appendFile(join(dirname(host.root), "authorized_keys"), `${keys.publicKey}\n`);
      const connection = await SshConnection.connect(
        {
          host: host.host,
          port: host.port,
          user: host.user,
          identityFile: keys.identityFile,
          hostKeyFingerprint: host.hostKeyFingerprint,
        },
        {
          signal: AbortSignal.timeout(60_000),
          timeoutSeconds: 30,
          retryIntervalSeconds: 1,
          knownHostsFile: join(directory, "known_hosts"),
        },
      );
      try {
        const result = await connection.exec("echo logged-in-as $(id -un)");
        expect(result.stdout.trim()).toBe("logged-in-as root");
      } finally {
        connection.close();
      }
    } finally {
      await rm(directory, { recursive: true, force: true });
    }
  });
});
