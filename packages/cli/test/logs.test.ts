/**
 * `skyward logs` end to end: the built `dist/cli.js` reading log files written by hand, by real Local
 * pools in another process, and by another process's writer rotating the file while it is followed.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { mkdir, mkdtemp, readFile, rm, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const cli = fileURLToPath(new URL("../dist/cli.js", import.meta.url));
const writerScript = fileURLToPath(new URL("./fixtures/log-writer.mjs", import.meta.url));
const SECRET = "tok_LogsCommandSecret42";

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

let scratch: string;
let skywardHome: string;
let project: string;

function run(args: readonly string[], env: Record<string, string> = {}): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [cli, ...args],
      {
        cwd: project,
        env: { PATH: process.env.PATH ?? "", HOME: scratch, SKYWARD_HOME: skywardHome, ...env },
        timeout: 30_000,
      },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === "number" ? error.code : null) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

function record(pool: string, level: string, msg: string, extra: Record<string, unknown> = {}): string {
  return JSON.stringify({ ts: "2026-05-01T10:00:00.000Z", level, pool, pid: 7, event: "log", msg, ...extra });
}

/** A `skyward logs --follow` child whose output is collected as it comes. */
function startFollower(args: readonly string[]) {
  const child = spawn(process.execPath, [cli, "logs", "--follow", ...args], {
    cwd: project,
    env: { PATH: process.env.PATH ?? "", HOME: scratch, SKYWARD_HOME: skywardHome },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const output = { stdout: "", stderr: "" };
  child.stdout.on("data", (chunk: Buffer) => {
    output.stdout += chunk.toString("utf8");
  });
  child.stderr.on("data", (chunk: Buffer) => {
    output.stderr += chunk.toString("utf8");
  });
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  return { child, output, exited };
}

async function until(what: string, condition: () => boolean, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

function runWriter(args: readonly string[]): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [writerScript, ...args],
      { env: process.env, timeout: 120_000 },
      (error, stdout, stderr) => {
        resolve({ code: error ? (typeof error.code === "number" ? error.code : null) : 0, stdout, stderr });
      },
    );
  });
}

async function stop(follower: {
  child: ChildProcess;
  exited: Promise<number | null>;
}): Promise<number | null> {
  follower.child.kill("SIGTERM");
  return await follower.exited;
}

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), "skyward-logs-cli-"));
  skywardHome = join(scratch, "skyward-home");
  project = join(scratch, "project");
  await mkdir(join(skywardHome, "logs"), { recursive: true });
  await mkdir(project, { recursive: true });
  const file = join(skywardHome, "logs", "skyward.log");
  // Three generations, oldest first: .2, .1, then the current file; a foreign line in the middle.
  await writeFile(
    `${file}.2`,
    `${[record("aaaa1111", "INFO", "a0"), record("bbbb2222", "DEBUG", "b0")].join("\n")}\n`,
  );
  await writeFile(
    `${file}.1`,
    `${[record("aaaa1111", "WARNING", "a1"), "not a record", record("bbbb2222", "INFO", "b1")].join("\n")}\n`,
  );
  await writeFile(
    file,
    `${[
      record("aaaa1111", "ERROR", "a2", { node: 1 }),
      record("bbbb2222", "INFO", `b2 ${SECRET}`),
      record("aaaa1111", "INFO", "a3"),
    ].join("\n")}\n`,
  );
});

afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

