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

const tasks = fileURLToPath(new URL("./fixtures/pool_tasks.py", import.meta.url));
let home = "";
let wheel = "";
const previousHome = process.env.SKYWARD_HOME;

/** Builds a tiny wheel by hand (a zip with the dist-info files), so no index is needed. */
function buildWheel(directory: string): string {
  const script = `
import base64, hashlib, sys, zipfile
path = sys.argv[1] + "/skyward_wheel_probe-0.1-py3-none-any.whl"
files = {
    "skyward_wheel_probe/__init__.py": "VALUE = 42\\n",
    "skyward_wheel_probe-0.1.dist-info/METADATA": "Metadata-Version: 2.1\\nName: skyward-wheel-probe\\nVersion: 0.1\\n",
    "skyward_wheel_probe-0.1.dist-info/WHEEL": "Wheel-Version: 1.0\\nGenerator: hand\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n",
}
record = []
with zipfile.ZipFile(path, "w") as archive:
    for name, text in files.items():
        data = text.encode()
        archive.writestr(name, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append("skyward_wheel_probe-0.1.dist-info/RECORD,,")
    archive.writestr("skyward_wheel_probe-0.1.dist-info/RECORD", "\\n".join(record) + "\\n")
print(path)
`;
  return execFileSync("python3", ["-c", script, directory], { encoding: "utf8" }).trim();
}

beforeAll(async () => {
  home = await mkdtemp(join(tmpdir(), "skyward-home-"));
  process.env.SKYWARD_HOME = home;
  wheel = buildWheel(home);
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
    expect(venvs[0]).toMatch(new RegExp(`^${sky.envHash(sky.image(image))}-py3\\.`));
  }, 180_000);

  it("refuses an interpreter that is not there, or a version it cannot find", async () => {
    await expect(
      sky.compute({ nodes: 1, image: { python: "/nonexistent/python3" }, options: { console: false } }),
    ).rejects.toSatisfy(
      (error) =>
        sky.ConfigurationError.isInstance(error) &&
        error.issues[0]?.path === "image.python" &&
        /not a working Python interpreter/.test(error.issues[0].message),
    );
    await expect(
      sky.compute({ nodes: 1, image: { python: "3.99" }, options: { console: false } }),
    ).rejects.toSatisfy(
      (error) =>
        sky.ConfigurationError.isInstance(error) && /no Python 3\.99 found/.test((error as Error).message),
    );
  }, 60_000);
});
