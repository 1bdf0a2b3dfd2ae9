import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { version } from "./version.js";

describe("version", () => {
  it("is the package's own version (changesets bumps package.json; keep version.ts in step)", () => {
    const manifest = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as {
      version: string;
    };
    expect(version).toBe(manifest.version);
  });
});
