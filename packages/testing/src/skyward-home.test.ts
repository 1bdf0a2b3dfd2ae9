import { existsSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { basename, join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { useScratchSkywardHome } from "./skyward-home.js";

describe("useScratchSkywardHome", () => {
  const original = process.env.SKYWARD_HOME;
  beforeEach(() => {
    delete process.env.SKYWARD_HOME;
  });
  afterEach(() => {
    if (original === undefined) delete process.env.SKYWARD_HOME;
    else process.env.SKYWARD_HOME = original;
  });

  it("points SKYWARD_HOME at a fresh directory, then unsets it and removes the directory", async () => {
    const home = await useScratchSkywardHome("skyward-home-test-");
    expect(basename(home.path)).toMatch(/^skyward-home-test-/);
    expect(process.env.SKYWARD_HOME).toBe(home.path);
    await writeFile(join(home.path, "known_hosts"), "x");
    await home.restore();
    expect(process.env.SKYWARD_HOME).toBeUndefined();
    expect(existsSync(home.path)).toBe(false);
    await home.restore(); // idempotent
  });

  it("restores the value it replaced, nested homes included, and disposes with await using", async () => {
    process.env.SKYWARD_HOME = "/users/own/home";
    let inner = "";
    {
      await using outer = await useScratchSkywardHome();
      {
        await using nested = await useScratchSkywardHome();
        inner = nested.path;
        expect(process.env.SKYWARD_HOME).toBe(inner);
      }
      expect(existsSync(inner)).toBe(false);
      expect(process.env.SKYWARD_HOME).toBe(outer.path);
    }
    expect(process.env.SKYWARD_HOME).toBe("/users/own/home");
  });
});
