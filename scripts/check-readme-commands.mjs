// Runs the command block of examples/README.md as written (`<name>` = hello), the way a new user
// would: bash from the repository root, in an environment with nothing of the project's on PATH.
// Fails when a command fails. Usage: node scripts/check-readme-commands.mjs
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const readme = "examples/README.md";
const block = /```bash\n([\s\S]*?)```/.exec(readFileSync(join(root, readme), "utf8"))?.[1];
if (!block) throw new Error(`${readme} has no bash block`);
const commands = block.replaceAll("<name>", "hello");
process.stdout.write(`${readme}'s commands, as written (<name> = hello):\n${commands}`);

const inherited = [
  "HOME",
  "USER",
  "LANG",
  "TERM",
  "TMPDIR",
  "CI",
  "NO_COLOR",
  "SKYWARD_HOME",
  "TURBO_TELEMETRY_DISABLED",
  "DO_NOT_TRACK",
];
const env = Object.fromEntries(
  inherited.filter((name) => process.env[name]).map((name) => [name, process.env[name]]),
);
const run = spawnSync("bash", ["-euo", "pipefail", "-c", commands], {
  cwd: root,
  env: { ...env, PATH: "/usr/local/bin:/usr/bin:/bin" },
  stdio: "inherit",
});
if (run.status !== 0) {
  process.stderr.write(`${readme}'s commands failed as written (exit ${run.status ?? run.signal})\n`);
  process.exitCode = 1;
}
