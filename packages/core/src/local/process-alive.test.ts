import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { describe, expect, it } from "vitest";
import { processAlive } from "./process-alive.js";

/** A Python parent that forks a child which exits at once and is never waited for: a zombie. */
async function withZombie(check: (zombiePid: number, parentPid: number) => void): Promise<void> {
  const program = [
    "import os, sys, time",
    "pid = os.fork()",
    "if pid == 0: os._exit(0)",
    "print(pid, flush=True)",
    "time.sleep(60)",
  ].join("\n");
  const parent = spawn("python3", ["-c", program], { stdio: ["ignore", "pipe", "inherit"] });
  try {
    const line = await new Promise<string>((resolve, reject) => {
      createInterface({ input: parent.stdout }).once("line", resolve);
      parent.once("error", reject);
    });
    const zombiePid = Number(line);
    // Wait until the child has exited (its state turns Z), however loaded the machine is.
    const state = () => readFileSync(`/proc/${zombiePid}/stat`, "utf8").split(")").at(-1)?.trim()[0];
    const deadline = Date.now() + 30_000;
    while (state() !== "Z" && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    check(zombiePid, parent.pid as number);
  } finally {
    parent.kill("SIGKILL");
  }
}

describe("processAlive", () => {
  it("is true for a running process and for this one", async () => {
    expect(processAlive(process.pid)).toBe(true);
    await withZombie((_zombie, parentPid) => expect(processAlive(parentPid)).toBe(true));
  });

  it("is false for an exited process its parent has not reaped yet (a zombie), which kill(pid, 0) still reaches", async () => {
    await withZombie((zombiePid) => {
      expect(() => process.kill(zombiePid, 0)).not.toThrow();
      expect(processAlive(zombiePid)).toBe(false);
    });
  });

  it("is false for a pid no process has", () => {
    // Above Linux's largest pid_max (2^22): no process can have it.
    expect(processAlive(4_194_305)).toBe(false);
  });
});
