import { existsSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { localSecretLeaks, withLocalNodeRoot } from "./local-secrets.js";

describe("withLocalNodeRoot and localSecretLeaks", () => {
  it("give a fresh root with the tools first on PATH, find a planted file there, and put everything back", async () => {
    const path = process.env.PATH;
    const planted = { name: "local-secrets.test.ts", value: "local-root-planted-value-5180" };
    let root = "";
    await expect(
      withLocalNodeRoot(
        "skyward-local-secrets-test-",
        async (workRoot) => {
          root = workRoot;
          expect(process.env.PATH).toBe(`/opt/fake-tools:${path}`);
          expect((await localSecretLeaks(workRoot, [planted])).files.findings).toEqual([]);
          await writeFile(join(workRoot, "env.sh"), `export LEAKED=${planted.value}\n`);
          const leaks = await localSecretLeaks(workRoot, [planted]);
          expect(leaks.files.findings).toEqual([
            { file: join(workRoot, "env.sh"), line: 1, secret: planted.name },
          ]);
          expect(leaks.commandLines).toEqual([]);
          throw new Error("the body failed");
        },
        { toolsFirst: "/opt/fake-tools" },
      ),
    ).rejects.toThrow("the body failed");
    expect(process.env.PATH).toBe(path);
    expect(existsSync(root)).toBe(false);
  });
});
