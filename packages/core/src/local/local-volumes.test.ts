/**
 * The Local provider refuses volumes clearly, naming each one, before any worker starts: mounting
 * buckets would mount them on the user's own machine.
 */
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ConfigurationError } from "../errors/errors.js";
import { compute } from "../index.js";
import { Local } from "./local-provider.js";

const roots: string[] = [];
afterAll(async () => {
  for (const root of roots) await rm(root, { recursive: true, force: true });
});

describe("Local and volumes", () => {
  it("refuses a pool with volumes, naming the field, and starts nothing", async () => {
    const workRoot = await mkdtemp(join(tmpdir(), "skyward-local-volumes-"));
    roots.push(workRoot);
    const failure = await compute({
      provider: Local({ workRoot }),
      volumes: [{ bucket: "data", mount: "/data" }],
      options: { console: false },
    }).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(ConfigurationError.isInstance(failure)).toBe(true);
    expect((failure as ConfigurationError).issues).toEqual([
      {
        path: "volumes[0]",
        message: expect.stringContaining("the Local provider does not mount volumes (data on /data)"),
      },
    ]);
    expect(await readdir(workRoot)).toEqual([]);
  });
});
