import { spawnSync } from "node:child_process";
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ONSTART_MAX_LENGTH, onstartScript, SELF_DESTRUCT_COMMAND } from "./onstart-script.js";

const options = { watchdogGraceSeconds: 1800, root: "/opt/skyward" };

let directory: string;
beforeEach(async () => {
  directory = await mkdtemp(join(tmpdir(), "skyward-onstart-"));
});
afterEach(async () => {
  await rm(directory, { recursive: true, force: true });
});

/** The script with its fixed paths moved under `directory`, so it can run here. */
function relocated(script: string): string {
  return script
    .replaceAll("/root/.skyward", join(directory, "skyward"))
    .replaceAll(SELF_DESTRUCT_COMMAND, join(directory, "skyward-self-destruct"));
}

describe("onstartScript", () => {
  it("fits Vast.ai's onstart limit, is valid bash, and holds no secret", () => {
    const script = onstartScript(options);
    expect(script.length).toBeLessThan(ONSTART_MAX_LENGTH);
    const syntax = spawnSync("bash", ["-n"], { input: script, encoding: "utf8" });
    expect(syntax.status, syntax.stderr).toBe(0);
    expect(script).toContain('"$CONTAINER_API_KEY"');
    expect(script).not.toMatch(/Bearer [A-Za-z0-9]{8}/);
  });

  it("without a grace period there is no watchdog, only the self-destruct command", () => {
    const script = onstartScript({ ...options, watchdogGraceSeconds: 0 });
    expect(script).not.toContain("nohup");
    expect(script).toContain(`chmod 700 ${SELF_DESTRUCT_COMMAND}`);
    expect(onstartScript(options)).toContain('if [ "$idle" -ge 1800 ]');
  });

  it("saves the container's id and key 0600, and installs a command that DELETEs the instance with them", async () => {
    const bin = join(directory, "bin");
    await mkdir(bin);
    // A curl that records how it was called and what it read on its standard input, and answers 200.
    await writeFile(
      join(bin, "curl"),
      `#!/bin/sh\nprintf '%s\\n' "$@" > ${join(directory, "curl.args")}\ncat > ${join(directory, "curl.stdin")}\nprintf 200\n`,
    );
    await chmod(join(bin, "curl"), 0o755);
    const script = relocated(onstartScript({ ...options, watchdogGraceSeconds: 0 }));
    const env = {
      PATH: `${bin}:${process.env.PATH}`,
      CONTAINER_ID: "31000001",
      CONTAINER_API_KEY: "instance-scoped-key",
    };
    const boot = spawnSync("bash", ["-c", script], { env, encoding: "utf8" });
    expect(boot.status, boot.stderr).toBe(0);
    const saved = join(directory, "skyward", "vast-instance.env");
    expect(await readFile(saved, "utf8")).toBe(
      "CONTAINER_ID=31000001\nCONTAINER_API_KEY=instance-scoped-key\n",
    );
    expect(spawnSync("stat", ["-c", "%a", saved], { encoding: "utf8" }).stdout.trim()).toBe("600");
    // The worker's SSH session has neither variable: the command reads them from the saved file.
    const run = spawnSync(join(directory, "skyward-self-destruct"), [], {
      env: { PATH: `${bin}:${process.env.PATH}` },
      encoding: "utf8",
    });
    expect(run.status, run.stderr).toBe(0);
    // The key comes on curl's standard input (`-H @-`), never among its arguments, which `ps` shows.
    expect((await readFile(join(directory, "curl.args"), "utf8")).split("\n")).toEqual([
      "-sS",
      "-o",
      "/dev/null",
      "-w",
      "%{http_code}",
      "-X",
      "DELETE",
      "-H",
      "@-",
      "https://console.vast.ai/api/v0/instances/31000001/",
      "",
    ]);
    expect(await readFile(join(directory, "curl.stdin"), "utf8")).toBe(
      "Authorization: Bearer instance-scoped-key\n",
    );
  });

  it("tries the destroy again while Vast.ai refuses (a 429, a 5xx), and counts an instance already gone as destroyed", async () => {
    const bin = join(directory, "bin");
    await mkdir(bin);
    // A curl answering 429 the first time, then what `answer` holds; each call recorded.
    const calls = join(directory, "curl.calls");
    const answer = join(directory, "answer");
    await writeFile(
      join(bin, "curl"),
      `#!/bin/sh\necho call >> ${calls}\nif [ ! -e ${answer}.used ]; then touch ${answer}.used; printf 429; exit 22; fi\ncat ${answer}\n`,
    );
    await chmod(join(bin, "curl"), 0o755);
    const script = relocated(onstartScript({ ...options, watchdogGraceSeconds: 0 }));
    const env = { PATH: `${bin}:${process.env.PATH}`, CONTAINER_ID: "31000001", CONTAINER_API_KEY: "k" };
    expect(spawnSync("bash", ["-c", script], { env, encoding: "utf8" }).status).toBe(0);
    const destroy = () =>
      spawnSync(join(directory, "skyward-self-destruct"), [], {
        env: { PATH: `${bin}:${process.env.PATH}`, SKYWARD_RETRY_SECONDS: "0" },
        encoding: "utf8",
      });
    await writeFile(answer, "200");
    expect(destroy().status).toBe(0);
    expect(await readFile(calls, "utf8")).toBe("call\ncall\n");
    // Destroyed already (the pool's terminate went first): done, not a failure.
    await writeFile(answer, "404");
    await rm(calls);
    expect(destroy().status).toBe(0);
    expect(await readFile(calls, "utf8")).toBe("call\n");
  });
});
