import { describe, expect, it } from "vitest";
import { sshReachableStatus } from "./instances.js";

describe("sshReachableStatus", () => {
  it("is running only with SSH coordinates", () => {
    const ssh = { host: "203.0.113.7", port: 22, user: "root" };
    expect(sshReachableStatus("running", ssh)).toBe("running");
    expect(sshReachableStatus("running", null)).toBe("pending");
    expect(sshReachableStatus("terminated", null)).toBe("terminated");
    expect(sshReachableStatus("stopping", null)).toBe("stopping");
  });
});
