import { execFileSync } from "node:child_process";
import { chmod, mkdir, mkdtemp, readFile, rm, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bootWatchdogSeconds, renderStartupScript, selfDeleteCommand } from "./startup-script.js";

const TOKEN = "ya29.node-token-never-on-a-command-line";

/**
 * Runs `selfDeleteCommand` under sh with stand-in `curl` and `shutdown` executables that record their
 * arguments (and curl's standard input) and answer the metadata server's paths.
 */
describe("the on-node self-delete", () => {
  let bin = "";
  let log = "";

  beforeAll(async () => {
    bin = await mkdtemp(join(tmpdir(), "skyward-gcp-self-delete-"));
    log = join(bin, "calls.log");
    await writeFile(
      join(bin, "curl"),
      `#!/bin/sh
echo "curl $*" >> "${log}"
case "$*" in
  *service-accounts/default/token*) printf '{"access_token":"${TOKEN}","expires_in":3599,"token_type":"Bearer"}' ;;
  *project/project-id*) printf 'my-project-123' ;;
  *instance/zone*) printf 'projects/123456/zones/us-central1-a' ;;
  *instance/name*) printf 'sky-0123abcd-a1b2c3' ;;
  *"-X DELETE"*) echo "stdin: $(cat)" >> "${log}"; [ -z "$FAIL_DELETE" ] ;;
esac
`,
    );
    await writeFile(join(bin, "shutdown"), `#!/bin/sh\necho "shutdown $*" >> "${log}"\n`);
    await writeFile(join(bin, "sudo"), `#!/bin/sh\necho "sudo $*" >> "${log}"\n"$@"\n`);
    for (const name of ["curl", "shutdown", "sudo"]) await chmod(join(bin, name), 0o755);
  });
  afterAll(async () => {
    await rm(bin, { recursive: true, force: true });
  });

  const run = async (command: string, env: Record<string, string> = {}) => {
    await writeFile(log, "");
    execFileSync("sh", ["-c", command], { env: { PATH: `${bin}:/usr/bin:/bin`, ...env } });
    return (await readFile(log, "utf8")).trim().split("\n");
  };

  it("deletes the VM through the API with the metadata server's token, passed on standard input", async () => {
    const calls = await run(selfDeleteCommand({ sudo: true }));
    const deletion = calls.find((line) => line.includes("-X DELETE"));
    expect(deletion).toBe(
      "curl -sf -X DELETE -H @- https://compute.googleapis.com/compute/v1/projects/my-project-123/zones/us-central1-a/instances/sky-0123abcd-a1b2c3",
    );
    expect(calls).toContain(`stdin: Authorization: Bearer ${TOKEN}`);
    // The token is on no command line, and nothing was shut down.
    expect(calls.filter((line) => line.startsWith("curl") && line.includes(TOKEN))).toEqual([]);
    expect(calls.some((line) => line.startsWith("shutdown"))).toBe(false);
  });

  it("shuts down (with sudo for a non-root login) when the API refuses", async () => {
    expect(await run(selfDeleteCommand({ sudo: true }), { FAIL_DELETE: "1" })).toContain(
      "sudo shutdown -h now",
    );
    const root = await run(selfDeleteCommand({ sudo: false }), { FAIL_DELETE: "1" });
    expect(root).toContain("shutdown -h now");
    expect(root.some((line) => line.startsWith("sudo"))).toBe(false);
  });

  it("the startup script is valid sh that waits ttl + sshTimeout + bootstrapTimeout from boot", () => {
    const seconds = bootWatchdogSeconds({ ttl: 60, sshTimeout: 120, bootstrapTimeout: 240.5 });
    expect(seconds).toBe(421);
    const script = renderStartupScript({ root: "/opt/sky ward", seconds });
    execFileSync("sh", ["-n"], { input: script });
    expect(script).toContain("remaining=$((421 - up))");
    expect(script).toContain("for marker in '/opt/sky ward'/worker.pid '/opt/sky ward'/worker.log;");
    expect(script).toContain(selfDeleteCommand({ sudo: false }));
  });

  it("after a restart, deletes the VM when no worker started since boot, whatever a previous boot left", async () => {
    // A GPU VM restarted after host maintenance runs the startup script again; its worker died with
    // the old boot, leaving worker.pid and worker.log. Without a client (dead, or detached) nothing
    // else would ever end the VM: only a worker started since this boot saves it.
    const root = join(bin, "root");
    await mkdir(root, { recursive: true });
    const bootedAt = Date.now() / 1000 - Number((await readFile("/proc/uptime", "utf8")).split(" ")[0]);
    const outcome = async (fresh: boolean) => {
      for (const name of ["worker.pid", "worker.log"]) {
        await writeFile(join(root, name), "4242\n");
        if (!fresh) await utimes(join(root, name), bootedAt - 3600, bootedAt - 3600);
      }
      await writeFile(log, "");
      execFileSync("sh", ["-c", renderStartupScript({ root, seconds: 0 })], {
        env: { PATH: `${bin}:/usr/bin:/bin` },
      });
      // The watchdog runs in the background: its verdict is in the log once its curl calls are.
      let calls = "";
      for (let waited = 0; waited < 3000 && !calls.includes("instances/"); waited += 100) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        calls = await readFile(log, "utf8");
      }
      return calls.includes("-X DELETE");
    };
    expect(await outcome(false)).toBe(true);
    expect(await outcome(true)).toBe(false);
  });
});
