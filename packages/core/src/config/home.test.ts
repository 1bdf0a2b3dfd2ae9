import { homedir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { skywardHome } from "./home.js";

describe("skywardHome", () => {
  const saved = process.env.SKYWARD_HOME;
  afterEach(() => {
    if (saved === undefined) delete process.env.SKYWARD_HOME;
    else process.env.SKYWARD_HOME = saved;
  });

  it("is $SKYWARD_HOME when set, else ~/.skyward; an empty one counts as unset", () => {
    process.env.SKYWARD_HOME = "/srv/sky";
    expect(skywardHome()).toBe("/srv/sky");
    process.env.SKYWARD_HOME = "";
    expect(skywardHome()).toBe(join(homedir(), ".skyward"));
    delete process.env.SKYWARD_HOME;
    expect(skywardHome()).toBe(join(homedir(), ".skyward"));
  });
});
