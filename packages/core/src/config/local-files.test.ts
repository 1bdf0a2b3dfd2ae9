import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConfigurationError } from "../errors/errors.js";
import { collectIncludedFiles } from "./local-files.js";

let root = "";

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), "skyward-includes-"));
  const files: Record<string, string> = {
    "src/mypkg/__init__.py": "",
    "src/mypkg/core.py": "x = 1\n",
    "src/mypkg/data/big.csv": "a,b\n",
    "src/mypkg/notes.txt": "keep\n",
    "src/mypkg/__pycache__/core.cpython-311.pyc": "junk",
    "src/mypkg/.git/HEAD": "ref",
    "src/mypkg/.venv/bin/python": "",
    "src/mypkg/sub/deep.log": "log\n",
    "src/mypkg/sub/keep.py": "",
    "train.py": "print('hi')\n",
    "README.md": "# readme\n",
  };
  for (const [path, text] of Object.entries(files)) {
    await mkdir(join(root, path, ".."), { recursive: true });
    await writeFile(join(root, path), text);
  }
  await symlink(join(root, "README.md"), join(root, "src/mypkg/link.md"));
});

afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

describe("includes", () => {
  it("ship a directory under its own name and a .py file by its name, without caches, .git or venvs", async () => {
    const files = await collectIncludedFiles(["./src/mypkg", "train.py"], [], root);
    expect(files.map((file) => file.target)).toEqual([
      "mypkg/__init__.py",
      "mypkg/core.py",
      "mypkg/data/big.csv",
      "mypkg/notes.txt",
      "mypkg/sub/deep.log",
      "mypkg/sub/keep.py",
      "train.py",
    ]);
    expect(files.find((file) => file.target === "train.py")?.size).toBe(12);
  });

  it("honour excludes: names anywhere, and paths inside the include", async () => {
    const files = await collectIncludedFiles(["src/mypkg"], ["*.log", "data/", "notes.*"], root);
    expect(files.map((file) => file.target)).toEqual([
      "mypkg/__init__.py",
      "mypkg/core.py",
      "mypkg/sub/keep.py",
    ]);
    const deep = await collectIncludedFiles(["src/mypkg"], ["sub/**"], root);
    expect(deep.some((file) => file.target.startsWith("mypkg/sub/"))).toBe(false);
  });

  it("refuse missing paths, non-Python files and name clashes, naming the include", async () => {
    const attempts: [string[], string, RegExp][] = [
      [["missing"], "image.includes[0]", /does not exist/],
      [["train.py", "README.md"], "image.includes[1]", /directory or a \.py file/],
      [["train.py", "./train.py"], "image.includes[1]", /already taken/],
    ];
    for (const [includes, path, message] of attempts) {
      const error = await collectIncludedFiles(includes, [], root).catch((caught: unknown) => caught);
      expect(ConfigurationError.isInstance(error)).toBe(true);
      if (ConfigurationError.isInstance(error)) {
        expect(error.issues[0]?.path).toBe(path);
        expect(error.issues[0]?.message).toMatch(message);
      }
    }
  });
});
