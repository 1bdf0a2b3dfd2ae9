import { describe, expect, it } from "vitest";
import { instanceSsh, sshReachableStatus } from "./instances.js";

describe("sshReachableStatus", () => {
  it("is running only with SSH coordinates", () => {
    const ssh = { host: "203.0.113.7", port: 22, user: "root" };
    expect(sshReachableStatus("running", ssh)).toBe("running");
    expect(sshReachableStatus("running", null)).toBe("pending");
    expect(sshReachableStatus("terminated", null)).toBe("terminated");
    expect(sshReachableStatus("stopping", null)).toBe("stopping");
  });
});

describe("instanceSsh", () => {
  const own = { host: "203.0.113.7", port: 2222, user: "ubuntu" };
  it("is the instance's own address with the provider's key", () => {
    expect(instanceSsh(own, "/keys/id", undefined)).toEqual({ ...own, identityFile: "/keys/id" });
    expect(instanceSsh(own, undefined, undefined)).toEqual(own);
  });
  it("takes each field a stand-in gives: its key instead of the provider's", () => {
    expect(
      instanceSsh(own, "/keys/id", {
        host: "10.0.0.2",
        port: 22,
        user: "root",
        privateKey: "KEY",
        root: "/bed/host0",
        hostKeyFingerprint: "SHA256:abc",
        selfDestruct: "true",
      }),
    ).toEqual({
      host: "10.0.0.2",
      port: 22,
      user: "root",
      privateKey: "KEY",
      root: "/bed/host0",
      hostKeyFingerprint: "SHA256:abc",
    });
    expect(instanceSsh(own, "/keys/id", { host: "10.0.0.2", port: 22 })).toEqual({
      host: "10.0.0.2",
      port: 22,
      user: "ubuntu",
      identityFile: "/keys/id",
    });
  });
});
