import { describe, expect, it } from "vitest";
import { withoutSecrets } from "./state.js";

describe("withoutSecrets", () => {
  it("drops every field named like a credential, at any depth, and keeps the rest", () => {
    const cluster = {
      id: "sky-1",
      ssh: {
        user: "ubuntu",
        port: 22,
        privateKey: "-----BEGIN OPENSSH PRIVATE KEY-----",
        identityFile: "/k.pem",
      },
      specific: {
        keyFile: "/home/u/.skyward/keys/skyward-sky-1.pem",
        apiKey: "rp_live_123",
        api_key: "x",
        hosts: [
          { host: "10.0.0.5", private_key: "k", password: "p", hostKeyFingerprint: "SHA256:abc" },
          { host: "10.0.0.6", sessionToken: "t", Authorization: "Bearer t", clientSecret: "s" },
        ],
        tags: { "skyward:cluster": "sky-1" },
        publicKey: "ssh-ed25519 AAAA",
      },
      launch: () => "never recorded",
    };
    expect(withoutSecrets(cluster)).toEqual({
      id: "sky-1",
      ssh: { user: "ubuntu", port: 22, identityFile: "/k.pem" },
      specific: {
        keyFile: "/home/u/.skyward/keys/skyward-sky-1.pem",
        hosts: [{ host: "10.0.0.5", hostKeyFingerprint: "SHA256:abc" }, { host: "10.0.0.6" }],
        tags: { "skyward:cluster": "sky-1" },
        publicKey: "ssh-ed25519 AAAA",
      },
    });
    // A copy: the original keeps its fields.
    expect(cluster.ssh.privateKey).toMatch(/PRIVATE KEY/);
    expect(withoutSecrets(null)).toBeNull();
    expect(withoutSecrets([{ token: "t", port: 1 }])).toEqual([{ port: 1 }]);
  });
});
