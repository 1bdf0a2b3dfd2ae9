// Scans the test run's logs for secrets: every key, token and password the test sources plant (found
// in them by name), and the shapes of real ones (private key blocks, Hugging Face/GitHub tokens, AWS
// access key ids). Prints where each was found, never the secret; exits 1 when anything was found.
// Usage: node scripts/scan-secrets.mjs <log file or directory>...
import { existsSync, globSync, readFileSync } from "node:fs";

// The scanner is @skyward/testing's, built by the run: a run stopped before its build scans nothing.
const testing = new URL("../packages/testing/dist/index.js", import.meta.url);
if (!existsSync(testing)) {
  console.error("secret scan: not run — @skyward/testing is not built (the run stopped before its build)");
  process.exit(1);
}
const { plantedSecretsIn, scanForSecrets } = await import(testing.href);

const paths = process.argv.slice(2);
if (paths.length === 0) {
  console.error("usage: node scripts/scan-secrets.mjs <log file or directory>...");
  process.exit(2);
}
const sources = globSync("{packages,examples}/*/{src,test}/**/*.{ts,mts,py}", {
  exclude: (name) => name === "node_modules" || name === "dist",
}).filter((file) => /\.test\.|\/test\//.test(file));
const secrets = sources.flatMap((file) => plantedSecretsIn(readFileSync(file, "utf8"), file));
const report = await scanForSecrets(paths, { secrets });
const distinct = new Set(secrets.map((secret) => secret.value)).size;
for (const finding of report.findings) {
  console.error(`secret found: ${finding.file}:${finding.line}: ${finding.secret}`);
}
console.log(
  `secret scan: ${report.files} files, ${(report.bytes / 1e6).toFixed(1)} MB, ` +
    `${distinct} planted secrets from ${sources.length} test files and the shapes of real ones: ` +
    (report.findings.length === 0 ? "none found" : `${report.findings.length} found`),
);
if (report.findings.length > 0) process.exit(1);
