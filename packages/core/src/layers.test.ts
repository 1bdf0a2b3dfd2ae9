/**
 * The layers of core's TypeScript sources, like `python/tests/test_import_graph.py` for the worker
 * runtime: each folder imports only from its own layer and the layers below it, type-only imports
 * included (a type import still ties the modules together). Every import counts: static, `export …
 * from`, `import type` and `import()`. Tests (`*.test.ts`, `*.test-d.ts`) are left out: a test may
 * assemble higher layers to exercise a lower one.
 */
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, normalize, relative } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { describe, expect, it } from "vitest";

const sourceRoot = dirname(fileURLToPath(import.meta.url));

/** Bottom first. A folder (or a file directly in `src/`) belongs to exactly one layer. */
const LAYERS: readonly { readonly members: readonly string[]; readonly reason: string }[] = [
  {
    members: ["errors", "version.ts"],
    reason: "error classes and the version string: import nothing of core",
  },
  {
    members: ["spec", "contract"],
    reason: "what a pool is asked for, and the provider and plugin contracts: they refer to each other",
  },
  { members: ["config"], reason: "skyward.toml and ~/.skyward: read files into specs and providers" },
  { members: ["protocol"], reason: "the wire between client and worker: frames, messages, values" },
  { members: ["observe"], reason: "events, console, log files, metrics: report on what the layers below do" },
  { members: ["collections"], reason: "distributed collections: clients of the head node's store" },
  { members: ["pool"], reason: "the kernel: offers, provisioning, nodes, dispatch, the task manager" },
  {
    members: ["session", "local"],
    reason: "detach and attach over a pool; the built-in Local provider, which the entry points pick",
  },
  {
    members: ["compute.ts", "session-pools.ts"],
    reason:
      "compute() and sky.session(): where a spec is resolved (skyward.toml read) and Local() is the default",
  },
  {
    members: ["index.ts", "contract.ts", "config.ts", "logs.ts", "protocol.ts"],
    reason: "the package's entry points: each curates what the layers below export",
  },
];

/** Imports that go up today, each with why; one that no longer occurs fails, so the list only shrinks. */
const EXCEPTIONS: readonly { readonly from: string; readonly to: string; readonly reason: string }[] = [
  {
    from: "spec/image.ts",
    to: "observe",
    reason:
      "an image names its metric collectors, whose schema lives with the metrics (it imports only errors/)",
  },
];

/** One import between two modules of `src/`, as paths relative to it. */
interface ImportEdge {
  readonly from: string;
  readonly to: string;
}

/** The folder (or top-level file) a path of `src/` belongs to. */
function memberOf(path: string): string {
  return path.split("/")[0] ?? path;
}

/** Every import between core's non-test sources. */
function sourceImports(): ImportEdge[] {
  const edges: ImportEdge[] = [];
  const files = (readdirSync(sourceRoot, { recursive: true }) as string[])
    .map((path) => path.split("\\").join("/"))
    .filter((path) => path.endsWith(".ts") && !/\.test(-d)?\.ts$/.test(path));
  for (const file of files) {
    const { importedFiles } = ts.preProcessFile(readFileSync(join(sourceRoot, file), "utf8"), true, true);
    for (const { fileName } of importedFiles) {
      if (!fileName.startsWith(".")) continue;
      const target = relative(sourceRoot, normalize(join(sourceRoot, dirname(file), fileName)));
      edges.push({ from: file, to: target.split("\\").join("/").replace(/\.js$/, ".ts") });
    }
  }
  return edges;
}

/** The imports that reach a higher layer than their own and are no named exception, in words. */
function upwardImports(
  edges: readonly ImportEdge[],
  layers: typeof LAYERS,
  exceptions: typeof EXCEPTIONS,
): string[] {
  const level = new Map(layers.flatMap((layer, index) => layer.members.map((member) => [member, index])));
  const problems: string[] = [];
  for (const { from, to } of edges) {
    const fromLevel = level.get(memberOf(from));
    const toLevel = level.get(memberOf(to));
    if (fromLevel === undefined || toLevel === undefined) continue;
    if (toLevel <= fromLevel) continue;
    if (exceptions.some((exception) => exception.from === from && exception.to === memberOf(to))) continue;
    problems.push(`${from} imports ${to}: ${memberOf(to)}/ is above ${memberOf(from)}/`);
  }
  return problems;
}

describe("core's layers", () => {
  const edges = sourceImports();

  it("reads the imports of every source file", () => {
    expect(edges.length).toBeGreaterThan(200);
    expect(edges).toContainEqual({ from: "pool/cluster-message.ts", to: "protocol/protocol.ts" });
  });

  it("places every folder and top-level file of src/ in one layer", () => {
    const members = LAYERS.flatMap((layer) => layer.members);
    expect(new Set(members).size).toBe(members.length);
    const present = new Set(edges.flatMap((edge) => [memberOf(edge.from), memberOf(edge.to)]));
    for (const entry of readdirSync(sourceRoot)) {
      if (!/\.test(-d)?\.ts$/.test(entry)) present.add(entry);
    }
    expect([...present].filter((member) => !members.includes(member)).sort()).toEqual([]);
  });

  it("imports only from the same layer or below, but for the named exceptions", () => {
    expect(upwardImports(edges, LAYERS, EXCEPTIONS)).toEqual([]);
  });

  it("names no exception that no longer occurs", () => {
    const stale = EXCEPTIONS.filter(
      (exception) =>
        !edges.some((edge) => edge.from === exception.from && memberOf(edge.to) === exception.to),
    );
    expect(stale.map((exception) => `${exception.from} → ${exception.to}/ (${exception.reason})`)).toEqual(
      [],
    );
  });

  it("keeps spec/ free of the file system: the entry point reads files, spec/ judges what was found", () => {
    const readers = (readdirSync(join(sourceRoot, "spec")) as string[])
      .filter((file) => file.endsWith(".ts") && !/\.test(-d)?\.ts$/.test(file))
      .filter((file) =>
        ts
          .preProcessFile(readFileSync(join(sourceRoot, "spec", file), "utf8"), true, true)
          .importedFiles.some(({ fileName }) => /^(node:)?fs(\/promises)?$/.test(fileName)),
      );
    expect(readers).toEqual([]);
  });

  it("fails on an upward import, a type-only one included", () => {
    const text = 'import type { Pool } from "../pool/pool.js";\nexport { x } from "./values.js";';
    const found = ts.preProcessFile(text, true, true).importedFiles.map((entry) => entry.fileName);
    expect(found).toEqual(["../pool/pool.js", "./values.js"]);
    const synthetic: ImportEdge[] = [
      { from: "protocol/protocol.ts", to: "pool/pool.ts" },
      { from: "pool/dispatch.ts", to: "protocol/protocol.ts" },
      { from: "pool/pool.ts", to: "session/state.ts" },
      { from: "spec/image.ts", to: "observe/metrics.ts" },
    ];
    expect(upwardImports(synthetic, LAYERS, EXCEPTIONS)).toEqual([
      "protocol/protocol.ts imports pool/pool.ts: pool/ is above protocol/",
      "pool/pool.ts imports session/state.ts: session/ is above pool/",
    ]);
    expect(upwardImports(synthetic, LAYERS, [])).toHaveLength(3);
  });
});
