import { describe, expect, it } from "vitest";
import { containerSelfDestructScript } from "./container-self-destruct.js";

const options = {
  label: "Acme",
  variables: ["MY_ID", "MY_KEY"],
  envFile: "acme.env",
  command: "/usr/local/bin/skyward-self-destruct",
  request: {
    method: "DELETE",
    url: '"https://api.example.com/machines/$MY_ID"',
    header: { variable: "MY_KEY", prefix: "Authorization: Bearer " },
  },
  graceSeconds: 600,
  root: "/opt/skyward",
};

describe("containerSelfDestructScript", () => {
  it("saves the variables root-only and installs a command deleting the container with them", () => {
    const script = containerSelfDestructScript(options);
    expect(script).toContain("umask 077");
    expect(script).toContain(`printf 'MY_ID=%s\\nMY_KEY=%s\\n' "$MY_ID" "$MY_KEY" > /root/.skyward/acme.env`);
    expect(script).toContain(". /root/.skyward/acme.env");
    expect(script).toContain("https://api.example.com/machines/$MY_ID");
    expect(script).toContain("chmod 700 /usr/local/bin/skyward-self-destruct");
    expect(script).toContain('if [ "$idle" -ge 600 ]');
    // The key is read from the file, never written into the script.
    expect(script).not.toMatch(/MY_KEY=[^%]/);
  });

  it("arms no watchdog for 0 seconds", () => {
    const script = containerSelfDestructScript({ ...options, graceSeconds: 0 });
    expect(script).not.toContain("idle");
    expect(script).toContain("SKYWARD_EOF");
  });
});
