// The Node floor, in one place: every package that states `engines.node` states the same `>=N`, N is
// the version scripts/toolchain.sh installs (SKYWARD_NODE_VERSION), and under CI the Node running the
// suite — and so the demo and every example — is that floor's major: the lowest supported Node runs
// everything the README shows.
import { globSync, readFileSync } from "node:fs";

const toolchain = readFileSync("scripts/toolchain.sh", "utf8");
const floor = /^SKYWARD_NODE_VERSION="(\d+)"/m.exec(toolchain)?.[1];
if (!floor) {
  console.error("check-engines: scripts/toolchain.sh sets no SKYWARD_NODE_VERSION");
  process.exit(1);
}
const problems = [];
const manifests = [
  "package.json",
  ...globSync("packages/*/package.json"),
  ...globSync("examples/*/package.json"),
];
let stated = 0;
for (const manifest of manifests) {
  const engines = JSON.parse(readFileSync(manifest, "utf8")).engines;
  if (engines?.node === undefined) continue;
  stated += 1;
  if (engines.node !== `>=${floor}`)
    problems.push(`${manifest}: engines.node is ${JSON.stringify(engines.node)}, expected ">=${floor}"`);
}
const running = process.versions.node.split(".")[0];
// The CI rule of scripts/ci.sh and isCi() in @skyward/testing: CI set to anything but "", "0" or "false".
const underCi = !["", "0", "false"].includes((process.env.CI ?? "").toLowerCase());
if (underCi && running !== floor)
  problems.push(`CI runs Node ${process.versions.node}, not the floor's major ${floor}`);
if (problems.length > 0) {
  console.error(`check-engines: ${problems.length} problem(s):\n  ${problems.join("\n  ")}`);
  process.exit(1);
}
console.log(`Node floor ${floor}: stated by ${stated} package(s); running ${process.versions.node}.`);
