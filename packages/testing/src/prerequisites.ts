/**
 * The CI rule for test prerequisites: locally a missing prerequisite (a system package, an
 * index, the test bed) skips a suite with a reason; under CI it fails, so a suite never goes
 * quietly unrun there.
 */
import { execFile } from "node:child_process";

/**
 * Whether the tests run under CI: `CI` is set to anything but empty, `0` or `false` (any case).
 */
export function isCi(): boolean {
  const value = process.env.CI;
  return value !== undefined && value !== "" && value !== "0" && value.toLowerCase() !== "false";
}

/**
 * Passes a skip reason through, or throws under CI: `reason` is why a suite cannot run here
 * (undefined when it can), `purpose` what CI needs it for. The error reads
 * `CI requires <purpose>: <reason>`.
 *
 * @example
 * ```ts
 * import { requirePrerequisite } from "@skyward/testing";
 * import { describe } from "vitest";
 *
 * declare function missingFrameworks(): string | undefined; // why the suite cannot run, if it cannot
 * const skipReason = requirePrerequisite(missingFrameworks(), "Debian's frameworks for the e2e tests");
 * describe.skipIf(skipReason !== undefined)("end to end", () => {
 *   // …
 * });
 * ```
 */
export function requirePrerequisite(reason: string | undefined, purpose: string): string | undefined {
  if (reason !== undefined && isCi()) throw new Error(`CI requires ${purpose}: ${reason}`);
  return reason;
}

/** How {@link requireSystemPython} checks a module and what it tells the reader. */
export interface RequireSystemPythonOptions {
  /** What CI needs the module for, e.g. `"PyTorch for the torch plugin's end-to-end tests"`. */
  purpose: string;
  /** The Debian package that provides the module, e.g. `"python3-torch"`. */
  install: string;
  /** The interpreter to check; `/usr/bin/python3` (Debian's) unless given. */
  python?: string;
}

/**
 * Why `python -c "import <module>"` fails here, or undefined when it succeeds; under CI
 * (see {@link requirePrerequisite}) a failing import throws instead.
 */
export async function requireSystemPython(
  module: string,
  options: RequireSystemPythonOptions,
): Promise<string | undefined> {
  const python = options.python ?? "/usr/bin/python3";
  const found = await new Promise<boolean>((resolve) =>
    execFile(python, ["-c", `import ${module}`], (error) => resolve(error === null)),
  );
  const topLevel = module.split(".")[0] as string;
  return requirePrerequisite(
    found ? undefined : `${python} cannot import ${topLevel} (apt-get install ${options.install})`,
    options.purpose,
  );
}
