import { execFileSync } from "node:child_process";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ConfigurationError, SkywardError } from "../errors/errors.js";
import { LaunchCommand, shellQuote } from "./launch-command.js";

const printArgv = "import json,sys; print(json.dumps(sys.argv[1:]))";

/** Runs `line` with /bin/sh and returns what the python entrypoint saw as its arguments. */
function runThroughShell(line: string): unknown {
  const output = execFileSync("/bin/sh", ["-c", line], {
    encoding: "utf8",
    env: { ...process.env, PYTHONIOENCODING: "utf-8", PYTHONUTF8: "1", LC_ALL: "C.UTF-8" },
  });
  return JSON.parse(output);
}

/** A command whose program prints its argv as JSON: `python3 -c '<code>' args…`. */
function echoCommand(args: readonly string[]): LaunchCommand {
  return LaunchCommand.create({ launcher: "python3 -c", entrypoint: printArgv, args });
}

const tricky = [
  "with spaces",
  "  leading and trailing  ",
  "single ' quote",
  "''",
  'double " quote',
  "$(rm -rf /)",
  "`rm -rf /`",
  // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell parameter expansion, on purpose.
  "$HOME ${HOME} $1 $@ $$",
  "line one\nline two\n",
  "\r\n\t",
  "",
  "*",
  "/*",
  "?[a-z]{1,2}",
  "~",
  "~root",
  "a=b",
  "; echo pwned && true || false | cat > /tmp/nope &",
  "#not a comment",
  "\\back\\slash\\",
  "!event",
  "-c",
  "--",
  "日本語 ünïcødé 🚀 \u00a0\u2028",
];

describe("shellQuote", () => {
  it("leaves plain words alone and single-quotes everything else", () => {
    expect(shellQuote("--node-id")).toBe("--node-id");
    expect(shellQuote("/opt/venv/bin/python3.12")).toBe("/opt/venv/bin/python3.12");
    expect(shellQuote("")).toBe("''");
    expect(shellQuote("a b")).toBe("'a b'");
    expect(shellQuote("it's")).toBe("'it'\\''s'");
    expect(shellQuote("a=b")).toBe("'a=b'");
    expect(shellQuote("~")).toBe("'~'");
  });

  it("refuses NUL, which no shell word can carry", () => {
    expect(() => shellQuote("a\0b")).toThrow(SkywardError);
    expect(() => shellQuote("a\0b")).toThrow(/NUL/);
  });

  it("round-trips every tricky string as one word through /bin/sh", () => {
    const line = `printf '%s\\0' ${tricky.map(shellQuote).join(" ")}`;
    const output = execFileSync("/bin/sh", ["-c", line], { encoding: "utf8" });
    expect(output.split("\0").slice(0, -1)).toEqual(tricky);
  });
});

describe("LaunchCommand", () => {
  it("defaults every part to empty", () => {
    const command = LaunchCommand.create();
    expect(command.launcher).toBe("");
    expect(command.entrypoint).toBe("");
    expect(command.args).toEqual([]);
    expect(command.render()).toBe("");
  });

  it("renders the launcher verbatim and quotes the entrypoint and arguments", () => {
    const command = LaunchCommand.create({
      launcher: "accelerate launch --num_machines 4 --main_process_ip 10.0.0.1",
      entrypoint: "/opt/skyward/worker.py",
      args: ["--node-id", "2", "--name", "my pool"],
    });
    expect(command.render()).toBe(
      "accelerate launch --num_machines 4 --main_process_ip 10.0.0.1 /opt/skyward/worker.py --node-id 2 --name 'my pool'",
    );
    expect(String(command)).toBe(command.render());
  });

  it("leaves out an empty launcher and entrypoint but keeps empty arguments", () => {
    expect(LaunchCommand.create({ entrypoint: "worker", args: ["", "x"] }).render()).toBe("worker '' x");
    expect(LaunchCommand.create({ launcher: "   ", entrypoint: "w" }).render()).toBe("w");
    expect(
      LaunchCommand.create({ launcher: "python3 -m skyward.worker", args: ["--port", "0"] }).render(),
    ).toBe("python3 -m skyward.worker --port 0");
  });

  it("is immutable and with() returns a changed copy", () => {
    const args = ["--a"];
    const original = LaunchCommand.create({ launcher: "python3", entrypoint: "w.py", args });
    args.push("--mutated-after-create");
    expect(original.args).toEqual(["--a"]);
    expect(Object.isFrozen(original)).toBe(true);
    expect(Object.isFrozen(original.args)).toBe(true);
    expect(() => {
      (original as { launcher: string }).launcher = "bash";
    }).toThrow(TypeError);

    const wrapped = original.with({ launcher: "torchrun --nproc-per-node 8" });
    expect(wrapped).not.toBe(original);
    expect(wrapped.launcher).toBe("torchrun --nproc-per-node 8");
    expect(wrapped.entrypoint).toBe("w.py");
    expect(wrapped.args).toEqual(["--a"]);
    expect(original.launcher).toBe("python3");

    const extended = original.with({ args: [...original.args, "--b"] });
    expect(extended.args).toEqual(["--a", "--b"]);
    expect(original.args).toEqual(["--a"]);
    expect(original.with({ launcher: "" }).launcher).toBe("");
  });

  it("rejects bad parts with a ConfigurationError naming the field", () => {
    const issuesOf = (fn: () => unknown) => {
      try {
        fn();
      } catch (error) {
        expect(ConfigurationError.isInstance(error)).toBe(true);
        return (error as ConfigurationError).issues;
      }
      throw new Error("expected a ConfigurationError");
    };
    expect(issuesOf(() => LaunchCommand.create({ args: ["ok", 3 as unknown as string] }))).toEqual([
      { path: "args[1]", message: "expected each argument to be a string" },
    ]);
    expect(issuesOf(() => LaunchCommand.create({ entrypoint: "a\0b" }))).toEqual([
      { path: "entrypoint", message: "must not contain a NUL character" },
    ]);
    expect(issuesOf(() => LaunchCommand.create({ launcher: "accelerate launch\n" }))).toEqual([
      { path: "launcher", message: "must be a single line (no line breaks)" },
    ]);
    expect(issuesOf(() => LaunchCommand.create({ args: "--x" as unknown as string[] }))[0]?.path).toBe(
      "args",
    );
    expect(issuesOf(() => LaunchCommand.create().with({ args: ["\0"] }))[0]?.path).toBe("args[0]");
  });
});

