import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { packedFiles } from "./package-files.js";

describe("packedFiles", () => {
  it("lists what npm would publish of a package: this one's sources, without its tests", () => {
    const files = packedFiles(fileURLToPath(new URL("..", import.meta.url)));
    expect(files).toContain("package.json");
    expect(files).toContain("src/package-files.ts");
    expect(files).not.toContain("src/package-files.test.ts");
    expect(files.filter((file) => file.startsWith("test/"))).toEqual([]);
  });
});
