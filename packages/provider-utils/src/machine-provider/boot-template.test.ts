import { execFileSync, spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { pythonSelfDestructProgram } from "./api-self-destruct.js";
import {
  containerBootEnvironment,
  containerStartCommand,
  curlSelfDestructProgram,
  earlierWorkerMarkersCleared,
  workerWatchdogScript,
} from "./boot-template.js";

const boot = {
  secret: { variable: "ACME_KEY", file: "/etc/skyward/acme-auth", format: "Authorization: Bearer %s\\n" },
  prepare: ['printf "%s\\n" "$PUBLIC_KEY" >> /root/.ssh/authorized_keys;'],
  programVariable: "SKYWARD_SELF_DESTRUCT",
  watchdog: { secondsVariable: "SKYWARD_WATCHDOG_SECONDS", root: "/opt/skyward", targetVariable: "NAME" },
  handOver: "sleep infinity",
};

describe("boot template", () => {
  it("a start command is one valid bash line: the secret dropped from the environment first, the image's command last", () => {
    const command = containerStartCommand(boot);
    const inner = /^bash -c '(.*)'$/.exec(command)?.[1] ?? "";
    execFileSync("bash", ["-n", "-c", inner]);
    expect(inner.indexOf("unset ACME_KEY")).toBeLessThan(inner.indexOf("$PUBLIC_KEY"));
    expect(inner).toContain('|| /usr/local/sbin/skyward-self-destruct "$NAME")');
    expect(inner.endsWith("exec sleep infinity")).toBe(true);
    // The markers of a worker of an earlier start (a restarted container, its disk kept) are cleared
    // before the watchdog is armed (what that does is run below, on workerWatchdogScript's).
    expect(inner).toContain(earlierWorkerMarkersCleared("/opt/skyward"));
    expect(inner.indexOf('rm -f "/opt/skyward/worker.pid"')).toBeLessThan(inner.indexOf("(sleep"));
    expect(() => containerStartCommand({ ...boot, handOver: "echo 'hi'" })).toThrow(/single quote/);
  });

  it("a start command without variable names reads those containerBootEnvironment sets", () => {
    const inner = containerStartCommand({
      ...boot,
      programVariable: undefined,
      watchdog: { root: "/opt/skyward" },
    });
    const env = containerBootEnvironment({
      program: "#!/bin/sh\necho gone\n",
      seconds: 600,
      target: "acme-1",
    });
    expect(Object.keys(env)).toEqual([
      "SKYWARD_INSTANCE_NAME",
      "SKYWARD_WATCHDOG_SECONDS",
      "SKYWARD_SELF_DESTRUCT",
    ]);
    for (const variable of Object.keys(env)) expect(inner).toContain(`"$${variable}"`);
    expect(env.SKYWARD_WATCHDOG_SECONDS).toBe("600");
    expect(Buffer.from(env.SKYWARD_SELF_DESTRUCT ?? "", "base64").toString()).toBe("#!/bin/sh\necho gone\n");
  });

  it("the self-destruct programs are valid shell and Python", () => {
    const directory = mkdtempSync(join(tmpdir(), "boot-template-"));
    const shell = curlSelfDestructProgram({
      apiUrl: "https://api.acme.example/v1",
      headerFile: "/etc/skyward/acme-auth",
      namePattern: "acme-*",
      listPath: "/machines?page=1",
      delete: { method: "POST", path: "/machines/delete", body: '{"id":"$id"}' },
    });
    expect(shell).toContain(`-d '{"id":"'"$id"'"}'`);
    writeFileSync(join(directory, "self-destruct.sh"), shell);
    execFileSync("sh", ["-n", join(directory, "self-destruct.sh")]);
    const python = pythonSelfDestructProgram({
      tokenPath: "/oauth2/token",
      listPath: "/machines",
      nameField: "hostname",
      delete: { method: "DELETE", path: "/machines/{id}", body: { volumes: ["{volume_id}"] } },
    });
    writeFileSync(join(directory, "self-destruct.py"), python);
    execFileSync("python3", ["-m", "py_compile", join(directory, "self-destruct.py")]);
  });

  it("a worker watchdog is valid bash, checked once or every minute, and nothing at 0 seconds", () => {
    const watchdog = { seconds: 90, root: "/opt/$ID", command: "destroy", log: "/tmp/watchdog.log" } as const;
    const once = workerWatchdogScript({ ...watchdog, check: "once" });
    const everyMinute = workerWatchdogScript({ ...watchdog, check: "every-minute" });
    for (const script of [once, everyMinute]) execFileSync("bash", ["-n", "-c", script]);
    expect(once).toContain(
      'sleep 90\n  if ! [ -e "/opt/$ID/worker.pid" ] && ! [ -e "/opt/$ID/worker.log" ]; then',
    );
    expect(everyMinute).toContain('kill -0 "$(cat /opt/$ID/worker.pid)"');
    expect(everyMinute).toContain("/proc/");
    expect(everyMinute).toContain('if [ "$idle" -ge 90 ]; then destroy; idle=0; fi');
    expect(workerWatchdogScript({ ...watchdog, seconds: 0, check: "once" })).toBe("");
  });

  it("a worker of an earlier start of the container (its markers on a kept disk) does not count: the watchdog fires, the old log kept", async () => {
    // A container restarted with its disk kept (a pod volume, Vast.ai's disk): the worker of the
    // old start died with it, but its worker.pid (naming a pid alive now: pids are reused) and
    // worker.log are still there.
    for (const check of ["once", "every-minute"] as const) {
      const directory = mkdtempSync(join(tmpdir(), "boot-watchdog-"));
      // `sleep` that waits for `go`: the watchdog's wait ends when the test says.
      writeFileSync(
        join(directory, "sleep"),
        `#!/bin/sh\nwhile [ ! -e ${directory}/go ]; do /bin/sleep 0.05; done\n`,
        { mode: 0o755 },
      );
      const alive = spawn("sleep", ["120"], { stdio: "ignore" });
      try {
        writeFileSync(join(directory, "worker.pid"), `${alive.pid}\n`);
        writeFileSync(join(directory, "worker.log"), "the old worker's output\n");
        const script = workerWatchdogScript({
          seconds: 60,
          root: directory,
          command: `touch ${directory}/destroyed; exit 0`,
          log: join(directory, "watchdog.log"),
          check,
        });
        execFileSync("bash", ["-c", script], {
          env: { ...process.env, PATH: `${directory}:${process.env.PATH}` },
        });
        writeFileSync(join(directory, "go"), "");
        const deadline = Date.now() + 20_000;
        while (!existsSync(join(directory, "destroyed")) && Date.now() < deadline)
          await new Promise((resolve) => setTimeout(resolve, 50));
        expect(existsSync(join(directory, "destroyed")), check).toBe(true);
        expect(readFileSync(join(directory, "worker.log.old"), "utf8")).toBe("the old worker's output\n");
      } finally {
        alive.kill("SIGKILL");
        spawnSync("pkill", ["-f", directory]);
        rmSync(directory, { recursive: true, force: true });
      }
    }
  }, 60_000);

  it("a worker started after the watchdog was armed keeps the machine", async () => {
    const directory = mkdtempSync(join(tmpdir(), "boot-watchdog-"));
    writeFileSync(
      join(directory, "sleep"),
      `#!/bin/sh\nwhile [ ! -e ${directory}/go ]; do /bin/sleep 0.05; done\n`,
      { mode: 0o755 },
    );
    try {
      const script = workerWatchdogScript({
        seconds: 60,
        root: directory,
        command: `touch ${directory}/destroyed; exit 0`,
        log: join(directory, "watchdog.log"),
        check: "once",
      });
      execFileSync("bash", ["-c", script], {
        env: { ...process.env, PATH: `${directory}:${process.env.PATH}` },
      });
      writeFileSync(join(directory, "worker.pid"), "1\n");
      writeFileSync(join(directory, "go"), "");
      // The watchdog's check is done once its shell (whose command line names the directory) has ended.
      const deadline = Date.now() + 20_000;
      while (spawnSync("pgrep", ["-f", directory]).status === 0 && Date.now() < deadline)
        await new Promise((resolve) => setTimeout(resolve, 50));
      expect(spawnSync("pgrep", ["-f", directory]).status).toBe(1);
      expect(existsSync(join(directory, "destroyed"))).toBe(false);
    } finally {
      spawnSync("pkill", ["-f", directory]);
      rmSync(directory, { recursive: true, force: true });
    }
  }, 60_000);

  it("the every-minute watchdog counts a worker that ended but was never reaped (a zombie) as gone", async () => {
    const directory = mkdtempSync(join(tmpdir(), "boot-watchdog-"));
    // `sleep` that returns at once: each minute of the watchdog passes at once.
    writeFileSync(join(directory, "sleep"), "#!/bin/sh\nexit 0\n", { mode: 0o755 });
    // A parent that never waits for its child, as a container's PID 1 that does not reap.
    const parent = spawn(
      "python3",
      [
        "-c",
        "import os, time\npid = os.fork()\nif pid == 0:\n    os._exit(0)\nprint(pid, flush=True)\ntime.sleep(120)",
      ],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    try {
      const pid = await new Promise<number>((resolve) =>
        parent.stdout?.once("data", (data: Buffer) => resolve(Number(data.toString().trim()))),
      );
      while (readFileSync(`/proc/${pid}/stat`, "utf8").replace(/^.*\) /, "")[0] !== "Z")
        await new Promise((resolve) => setTimeout(resolve, 20));
      writeFileSync(join(directory, "worker.pid"), `${pid}\n`);
      const script = workerWatchdogScript({
        seconds: 90,
        root: directory,
        command: `touch ${directory}/destroyed; exit 0`,
        log: join(directory, "watchdog.log"),
        check: "every-minute",
      });
      execFileSync("bash", ["-c", script], {
        env: { ...process.env, PATH: `${directory}:${process.env.PATH}` },
      });
      const deadline = Date.now() + 20_000;
      while (!existsSync(join(directory, "destroyed")) && Date.now() < deadline)
        await new Promise((resolve) => setTimeout(resolve, 50));
      expect(existsSync(join(directory, "destroyed"))).toBe(true);
    } finally {
      parent.kill("SIGKILL");
      // A watchdog still looping (the zombie counted as running) is stopped: its command names the directory.
      spawnSync("pkill", ["-f", directory]);
      rmSync(directory, { recursive: true, force: true });
    }
  }, 60_000);
});
