/**
 * What the Local provider does with `image.apt` and `image.shellVars`: it never installs system
 * packages (it checks they are there, before any worker starts), and it evaluates `shellVars` once
 * with the image's env visible, as the SSH bootstrap does, exporting the results to the workers.
 */
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
// The CI rule of @skyward/testing, by path: that package depends on core, so core cannot depend on it.
import { isCi } from "../../testing/src/prerequisites.js";
import * as sky from "../src/index.js";

const tasks = fileURLToPath(new URL("./fixtures/pool_tasks.py", import.meta.url));
const env = sky.python<[string], string | null>("pool_tasks:env");
/** Whether this machine has dpkg, which the Local provider asks about `image.apt`. */
const dpkg = (() => {
  try {
    execFileSync("dpkg-query", ["--version"], { stdio: "ignore" });
    return true;
  } catch {
    if (isCi()) throw new Error("CI requires dpkg-query, which the Local provider asks about image.apt");
    return false;
  }
})();

describe("the Local provider's image", () => {
  it("exports image.shellVars, evaluated once with the image's env visible, to every worker", async () => {
    await using pool = await sky.compute({
      nodes: 2,
      image: {
        includes: [tasks],
        env: { SKYWARD_TEST_BASE: "forty" },
        shellVars: { SKYWARD_TEST_SHELL: 'printf "%s-%s" "$SKYWARD_TEST_BASE" "$((6 * 7))"' },
      },
      options: { console: false },
    });
    expect(await pool.broadcast(env("SKYWARD_TEST_SHELL"))).toEqual(["forty-42", "forty-42"]);
    expect(await pool.run(env("SKYWARD_TEST_BASE"))).toBe("forty");
  });

  it("fails on a shellVars snippet that fails, naming it", async () => {
    const error = await sky
      .compute({
        image: { includes: [tasks], shellVars: { SKYWARD_TEST_BROKEN: "exit 3" } },
        options: { console: false },
      })
      .catch((caught: unknown) => caught);
    expect(sky.BootstrapError.isInstance(error)).toBe(true);
    expect((error as sky.BootstrapError).message).toContain("image.shellVars.SKYWARD_TEST_BROKEN");
    expect((error as sky.BootstrapError).logTail).toContain("shellVars.SKYWARD_TEST_BROKEN failed (exit 3)");
  });

  it.runIf(dpkg)("accepts image.apt packages that are installed", async () => {
    await using pool = await sky.compute({
      image: { includes: [tasks], apt: ["bash"] },
      options: { console: false },
    });
    expect(await pool.run(env("SKYWARD_TEST_NONE"))).toBeNull();
  });

  it("refuses image.apt packages that are not installed, naming them, before any worker starts", async () => {
    const phases: string[] = [];
    const error = await sky
      .compute(
        {
          image: { includes: [tasks], apt: ["bash", "surely-not-installed-pkg"] },
          options: { console: false },
        },
        { onEvent: (event) => event.type === "bootstrap.phase" && phases.push(event.phase) },
      )
      .catch((caught: unknown) => caught);
    expect(sky.ConfigurationError.isInstance(error)).toBe(true);
    const [issue] = (error as sky.ConfigurationError).issues;
    expect(issue?.path).toBe("image.apt");
    expect(issue?.message).toMatch(/never installs system packages/);
    if (dpkg) {
      expect(issue?.message).toMatch(/, and surely-not-installed-pkg is not installed; install it yourself/);
      expect(issue?.message).not.toMatch(/bash,/);
    } else expect(issue?.message).toMatch(/has no dpkg to check/);
    // Refused before the includes were copied, the Python environment made or a worker started.
    expect(phases).toEqual([]);
  });
});
