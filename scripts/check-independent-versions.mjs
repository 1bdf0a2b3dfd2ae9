// Shows, on a simulated `changeset version`, that packages are versioned independently: a changeset
// for @skyward/core alone (patch or minor) releases core and leaves every provider, plugin and other
// package that peer-depends on it untouched, because core's new version still satisfies their peer
// range (policy in docs/releasing.md); a changeset for one plugin releases that plugin alone; a core
// major (a new contract version) does release the peer dependents, with a peer range that accepts it.
//
// It copies the workspace's package.json files (every package the pnpm-workspace.yaml globs match),
// pnpm-workspace.yaml and .changeset/config.json into a scratch git repository, writes a changeset
// there and runs the real `changeset version` from node_modules on it, once per scenario.
// Usage: node scripts/check-independent-versions.mjs [--keep]   (--keep: leave the scratch dirs)
import { execFileSync } from "node:child_process";
import { existsSync, globSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const CORE = "@skyward/core";
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const keep = process.argv.includes("--keep");
const changesetBin = createRequire(path.join(root, "package.json")).resolve("@changesets/cli/bin.js");
const semver = createRequire(changesetBin)("semver");

/** The `packages:` globs of pnpm-workspace.yaml (negations are left out; there are none today). */
function workspaceGlobs() {
  const globs = [];
  let inPackages = false;
  for (const line of readFileSync(path.join(root, "pnpm-workspace.yaml"), "utf8").split("\n")) {
    if (/^\S/.test(line)) inPackages = /^packages:\s*$/.test(line);
    else if (inPackages) {
      const match = line.match(/^\s+-\s+["']?([^"'#\s]+)["']?/);
      if (match && !match[1].startsWith("!")) globs.push(match[1]);
    }
  }
  return globs.length > 0 ? globs : ["packages/*"];
}

const packageDirs = [
  ...new Set(workspaceGlobs().flatMap((glob) => globSync(`${glob}/package.json`, { cwd: root }))),
]
  .map((file) => path.dirname(file).split(path.sep).join("/"))
  .sort();
const manifests = new Map(
  packageDirs.map((dir) => [dir, JSON.parse(readFileSync(path.join(root, dir, "package.json"), "utf8"))]),
);
const dirOf = new Map([...manifests].map(([dir, pkg]) => [pkg.name, dir]));
if (!dirOf.has(CORE)) throw new Error(`${CORE} is not among the workspace packages`);
const published = [...manifests.values()].filter((pkg) => !pkg.private).map((pkg) => pkg.name);
const peerDependents = published.filter((name) => manifests.get(dirOf.get(name)).peerDependencies?.[CORE]);
// Packages that bundle core through `dependencies` (the CLI) may follow it; providers and plugins may not.
const followers = published.filter((name) => {
  const pkg = manifests.get(dirOf.get(name));
  return name !== CORE && (pkg.dependencies?.[CORE] || pkg.optionalDependencies?.[CORE]);
});
const isProviderOrPlugin = (name) => /^@skyward\/(provider|plugin)-/.test(name);
const plugin =
  peerDependents.find((name) => name.startsWith("@skyward/plugin-")) ?? peerDependents[0] ?? null;

const failures = [];
for (const name of followers.filter(isProviderOrPlugin)) {
  failures.push(`${name} has ${CORE} in dependencies; a provider or plugin peer-depends on it`);
}

const gitEnv = { ...process.env };
for (const key of ["GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY"]) delete gitEnv[key];
const git = (cwd, ...args) =>
  execFileSync("git", ["-c", "user.name=check", "-c", "user.email=check@localhost", ...args], {
    cwd,
    env: gitEnv,
    stdio: "pipe",
  });

/** A scratch workspace: the root manifest, pnpm-workspace.yaml, the changesets config, each package.json. */
function makeWorkspace() {
  const dir = mkdtempSync(path.join(tmpdir(), "skyward-versions-"));
  for (const file of ["package.json", "pnpm-workspace.yaml", ".changeset/config.json"]) {
    mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
    writeFileSync(path.join(dir, file), readFileSync(path.join(root, file)));
  }
  for (const pkgDir of packageDirs) {
    mkdirSync(path.join(dir, pkgDir), { recursive: true });
    writeFileSync(
      path.join(dir, pkgDir, "package.json"),
      readFileSync(path.join(root, pkgDir, "package.json")),
    );
  }
  git(dir, "init", "-q");
  git(dir, "add", "-A");
  git(dir, "commit", "-qm", "workspace");
  return dir;
}

function readState(dir) {
  return new Map(
    packageDirs.map((pkgDir) => {
      const text = readFileSync(path.join(dir, pkgDir, "package.json"), "utf8");
      const pkg = JSON.parse(text);
      const changelog = existsSync(path.join(dir, pkgDir, "CHANGELOG.md"));
      return [pkg.name, { text, version: pkg.version, peer: pkg.peerDependencies?.[CORE], changelog }];
    }),
  );
}

/** Runs `changeset version` on a scratch workspace with one changeset; returns the states before and after. */
function simulate(releases) {
  const dir = makeWorkspace();
  const frontmatter = Object.entries(releases).map(([name, type]) => `"${name}": ${type}`);
  writeFileSync(
    path.join(dir, ".changeset", "simulated-release.md"),
    `---\n${frontmatter.join("\n")}\n---\n\nSimulated change.\n`,
  );
  git(dir, "add", "-A");
  git(dir, "commit", "-qm", "changeset");
  const before = readState(dir);
  try {
    execFileSync(process.execPath, [changesetBin, "version"], { cwd: dir, env: gitEnv, stdio: "pipe" });
  } catch (error) {
    throw new Error(`changeset version failed in ${dir}:\n${error.stdout}${error.stderr}`);
  }
  const after = readState(dir);
  if (keep) console.log(`  (scratch workspace kept: ${dir})`);
  else rmSync(dir, { recursive: true, force: true });
  return { before, after };
}

/** The peer range as pnpm publishes it, `workspace:^` and the like resolved against core's version then. */
function publishedRange(peer, coreVersion) {
  const range = peer?.replace(/^workspace:/, "");
  if (range === "^" || range === "~") return `${range}${coreVersion}`;
  return range === "*" ? coreVersion : range;
}
const range = (peer) => peer?.replace(/^workspace:/, "");

/** Fails for each peer dependent whose peer range, as published, does not accept core's new version. */
function peersAcceptCore(before, after, failed) {
  const core = after.get(CORE).version;
  for (const name of peerDependents) {
    const [was, now] = [before.get(name), after.get(name)];
    // A package left alone keeps the range it was published with, against core's version of then.
    const peer =
      was.version === now.version
        ? publishedRange(was.peer, before.get(CORE).version)
        : publishedRange(now.peer, core);
    if (!semver.satisfies(core, peer))
      failed(`${name}'s published peer range ${peer} does not accept ${CORE} ${core}`);
  }
}

const scenarios = [
  ...["patch", "minor"].map((type) => ({
    title: `a ${type} changeset for ${CORE} alone`,
    releases: { [CORE]: type },
    released: [CORE],
    mayRelease: followers,
    check: peersAcceptCore,
  })),
  ...(plugin
    ? [
        {
          title: `a minor changeset for ${plugin} alone`,
          releases: { [plugin]: "minor" },
          released: [plugin],
        },
        {
          title: `one changeset for ${CORE} (minor) and ${plugin} (patch)`,
          releases: { [CORE]: "minor", [plugin]: "patch" },
          released: [CORE, plugin],
          mayRelease: followers,
          check(_before, after, failed) {
            const [was, now] = [
              manifests.get(dirOf.get(plugin)).peerDependencies[CORE],
              after.get(plugin).peer,
            ];
            if (was !== now)
              failed(`${plugin}'s peer range moved (${was} -> ${now}) though core stayed in it`);
          },
        },
      ]
    : []),
  {
    title: `a major changeset for ${CORE} (a new contract version)`,
    releases: { [CORE]: "major" },
    released: [CORE, ...peerDependents],
    mayRelease: followers,
    check: peersAcceptCore,
  },
];

console.log(
  `Simulated \`changeset version\` on ${packageDirs.length} workspace packages ` +
    `(${peerDependents.length} peer-depend on ${CORE}; ${followers.length} depend on it: ${followers.join(", ") || "none"}).`,
);
for (const scenario of scenarios) {
  const { before, after } = simulate(scenario.releases);
  const problems = [];
  const failed = (message) => problems.push(message);
  const lines = [];
  let untouched = 0;
  for (const name of [...after.keys()].sort()) {
    // Private packages (the examples) are never released; changesets may still rewrite their ranges.
    if (manifests.get(dirOf.get(name))?.private) continue;
    const [was, now] = [before.get(name), after.get(name)];
    const releasedNow = was.version !== now.version;
    const touched = releasedNow || was.text !== now.text || now.changelog !== was.changelog;
    if (!touched) {
      untouched += 1;
      if (scenario.released.includes(name)) failed(`${name} should have been released and was not`);
      continue;
    }
    const notes = [];
    if (now.changelog && !was.changelog) notes.push("CHANGELOG written");
    if (was.peer !== now.peer) notes.push(`peer ${CORE}: ${range(was.peer)} -> ${range(now.peer)}`);
    lines.push(
      `    ${name} ${was.version} -> ${now.version}${notes.length > 0 ? ` (${notes.join("; ")})` : ""}`,
    );
    if (!scenario.released.includes(name) && !scenario.mayRelease?.includes(name)) {
      failed(
        `${name} should have been left alone (version ${was.version} -> ${now.version}, changelog: ${now.changelog})`,
      );
    }
    if (scenario.released.includes(name) && !releasedNow) {
      failed(`${name} should have been released and was not`);
    }
  }
  scenario.check?.(before, after, failed);
  console.log(`\n${problems.length === 0 ? "ok  " : "FAIL"} ${scenario.title}`);
  console.log(lines.length > 0 ? `  released or edited:\n${lines.join("\n")}` : "  nothing released");
  console.log(`  left alone: ${untouched} package(s)`);
  for (const problem of problems) console.log(`  ! ${problem}`);
  failures.push(...problems.map((problem) => `${scenario.title}: ${problem}`));
}

if (failures.length > 0) {
  console.error(`\nIndependent versions: ${failures.length} problem(s):\n  ${failures.join("\n  ")}`);
  process.exit(1);
}
console.log(
  `\nIndependent versions: a core patch or minor releases no provider or plugin; each package releases on its own changesets.`,
);
