import { describe, expect, it } from "vitest";
import { type TestbedHost, testbedSshHost, testbedSshHosts } from "./testbed.js";

// Hosts shaped as createTestbed makes them; the helpers only read their fields.
const hosts: TestbedHost[] = [0, 1, 2].map((index) => ({
  name: `host${index}`,
  host: `10.213.9.${index + 2}`,
  port: 22,
  user: "root",
  privateKey: "-----BEGIN OPENSSH PRIVATE KEY-----\nkey\n-----END OPENSSH PRIVATE KEY-----\n",
  identityFile: "/tmp/skyward-testbed-9/client_ed25519",
  root: `/tmp/skyward-testbed-9/host${index}/root`,
  hostKeyFingerprint: `SHA256:${String(index).repeat(43)}`,
  hostPublicKey: "ssh-ed25519 AAAA",
  namespace: `skyt-9-host${index}`,
  sshdPid: 100 + index,
}));
const bed = { hosts };

describe("testbedSshHost(s)", () => {
  it("gives each host's address, port, user, key text, pinned fingerprint and root, in order", () => {
    expect(testbedSshHosts(bed)).toEqual(
      hosts.map((host) => ({
        host: host.host,
        port: 22,
        user: "root",
        privateKey: host.privateKey,
        hostKeyFingerprint: host.hostKeyFingerprint,
        root: host.root,
      })),
    );
  });

  it("picks hosts by index, in the order given", () => {
    expect(testbedSshHosts(bed, { indices: [2, 0] }).map((entry) => entry.host)).toEqual([
      "10.213.9.4",
      "10.213.9.2",
    ]);
  });

  it("rejects an index the test bed has no host at, naming it", () => {
    expect(() => testbedSshHosts(bed, { indices: [3] })).toThrow(
      /indices: the test bed has no host 3 \(it has 3\)/,
    );
  });

  it("leaves the fingerprint out with pinHostKey: false, and gives the key file with keyFile: true", () => {
    const [host] = hosts as [TestbedHost];
    expect(testbedSshHost(host, { pinHostKey: false })).not.toHaveProperty("hostKeyFingerprint");
    const entry = testbedSshHost(host, { keyFile: true });
    expect(entry.identityFile).toBe(host.identityFile);
    expect(entry).not.toHaveProperty("privateKey");
    expect(entry.hostKeyFingerprint).toBe(host.hostKeyFingerprint);
  });
});
