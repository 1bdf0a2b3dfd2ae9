import { describe, expect, it } from "vitest";
import { globToRegExp, includeProblem } from "./includes.js";

describe("includes", () => {
  it("match globs", () => {
    expect(globToRegExp("*.py").test("a.py")).toBe(true);
    expect(globToRegExp("*.py").test("a/b.py")).toBe(false);
    expect(globToRegExp("**/*.py").test("a/b/c.py")).toBe(true);
    expect(globToRegExp("**/*.py").test("c.py")).toBe(true);
    expect(globToRegExp("data?.[ct]sv").test("data1.csv")).toBe(true);
    expect(globToRegExp("data?.[ct]sv").test("data1.json")).toBe(false);
  });

  it("judge what was found at an include's path", () => {
    const readable = { kind: "directory", readable: true } as const;
    expect(includeProblem("pkg", "/work/pkg", "/work", readable)).toBeUndefined();
    expect(includeProblem("a.py", "/work/a.py", "/work", { kind: "file", readable: true })).toBeUndefined();
    expect(includeProblem("pkg", "/work/pkg", "/work", undefined)).toBe(
      "expected a directory or a .py file that exists, but pkg does not exist; relative paths resolve against the working directory /work, which makes it /work/pkg",
    );
    expect(
      includeProblem("/data/notes.txt", "/data/notes.txt", "/work", { kind: "file", readable: true }),
    ).toBe("expected a directory or a .py file, but /data/notes.txt is a file that is not .py");
    expect(includeProblem("/l", "/l", "/work", { kind: "symbolic link", readable: true })).toMatch(
      /is a symbolic link$/,
    );
    expect(includeProblem("/pkg", "/pkg", "/work", { ...readable, readable: false })).toBe(
      "expected a directory or a .py file this process can read, but /pkg is not readable",
    );
  });
});
