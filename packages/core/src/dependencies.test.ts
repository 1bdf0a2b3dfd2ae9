/**
 * What installing `@skyward/core` alone brings: its production dependencies, followed through the
 * installed packages (pnpm's links), must hold no SSH library, no cloud SDK and nothing that builds a
 * native addon — a user who runs only the local default compiles nothing.
 */
import { existsSync, readFileSync, realpathSync } from "node:fs";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";

interface Manifest {
  name: string;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  gypfile?: boolean;
  scripts?: Record<string, string>;
}

const packageDirectory = join(import.meta.dirname, "..");

function readManifest(directory: string): Manifest {
  return JSON.parse(readFileSync(join(directory, "package.json"), "utf8")) as Manifest;
}

/** Finds `name` as Node would from `directory`: its node_modules, then each parent's. */
function resolvePackage(name: string, directory: string): string | undefined {
  for (let current = directory; ; current = dirname(current)) {
    const candidate = join(current, "node_modules", name);
    if (existsSync(join(candidate, "package.json"))) return realpathSync(candidate);
    if (dirname(current) === current) return undefined;
  }
}

/** Every package installing `@skyward/core` installs: name → its directory. */
function productionClosure(): Map<string, string> {
  const seen = new Map<string, string>();
  const visit = (directory: string, manifest: Manifest) => {
    const names = [
      ...Object.keys(manifest.dependencies ?? {}),
      ...Object.keys(manifest.optionalDependencies ?? {}),
    ];
    for (const name of names) {
      if (seen.has(name)) continue;
      const found = resolvePackage(name, directory);
      if (!found) continue; // an optional dependency for another platform
      seen.set(name, found);
      visit(found, readManifest(found));
    }
  };
  visit(packageDirectory, readManifest(packageDirectory));
  return seen;
}

describe("the dependencies of @skyward/core", () => {
  const closure = productionClosure();

  it("are found (the check sees the installed tree)", () => {
    expect(closure.has("zod")).toBe(true);
  });

  it("hold no SSH library and no cloud SDK", () => {
    const names = [...closure.keys()];
    expect(
      names.filter((name) => /^(ssh2|cpu-features|@aws-sdk\/|@google-cloud\/|axios)/.test(name)),
    ).toEqual([]);
  });

  it("build no native addon and run no install script", () => {
    const native = [...closure].filter(([, directory]) => {
      const manifest = readManifest(directory);
      const install = `${manifest.scripts?.install ?? ""} ${manifest.scripts?.preinstall ?? ""}`;
      return (
        manifest.gypfile === true ||
        existsSync(join(directory, "binding.gyp")) ||
        /node-gyp|prebuild/.test(install)
      );
    });
    expect(native.map(([name]) => name)).toEqual([]);
  });
});