describe("LaunchCommand.render() through a real shell", () => {
  const scratch = mkdtempSync(join(tmpdir(), "skyward-launch-"));
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));

  it("delivers tricky arguments byte-for-byte", () => {
    const args = ["", ...tricky, ""];
    expect(runThroughShell(echoCommand(args).render())).toEqual(args);
  });

  it("runs an entrypoint script whose path holds spaces and quotes, with no launcher", () => {
    const dir = join(scratch, "dir with 'quotes' and $(spaces)");
    execFileSync("mkdir", ["-p", dir]);
    const script = join(dir, "print argv.py");
    writeFileSync(script, `#!/usr/bin/env python3\n${printArgv}\n`);
    chmodSync(script, 0o755);
    const args = ["--node-id", "0", "x y", "", "'\"`"];
    expect(runThroughShell(LaunchCommand.create({ entrypoint: script, args }).render())).toEqual(args);
    expect(
      runThroughShell(LaunchCommand.create({ launcher: "python3", entrypoint: script, args }).render()),
    ).toEqual(args);
  });

  it("keeps a launcher's own shell syntax working", () => {
    const command = LaunchCommand.create({
      launcher: 'FROM_LAUNCHER="set by launcher" python3 -c',
      entrypoint: "import json,os,sys; print(json.dumps([os.environ['FROM_LAUNCHER'], *sys.argv[1:]]))",
      args: ["$FROM_LAUNCHER"],
    });
    expect(runThroughShell(command.render())).toEqual(["set by launcher", "$FROM_LAUNCHER"]);
  });

  it("round-trips 200 random strings (every code point 1..255, and random unicode)", () => {
    // A seeded generator, so a failure can be reproduced.
    let state = 0x5eed;
    const random = () => {
      state = (Math.imul(state, 1103515245) + 12345) >>> 0;
      return state / 2 ** 32;
    };
    const randomCodePoint = (): number => {
      const pick = random();
      if (pick < 0.6) return 1 + Math.floor(random() * 255);
      if (pick < 0.9) return 0x100 + Math.floor(random() * (0xd800 - 0x100));
      return 0xe000 + Math.floor(random() * (0x10ffff - 0xe000)); // skips the surrogate range
    };
    const strings: string[] = [];
    // Every code point from 1 to 255 appears at least once, alone and mixed in.
    for (let codePoint = 1; codePoint <= 255; codePoint += 1) {
      if (codePoint % 5 === 0) strings.push(String.fromCodePoint(codePoint));
    }
    strings.push(String.fromCodePoint(...Array.from({ length: 255 }, (_, index) => index + 1)));
    while (strings.length < 200) {
      const length = Math.floor(random() * 40);
      strings.push(String.fromCodePoint(...Array.from({ length }, randomCodePoint)));
    }
    for (let start = 0; start < strings.length; start += 50) {
      const batch = strings.slice(start, start + 50);
      expect(runThroughShell(echoCommand(batch).render())).toEqual(batch);
    }
  });
});
