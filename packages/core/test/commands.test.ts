/**
 * Commands and scripts as tasks (`sky.shell`, `sky.script`) on a Local pool: output, results,
 * failures, argv quoting and timeouts, through the real worker runtime.
 */
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as sky from "../src/index.js";
import { alive, until } from "./fixtures/processes.js";

const tool = fileURLToPath(new URL("./fixtures/argv_tool.py", import.meta.url));
const tricky = ["a b", "$HOME", "'q'", '"dq"', "`id`", "; echo pwned", "", "ünï"];

for (const executor of ["thread", "process"] as const) {
  describe(`commands and scripts as tasks (${executor} executor)`, () => {
    let pool: sky.Pool;
    const logs: sky.LogEvent[] = [];

    beforeAll(async () => {
      pool = await sky.compute({
        nodes: 2,
        image: { includes: [tool] },
        options: { console: false, worker: { executor } },
      });
      pool.on("log", (event) => logs.push(event));
    }, 60_000);

    afterAll(async () => {
      await pool?.close();
    });

    it("broadcasts a command: output as task output, exit code 0 in the result", async () => {
      logs.length = 0;
      const results = await pool.broadcast(sky.shell("echo hi; echo err >&2"));
      expect(results).toEqual([
        { exitCode: 0, signal: null, stdout: "hi\n", stderr: "err\n" },
        { exitCode: 0, signal: null, stdout: "hi\n", stderr: "err\n" },
      ]);
      await until(() => logs.length >= 4, 2_000);
      for (const node of [0, 1]) {
        expect(logs).toContainEqual(expect.objectContaining({ node, stream: "stdout", line: "hi" }));
        expect(logs).toContainEqual(expect.objectContaining({ node, stream: "stderr", line: "err" }));
      }
      expect(logs.every((event) => event.taskId !== undefined)).toBe(true);
    });

    it("maps over commands and scripts, results in input order", async () => {
      const echoed = await pool.map(sky.shell, [["echo one"], ["echo two"], ["echo three"]]);
      expect(echoed.map((result) => result.stdout)).toEqual(["one\n", "two\n", "three\n"]);
      const scripted = await pool.map(sky.script, [
        ["argv_tool.py", ["x y"]],
        ["argv_tool.py", ["$Z"]],
      ]);
      expect(scripted.map((result) => result.stdout)).toEqual(['["x y"]\n', '["$Z"]\n']);
    });

    it("works with run, gather, stream and submit", async () => {
      expect((await pool.run(sky.shell("echo $((1 + 2))"))).stdout).toBe("3\n");
      const [a, b] = await pool.gather(sky.shell("echo a"), sky.script("argv_tool.py", ["b"]));
      expect([a.stdout, b.stdout]).toEqual(["a\n", '["b"]\n']);
      const streamed: string[] = [];
      for await (const result of pool.stream([sky.shell("echo s1"), sky.shell("echo s2")])) {
        streamed.push(result.stdout);
      }
      expect(streamed).toEqual(["s1\n", "s2\n"]);
      expect((await pool.submit(sky.shell("echo handle")).result).stdout).toBe("handle\n");
    });

    it("rejects a non-zero exit with a CommandFailedError carrying the code and the output tail", async () => {
      const failure = await pool
        .run(sky.shell("echo start; echo broken >&2; exit 3"))
        .catch((error) => error);
      expect(sky.CommandFailedError.isInstance(failure)).toBe(true);
      expect(sky.RemoteTaskError.isInstance(failure)).toBe(true);
      expect(failure.exitCode).toBe(3);
      expect(failure.signal).toBeNull();
      expect(failure.outputTail).toContain("start\n");
      expect(failure.outputTail).toContain("broken\n");
      expect(failure.message).toMatch(
        /^`echo start; echo broken >&2; exit 3` exited with code 3 \(on node \d\)\n/,
      );
      const killed = await pool.run(sky.shell("kill -KILL $$")).catch((error) => error);
      expect([killed.exitCode, killed.signal]).toEqual([137, "SIGKILL"]);
    });

    it("passes script arguments exactly, the script shipped with includes", async () => {
      const result = await pool.run(sky.script("argv_tool.py", tricky));
      expect(JSON.parse(result.stdout)).toEqual(tricky);
      const env = await pool.run(sky.shell('printf %s "$VALUE"', { env: { VALUE: "$HOME 'x'" } }));
      expect(env.stdout).toBe("$HOME 'x'");
    });

    it("kills the command and what it started on timeout", async () => {
      const pidFile = join(mkdtempSync(join(tmpdir(), "skyward-shell-")), "pid");
      const running = pool.run(sky.shell(`sleep 30 & echo $! > ${pidFile}; wait`, { timeout: 1 }));
      await expect(running).rejects.toSatisfy((error) => sky.TaskTimeoutError.isInstance(error));
      expect(existsSync(pidFile)).toBe(true);
      const pid = Number(readFileSync(pidFile, "utf8"));
      expect(await until(() => !alive(pid))).toBe(true);
    });

    it("kills the command when its task is cancelled", async () => {
      const pidFile = join(mkdtempSync(join(tmpdir(), "skyward-shell-")), "pid");
      const controller = new AbortController();
      const running = pool.run(sky.shell(`sleep 30 & echo $! > ${pidFile}; wait`), {
        signal: controller.signal,
      });
      expect(await until(() => existsSync(pidFile) && readFileSync(pidFile, "utf8").trim() !== "")).toBe(
        true,
      );
      controller.abort();
      await expect(running).rejects.toSatisfy((error) => sky.CancelledError.isInstance(error));
      const pid = Number(readFileSync(pidFile, "utf8"));
      expect(await until(() => !alive(pid))).toBe(true);
    });
  });
}

describe("sky.shell and sky.script validate their input up front", () => {
  it("names the bad field", () => {
    const issues = (run: () => unknown) => {
      try {
        run();
      } catch (error) {
        if (sky.ConfigurationError.isInstance(error)) return error.issues.map((issue) => issue.path);
        throw error;
      }
      return [];
    };
    expect(issues(() => sky.shell(""))).toEqual(["command"]);
    expect(issues(() => sky.script(""))).toEqual(["path"]);
    expect(issues(() => sky.script("a.py", ["ok", 3 as unknown as string]))).toEqual(["args[1]"]);
    expect(issues(() => sky.shell("ls", { env: { A: 1 as unknown as string } }))).toEqual(["env.A"]);
    expect(issues(() => sky.shell("ls", { cwd: "" }))).toEqual(["cwd"]);
    expect(issues(() => sky.shell("ls", { timeout: -1 }))).toEqual(["timeout"]);
    expect(issues(() => sky.shell("ls", { shell: "bash" } as sky.CommandOptions))).toEqual(["options.shell"]);
    expect(sky.shell("ls").withTimeout(5).timeout).toBe(5);
  });
});