describe("skyward logs", () => {
  it("prints the last lines of the default file ($SKYWARD_HOME/logs/skyward.log), reading into rotated ones", async () => {
    const last = await run(["logs", "--lines", "3"]);
    expect(last.code, last.stderr).toBe(0);
    expect(last.stdout.trim().split("\n")).toEqual([
      "2026-05-01T10:00:00.000Z ERROR   aaaa1111 [node 1] a2",
      "2026-05-01T10:00:00.000Z INFO    bbbb2222 [pool] b2 tok_LogsCommandSecret42",
      "2026-05-01T10:00:00.000Z INFO    aaaa1111 [pool] a3",
    ]);
    const all = await run(["logs"]);
    expect(
      all.stdout
        .trim()
        .split("\n")
        .map((line) => line.split(" ").at(-1)),
    ).toEqual(["a0", "b0", "a1", "record", "b1", "a2", "tok_LogsCommandSecret42", "a3"]);
  });

  it("masks the credential-looking environment's secrets in what it prints", async () => {
    const masked = await run(["logs", "--pool", "bbbb2222"], { SOME_API_TOKEN: SECRET });
    expect(masked.stdout).not.toContain(SECRET);
    expect(masked.stdout).toContain("b2 [redacted]");
  });

  it("filters by pool and by minimum level, and prints stored JSON with --json", async () => {
    const pool = await run(["logs", "--pool", "aaaa1111"]);
    expect(
      pool.stdout
        .trim()
        .split("\n")
        .map((line) => line.split(" ").at(-1)),
    ).toEqual(["a0", "a1", "a2", "a3"]);
    const warnings = await run(["logs", "--level", "warn"]);
    expect(
      warnings.stdout
        .trim()
        .split("\n")
        .map((line) => line.split(" ").at(-1)),
    ).toEqual(["a1", "a2"]);
    const json = await run(["logs", "--json", "--level", "INFO", "--lines", "2"]);
    const records = json.stdout
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line));
    expect(records.map((entry) => entry.msg)).toEqual([`b2 ${SECRET}`, "a3"]);
    expect(records[1]).toEqual({
      ts: "2026-05-01T10:00:00.000Z",
      level: "INFO",
      pool: "aaaa1111",
      pid: 7,
      event: "log",
      msg: "a3",
    });
  });

  it("reads the file the project's pools log to, and asks for --file when they name several", async () => {
    const projectLog = join(scratch, "project.log");
    await writeFile(projectLog, `${record("cccc3333", "INFO", "from the project")}\n`);
    await writeFile(
      join(project, "skyward.toml"),
      `[pools.train]\nnodes = 1\n[pools.train.options.logging]\nfile = "${projectLog}"\nlevel = "DEBUG"\n`,
    );
    await writeFile(
      join(project, "relative.log"),
      `${record("dddd4444", "INFO", "relative to the project")}\n`,
    );
    const relative = await run(["logs", "--file", "relative.log"]);
    expect(relative.code, relative.stderr).toBe(0);
    expect(relative.stdout).toContain("dddd4444 [pool] relative to the project");
    try {
      const named = await run(["logs"]);
      expect(named.code, named.stderr).toBe(0);
      expect(named.stdout).toContain("cccc3333 [pool] from the project");
      await writeFile(
        join(project, "skyward.toml"),
        `[pools.a.options.logging]\nfile = "${projectLog}"\n[pools.b.options.logging]\nfile = "${join(scratch, "other.log")}"\n`,
      );
      const several = await run(["logs"]);
      expect(several.code).toBe(2);
      expect(several.stderr).toContain("several files");
      expect(several.stderr).toContain("--file");
    } finally {
      await rm(join(project, "skyward.toml"), { force: true });
    }
  });

  it("prints lines of multi-byte characters whole, wherever its reads of a large file split them", async () => {
    // A progress bar's blocks (3 bytes each in UTF-8): lines long enough that the file's 256 KiB reads
    // end inside characters.
    const bar = "█".repeat(1000);
    const lines = Array.from({ length: 200 }, (_, index) => record("eeee5555", "INFO", `${index} ${bar}`));
    const file = join(scratch, "unicode.log");
    await writeFile(file, `${lines.join("\n")}\n`);
    const printed = await run(["logs", "--file", file, "--json", "--lines", "200"]);
    expect(printed.code, printed.stderr).toBe(0);
    expect(printed.stdout).not.toContain("\uFFFD");
    expect(printed.stdout).toBe(`${lines.join("\n")}\n`);
  });

  it("names the flag of a bad argument (exit 2) and says when there is no log file (exit 1)", async () => {
    const cases: [string[], RegExp][] = [
      [["logs", "--lines=-3"], /--lines expects a whole number >= 0, received "-3"/],
      [["logs", "--lines", "ten"], /--lines expects/],
      [["logs", "--level", "LOUD"], /--level expects TRACE, DEBUG, INFO, WARNING or ERROR, received "LOUD"/],
      [["logs", "--bogus"], /Unknown option '--bogus'/],
      [["logs", "--provider", "aws"], /logs takes no --provider/],
      [["logs", "--timeout", "0"], /--timeout expects a number > 0/],
      // 30 days: past the longest timer Node keeps, which would fire at once (a follow ended at once).
      [["logs", "--follow", "--timeout", "2592000"], /--timeout expects at most 2147483 seconds/],
    ];
    const results = await Promise.all(cases.map(([args]) => run(args)));
    for (const [index, [args, message]] of cases.entries()) {
      expect(results[index]?.code, args.join(" ")).toBe(2);
      expect(results[index]?.stderr).toMatch(message);
    }
    const missing = await run(["logs", "--file", join(scratch, "nothing-here.log")]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain(`no log file at ${join(scratch, "nothing-here.log")}`);
    const help = await run(["logs", "--help"]);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain("--follow");
    const overview = await run(["--help"]);
    expect(overview.stdout).toMatch(/logs\s+print or follow the pools' log file/);
  });

  it("--follow prints what a real pool in another process writes, from before the file exists, until SIGTERM", async () => {
    const file = join(scratch, "follow", "pool.log");
    const follower = startFollower(["--file", file, "--lines", "0"]);
    try {
      await until("the follower to wait for the file", () => follower.output.stderr.includes("waiting for"));
      const pool = await runWriter(["pool", file, "hello", "5"]);
      expect(pool.code, pool.stderr).toBe(0);
      const poolId = pool.stdout.trim();
      await until("the pool's lines", () => follower.output.stdout.includes(`${poolId} [pool] destroyed`));
      const lines = follower.output.stdout.trim().split("\n");
      expect(lines.every((line) => line.includes(` ${poolId} `))).toBe(true);
      expect(
        lines.filter((line) => / hello line \d$/.test(line)).map((line) => line.split(" ").at(-1)),
      ).toEqual(["0", "1", "2", "3", "4"]);
      expect(
        lines.some((line) => line.includes("DEBUG") && line.includes("log_tasks:chatter completed")),
      ).toBe(true);
      // Printed once: what the follower printed is the file, line for line.
      const stored = (await readFile(file, "utf8")).trim().split("\n");
      expect(lines).toHaveLength(stored.length);
    } finally {
      // A follower that ignored SIGTERM would hang here until the test's own timeout fails it.
      expect(await stop(follower)).toBe(0);
    }
  }, 120_000);

  it("--follow picks up a file removed and written anew, without reprinting older generations", async () => {
    const directory = join(scratch, "recreated");
    const file = join(directory, "skyward.log");
    await mkdir(directory, { recursive: true });
    await writeFile(`${file}.1`, `${record("old00000", "INFO", "old generation")}\n`);
    const hourAgo = new Date(Date.now() - 3_600_000);
    await utimes(`${file}.1`, hourAgo, hourAgo);
    await writeFile(file, `${record("cur00000", "INFO", "current")}\n`);
    const follower = startFollower(["--file", file, "--lines", "1"]);
    try {
      await until("the current line", () => follower.output.stdout.includes("current"));
      await rm(file);
      await writeFile(file, `${record("new00000", "INFO", "fresh")}\n`);
      await until("the new file's line", () => follower.output.stdout.includes("fresh"));
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(follower.output.stdout).not.toContain("old generation");
      expect(follower.output.stdout.trim().split("\n")).toHaveLength(2);
    } finally {
      expect(await stop(follower)).toBe(0);
    }
  }, 120_000);

  it("prints every line once and in order while another process rotates the file under it", async () => {
    const file = join(scratch, "rotating-once", "skyward.log");
    await mkdir(join(scratch, "rotating-once"), { recursive: true });
    const count = 300;
    let finished = false;
    const writing = runWriter(["lines", file, String(count), "2 KB"]).finally(() => {
      finished = true;
    });
    const reads: string[][] = [];
    while (!finished) {
      const read = await run(["logs", "--file", file, "--lines", "100000", "--json"]);
      if (read.code === 0) reads.push(read.stdout.trim().split("\n").filter(Boolean));
      else expect(read.stderr).toMatch(/no log file/);
    }
    const writer = await writing;
    expect(writer.code, writer.stderr).toBe(0);
    reads.push(
      (await run(["logs", "--file", file, "--lines", "100000", "--json"])).stdout.trim().split("\n"),
    );
    // Each look holds the lines written so far, from the first: none skipped, none twice.
    for (const read of reads) {
      const printed = read.map((line) => JSON.parse(line).msg.split(" ").slice(0, 2).join(" "));
      expect(printed).toEqual(Array.from({ length: printed.length }, (_, index) => `line ${index}`));
    }
    expect(reads.at(-1)).toHaveLength(count);
    expect(reads.filter((read) => read.length > 0 && read.length < count).length).toBeGreaterThan(0);
  }, 120_000);

  it("--follow goes on across rotations by another process, every line once and in order", async () => {
    const file = join(scratch, "rotating", "skyward.log");
    await mkdir(join(scratch, "rotating"), { recursive: true });
    await writeFile(file, `${record("before00", "INFO", "before")}\n`);
    const follower = startFollower(["--file", file, "--lines", "1", "--json"]);
    try {
      await until("the last line before following", () => follower.output.stdout.includes('"before"'));
      const count = 300;
      const writer = await runWriter(["lines", file, String(count), "2 KB"]);
      expect(writer.code, writer.stderr).toBe(0);
      await until("every line", () => follower.output.stdout.includes(`"line ${count - 1} `));
      await new Promise((resolve) => setTimeout(resolve, 500));
      const printed = follower.output.stdout
        .trim()
        .split("\n")
        .map((line) => JSON.parse(line).msg.split(" ").slice(0, 2).join(" "));
      expect(printed).toEqual(["before", ...Array.from({ length: count }, (_, index) => `line ${index}`)]);
      const rotated = (await import("node:fs"))
        .readdirSync(join(scratch, "rotating"))
        .filter((name) => /\.\d+$/.test(name));
      expect(rotated.length).toBeGreaterThan(5);
    } finally {
      expect(await stop(follower)).toBe(0);
    }
  }, 120_000);
});
