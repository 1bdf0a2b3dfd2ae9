/**
 * Host key checking against a real OpenSSH sshd (`test/sshd.ts`): trust on first use recorded in
 * `known_hosts` (plain, hashed, under an alias), a changed key refused, a pinned fingerprint.
 */

import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { readFile, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import { ConnectionError } from "@skyward/core";
import { describe, expect, it } from "vitest";
import { dir, main, options, sshdMissing, startSshd, target, useSshdBed } from "../test/sshd.js";
import { sshKeyFingerprint } from "./known-hosts.js";
import { SshConnection } from "./transport.js";

useSshdBed();

describe.skipIf(sshdMissing)("host keys", () => {
  it("records the host key on first use and refuses a changed one without connecting", async () => {
    const home = join(dir, "tofu", "nested");
    const knownHosts = join(home, "known_hosts");
    const sshd = await startSshd("host_a");
    const first = await SshConnection.connect(target(sshd.port), options({ knownHostsFile: knownHosts }));
    await first.close();
    const hostKey = (await readFile(join(dir, "host_a.pub"), "utf8")).split(" ");
    const recorded = await readFile(knownHosts, "utf8");
    expect(recorded).toBe(`[127.0.0.1]:${sshd.port} ${hostKey[0]} ${hostKey[1]}\n`);
    expect((await stat(knownHosts)).mode & 0o777).toBe(0o600);
    expect((await stat(home)).mode & 0o777).toBe(0o700);

    // The same key again: accepted, not recorded twice.
    const second = await SshConnection.connect(target(sshd.port), options({ knownHostsFile: knownHosts }));
    expect((await second.exec("echo ok")).stdout).toBe("ok\n");
    await second.close();
    expect(await readFile(knownHosts, "utf8")).toBe(recorded);

    // Entries hashed by `ssh-keygen -H` are recognised too.
    execFileSync("ssh-keygen", ["-q", "-H", "-f", knownHosts]);
    await rm(`${knownHosts}.old`, { force: true });
    const hashed = await readFile(knownHosts, "utf8");
    expect(hashed.startsWith("|1|")).toBe(true);
    await (await SshConnection.connect(target(sshd.port), options({ knownHostsFile: knownHosts }))).close();
    expect(await readFile(knownHosts, "utf8")).toBe(hashed);

    // The host comes back with another key on the same port.
    await sshd.stop();
    const changed = await startSshd("host_b", sshd.port);
    const attempts: ConnectionError[] = [];
    const refused = SshConnection.connect(
      target(changed.port),
      options({ knownHostsFile: knownHosts, onAttempt: (_attempt, error) => attempts.push(error) }),
    );
    await expect(refused).rejects.toBeInstanceOf(ConnectionError);
    await expect(refused).rejects.toThrow(
      new RegExp(
        `host key for 127.0.0.1:${sshd.port} changed.*remove the line \\(line 1\\) from ${knownHosts.replaceAll("/", "\\/")}`,
        "is",
      ),
    );
    expect(attempts).toHaveLength(1);
    expect(await readFile(knownHosts, "utf8")).toBe(hashed);
    await changed.stop();
  }, 20_000);

  it("records a host key under its alias: a new machine on a reused address is accepted, a changed key under the same alias is not", async () => {
    const knownHosts = join(dir, "alias", "known_hosts");
    const first = await startSshd("host_a");
    await (
      await SshConnection.connect(
        target(first.port, { hostKeyAlias: "aws:i-0001" }),
        options({ knownHostsFile: knownHosts }),
      )
    ).close();
    const keyA = (await readFile(join(dir, "host_a.pub"), "utf8")).split(" ");
    expect(await readFile(knownHosts, "utf8")).toBe(`aws:i-0001 ${keyA[0]} ${keyA[1]}\n`);
    await first.stop();

    // The cloud gives the same address and port to another machine, with another key.
    const reused = await startSshd("host_b", first.port);
    const second = await SshConnection.connect(
      target(reused.port, { hostKeyAlias: "aws:i-0002" }),
      options({ knownHostsFile: knownHosts }),
    );
    expect((await second.exec("echo ok")).stdout).toBe("ok\n");
    await second.close();
    const keyB = (await readFile(join(dir, "host_b.pub"), "utf8")).split(" ");
    expect(await readFile(knownHosts, "utf8")).toBe(
      `aws:i-0001 ${keyA[0]} ${keyA[1]}\naws:i-0002 ${keyB[0]} ${keyB[1]}\n`,
    );

    // The first instance's alias now meets another key: refused, naming the alias.
    await expect(
      SshConnection.connect(
        target(reused.port, { hostKeyAlias: "aws:i-0001" }),
        options({ knownHostsFile: knownHosts }),
      ),
    ).rejects.toThrow(
      new RegExp(`host key for 127\\.0\\.0\\.1:${reused.port} \\(recorded as aws:i-0001\\) changed`),
    );
    await reused.stop();

    await expect(
      (async () => SshConnection.connect(target(main.port, { hostKeyAlias: "two words" }), options({})))(),
    ).rejects.toThrow(/hostKeyAlias/);
  }, 20_000);

  it("checks a pinned fingerprint instead of known_hosts", async () => {
    const printed = execFileSync("ssh-keygen", ["-l", "-f", join(dir, "host_a.pub")], { encoding: "utf8" });
    const fingerprint = printed.split(" ")[1] ?? "";
    const publicKey = Buffer.from(
      (await readFile(join(dir, "host_a.pub"), "utf8")).split(" ")[1] ?? "",
      "base64",
    );
    expect(sshKeyFingerprint(publicKey)).toBe(fingerprint);

    const knownHosts = join(dir, "pinned", "known_hosts");
    const pinned = await SshConnection.connect(
      target(main.port, { hostKeyFingerprint: fingerprint }),
      options({ knownHostsFile: knownHosts }),
    );
    await pinned.close();
    expect(existsSync(knownHosts)).toBe(false);

    const other = execFileSync("ssh-keygen", ["-l", "-f", join(dir, "host_b.pub")], {
      encoding: "utf8",
    }).split(" ")[1];
    const attempts: number[] = [];
    await expect(
      SshConnection.connect(
        target(main.port, { hostKeyFingerprint: other }),
        options({ knownHostsFile: knownHosts, onAttempt: (attempt) => attempts.push(attempt) }),
      ),
    ).rejects.toThrow(
      `host key of 127.0.0.1:${main.port} is ssh-ed25519 ${fingerprint}, but ${other} was expected`,
    );
    // A host key that does not match is final: no second attempt.
    expect(attempts).toEqual([1]);
  });
});
