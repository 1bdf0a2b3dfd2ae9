/**
 * The Local provider's Python environment: packages from `image.pip` installed into a virtual
 * environment cached by the image's envHash, reused by the next pool; bad interpreters refused.
 */
import { execFileSync } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as sky from "../src/index.js";
import { envHash } from "../src/spec/image.js";
import { buildIndex, buildWheel } from "./wheels.js";

const tasks = fileURLToPath(new URL("./fixtures/pool_tasks.py", import.meta.url));
let home = "";
let wheel = "";
const previousHome = process.env.SKYWARD_HOME;

beforeAll(async () => {
  home = await mkdtemp(join(tmpdir(), "skyward-home-"));
  process.env.SKYWARD_HOME = home;
  wheel = buildWheel(home, "skyward-wheel-probe", "skyward_wheel_probe", 42);
});

afterAll(async () => {
  if (previousHome === undefined) delete process.env.SKYWARD_HOME;
  else process.env.SKYWARD_HOME = previousHome;
  await rm(home, { recursive: true, force: true });
});

describe("the Local provider's Python environment", () => {
  it("installs image.pip into a cached virtual environment, reused by the next pool", async () => {
    const probe = sky.python<[string], string | null>("pool_tasks:env");
    const image = { pip: [wheel], includes: [tasks], env: { PROBE: "yes" } };
    const phases: string[] = [];
    {
      await using pool = await sky.compute({ nodes: 1, image, options: { console: false } });
      pool.on("bootstrap.phase", () => {});
      const imported = sky.python<[], number>("skyward_wheel_probe:VALUE.__int__");
      expect(await pool.run(imported())).toBe(42);
      expect(await pool.run(probe("VIRTUAL_ENV"))).toBe(null);
      expect(await pool.run(probe("PROBE"))).toBe("yes");
    }
    const second = await sky.compute({ nodes: 1, image, options: { console: "log" } });
    try {
      second.on("bootstrap.phase", (event) => phases.push(`${event.phase}:${event.status}`));
      const imported = sky.python<[], number>("skyward_wheel_probe:VALUE.__int__");
      expect(await second.run(imported())).toBe(42);
    } finally {
      await second.close();
    }
    const venvs = execFileSync("ls", [join(home, "venvs")], { encoding: "utf8" })
      .trim()
      .split("\n");
    expect(venvs).toHaveLength(1);
    expect(venvs[0]).toMatch(new RegExp(`^${envHash(sky.image(image))}-py3\\.`));
  }, 180_000);

  it("installs a scoped index's package with its dependencies from the default index when the index says so", async () => {
    const scoped = buildWheel(
      join(home, "scoped"),
      "skyward-rapids-probe",
      "skyward_rapids_probe",
      11,
      "skyward-dep-probe",
    );
    const dependency = buildWheel(join(home, "default"), "skyward-dep-probe", "skyward_dep_probe", 3);
    const scopedIndex = buildIndex(join(home, "index-scoped"), "skyward-rapids-probe", scoped);
    // The image's PIP_INDEX_URL (PyPI's stand-in) holds the dependency; the scoped index does not.
    const defaultIndex = buildIndex(join(home, "index-default"), "skyward-dep-probe", dependency);
    const imageWith = (dependenciesFromDefault: boolean) => ({
      pip: ["skyward-rapids-probe"],
      pipIndexes: [{ url: scopedIndex, packages: ["skyward_rapids_probe"], dependenciesFromDefault }],
      env: { PIP_INDEX_URL: defaultIndex },
    });
    const refused = sky.compute({ nodes: 1, image: imageWith(false), options: { console: false } });
    await expect(refused).rejects.toBeInstanceOf(sky.BootstrapError);
    await expect(refused).rejects.toMatchObject({ logTail: expect.stringMatching(/skyward-dep-probe/) });

    await using pool = await sky.compute({ nodes: 1, image: imageWith(true), options: { console: false } });
    const values = sky.python<[], number>("skyward_dep_probe:VALUE.__int__");
    const scopedValue = sky.python<[], number>("skyward_rapids_probe:VALUE.__int__");
    expect([await pool.run(scopedValue()), await pool.run(values())]).toEqual([11, 3]);
  }, 180_000);

  it("refuses an interpreter that is not there, or a version it cannot find", async () => {
    await expect(
      sky.compute({ nodes: 1, image: { python: "/nonexistent/python3" }, options: { console: false } }),
    ).rejects.toSatisfy(
      (error) =>
        sky.ConfigurationError.isInstance(error) &&
        error.issues[0]?.path === "image.python" &&
        /expected a Python interpreter that exists on this machine/.test(error.issues[0].message),
    );
    await expect(
      sky.compute({ nodes: 1, image: { python: "3.99" }, options: { console: false } }),
    ).rejects.toSatisfy(
      (error) =>
        sky.ConfigurationError.isInstance(error) && /no Python 3\.99 found/.test((error as Error).message),
    );
  }, 60_000);
});
