import { describe, expect, it } from "vitest";
import { CommandFailedError, RemoteTaskError } from "../errors/errors.js";
import { commandFailedError, script, shell } from "./commands.js";

const type = "skyward.commands.CommandFailedError";

describe("commandFailedError", () => {
  it("reads the exit code, the signal and the output tail from the worker's message", () => {
    const error = commandFailedError({
      taskId: "t-1",
      node: 2,
      type,
      message: "`make` exited with code 2\n--- output (tail) ---\nmake: *** [all] Error 1\n",
      traceback: "Traceback …",
    });
    expect(CommandFailedError.isInstance(error) && RemoteTaskError.isInstance(error)).toBe(true);
    expect([error?.exitCode, error?.signal, error?.outputTail, error?.node]).toEqual([
      2,
      null,
      "make: *** [all] Error 1\n",
      2,
    ]);
    expect(error?.message).toBe(
      "`make` exited with code 2 (on node 2)\n--- output (tail) ---\nmake: *** [all] Error 1\n",
    );
    const killed = commandFailedError({
      taskId: "t-2",
      node: 0,
      type,
      message: "script a.py was killed by SIGKILL (exit code 137)",
      traceback: "",
    });
    expect([killed?.exitCode, killed?.signal, killed?.outputTail]).toEqual([137, "SIGKILL", ""]);
  });

  it("leaves other errors alone", () => {
    const failure = { taskId: "t", node: 0, message: "exited with code 1", traceback: "" };
    expect(commandFailedError({ ...failure, type: "ValueError" })).toBeUndefined();
    expect(commandFailedError({ ...failure, type, message: "something else" })).toBeUndefined();
  });
});

describe("shell and script", () => {
  it("are pending tasks of the runtime's command functions", () => {
    const pending = shell("ls -l", { env: { A: "1" }, cwd: "/tmp", timeout: 5 });
    expect([pending.kind, pending.ref, pending.args, pending.kwargs, pending.timeout]).toEqual([
      "task",
      "skyward.commands:run_shell",
      ["ls -l"],
      { env: { A: "1" }, cwd: "/tmp" },
      5,
    ]);
    const run = script("train.py", ["--lr", "0.1"]);
    expect([run.ref, run.args, run.kwargs, run.timeout]).toEqual([
      "skyward.commands:run_script",
      ["train.py", ["--lr", "0.1"]],
      {},
      undefined,
    ]);
  });
});
