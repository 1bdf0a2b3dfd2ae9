/**
 * Using `@skyward/core` from a project of one's own, as the README says to today: pack the package
 * (`pnpm pack`), install the tarball with npm into an empty project (its dependencies come from the
 * registry), and run a pool from plain Node. The installed tree holds no SSH library and nothing that
 * compiles (`npm ls ssh2` finds nothing): core alone builds no native addon.
 */
import { execFile } from "node:child_process";
import { mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const run = promisify(execFile);
const packageDirectory = join(import.meta.dirname, "..");

describe("an outside project installing the packed @skyward/core", () => {
  let scratch: string;
  let project: string;

  beforeAll(async () => {
    scratch = await mkdtemp(join(tmpdir(), "skyward-outside-"));
    project = join(scratch, "app");
    await run("pnpm", ["pack", "--pack-destination", scratch], { cwd: packageDirectory, timeout: 120_000 });
    const [tarball] = (await readdir(scratch)).filter((name) => name.endsWith(".tgz"));
    expect(tarball).toBeDefined();
    await run("mkdir", ["-p", project]);
    await writeFile(
      join(project, "package.json"),
      `${JSON.stringify({ name: "outside-app", private: true, type: "module" }, null, 2)}\n`,
    );
    await run(
      "npm",
      ["install", "--no-audit", "--no-fund", "--loglevel=error", join(scratch, tarball as string)],
      { cwd: project, timeout: 240_000, env: { ...process.env, npm_config_update_notifier: "false" } },
    );
  }, 300_000);

  afterAll(async () => {
    if (scratch) await rm(scratch, { recursive: true, force: true });
  });

  it("runs a pool of this machine from plain Node", async () => {
    await writeFile(join(project, "tasks.py"), "def add(a, b):\n    return a + b\n");
    await writeFile(
      join(project, "main.mjs"),
      [
        'import * as sky from "@skyward/core";',
        'const add = sky.python("tasks:add");',
        'const pool = await sky.compute({ nodes: 2, image: { includes: ["./tasks.py"] }, options: { console: false } });',
        "try {",
        "  console.log(JSON.stringify(await pool.broadcast(add(20, 22))));",
        "} finally {",
        "  await pool.close();",
        "}",
      ].join("\n"),
    );
    const { stdout } = await run(process.execPath, ["main.mjs"], {
      cwd: project,
      timeout: 120_000,
      env: { ...process.env, SKYWARD_HOME: join(scratch, "home") },
    });
    expect(JSON.parse(stdout.trim().split("\n").at(-1) ?? "null")).toEqual([42, 42]);
  }, 180_000);

  it("installs no SSH library and nothing that builds", async () => {
    const listed = await run("npm", ["ls", "ssh2", "--all", "--parseable"], { cwd: project }).then(
      (result) => result.stdout,
      (error: { stdout?: string }) => error.stdout ?? "",
    );
    expect(
      listed
        .trim()
        .split("\n")
        .filter((line) => line.includes("ssh2")),
    ).toEqual([]);
    const tree = JSON.parse(
      (await run("npm", ["ls", "--all", "--json"], { cwd: project, maxBuffer: 16 * 1024 * 1024 })).stdout,
    ) as { dependencies?: Record<string, { dependencies?: Record<string, unknown> }> };
    const names = new Set<string>();
    const walk = (dependencies: Record<string, { dependencies?: Record<string, unknown> }> | undefined) => {
      for (const [name, child] of Object.entries(dependencies ?? {})) {
        names.add(name);
        walk(child.dependencies as Record<string, { dependencies?: Record<string, unknown> }> | undefined);
      }
    };
    walk(tree.dependencies);
    expect(names.has("@skyward/core")).toBe(true);
    expect(
      [...names].filter(
        (name) => /^(ssh2|cpu-features|@aws-sdk\/|axios)$/.test(name) || name.startsWith("@aws-sdk/"),
      ),
    ).toEqual([]);
  });
});
