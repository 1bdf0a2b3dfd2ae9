/**
 * Test helpers: pure-Python wheels built by hand (a zip with its dist-info) and PEP 503 "simple"
 * indexes on disk, so the pip paths can be tested with no network.
 */
import { execFileSync } from "node:child_process";
import { cpSync, mkdirSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import { pathToFileURL } from "node:url";

/** Builds a pure-Python wheel by hand (a zip with its dist-info), so no index is needed. */
export function buildWheel(
  directory: string,
  distribution: string,
  module: string,
  value: number,
  requires = "",
): string {
  const script = `
import base64, hashlib, sys, zipfile
directory, distribution, module, value, requires = sys.argv[1:]
stem = distribution.replace("-", "_")
path = f"{directory}/{stem}-0.1-py3-none-any.whl"
requires_dist = f"Requires-Dist: {requires}\\n" if requires else ""
files = {
    f"{module}/__init__.py": f"VALUE = {value}\\n",
    f"{stem}-0.1.dist-info/METADATA": f"Metadata-Version: 2.1\\nName: {distribution}\\nVersion: 0.1\\n{requires_dist}",
    f"{stem}-0.1.dist-info/WHEEL": "Wheel-Version: 1.0\\nGenerator: hand\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n",
}
record = []
with zipfile.ZipFile(path, "w") as archive:
    for name, text in files.items():
        data = text.encode()
        archive.writestr(name, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append(f"{stem}-0.1.dist-info/RECORD,,")
    archive.writestr(f"{stem}-0.1.dist-info/RECORD", "\\n".join(record) + "\\n")
print(path)
`;
  mkdirSync(directory, { recursive: true });
  return execFileSync("python3", ["-c", script, directory, distribution, module, String(value), requires], {
    encoding: "utf8",
    timeout: 30_000,
  }).trim();
}

/** A PEP 503 "simple" index on disk holding one wheel: `<index>/<project>/index.html`. */
export function buildIndex(directory: string, project: string, wheel: string): string {
  const projectDirectory = join(directory, project);
  mkdirSync(projectDirectory, { recursive: true });
  cpSync(wheel, join(projectDirectory, basename(wheel)));
  writeFileSync(
    join(projectDirectory, "index.html"),
    `<a href="${basename(wheel)}">${basename(wheel)}</a>\n`,
  );
  writeFileSync(join(directory, "index.html"), `<a href="${project}/">${project}</a>\n`);
  return pathToFileURL(directory).href;
}
