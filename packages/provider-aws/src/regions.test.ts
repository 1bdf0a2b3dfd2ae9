import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { rememberedRegions, rememberRegion } from "./regions.js";

describe("the regions this machine launched pools in", () => {
  let home: string;
  let saved: string | undefined;
  beforeEach(async () => {
    saved = process.env.SKYWARD_HOME;
    home = await mkdtemp(join(tmpdir(), "skyward-aws-regions-"));
    process.env.SKYWARD_HOME = home;
  });
  afterEach(async () => {
    if (saved === undefined) delete process.env.SKYWARD_HOME;
    else process.env.SKYWARD_HOME = saved;
    await rm(home, { recursive: true, force: true });
  });

  it("keeps every region of pools prepared at once (skyward instances and down look in each)", async () => {
    // Pools of one program started together in several regions each record theirs: a region lost
    // here is one whose instances `skyward instances` and `skyward down` never see.
    const regions = ["us-east-1", "us-west-2", "eu-west-1", "ap-south-1", "eu-central-1"];
    await Promise.all(regions.map((region) => rememberRegion(undefined, region)));
    await Promise.all(regions.map((region) => rememberRegion("http://127.0.0.1:5000", region)));
    expect(await rememberedRegions(undefined)).toEqual([...regions].sort());
    expect(await rememberedRegions("http://127.0.0.1:5000")).toEqual([...regions].sort());
  });
});
