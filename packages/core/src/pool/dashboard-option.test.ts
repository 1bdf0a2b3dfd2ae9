import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ConfigurationError } from "../errors/errors.js";
import { startDashboardRecording } from "./dashboard-option.js";

const project = mkdtempSync(join(tmpdir(), "skyward-dashboard-option-"));
afterAll(() => rmSync(project, { recursive: true, force: true }));

describe("options.dashboard without @skyward/dashboard installed", () => {
  it("is refused, naming the option and how to install the package", async () => {
    // The workspace has the dashboard, so a name installed nowhere stands in for it: a real failed import.
    const missing = "@skyward/dashboard-not-installed";
    const caught = await startDashboardRecording(project, missing).catch((error: unknown) => error);
    expect(ConfigurationError.isInstance(caught)).toBe(true);
    const issues = (caught as ConfigurationError).issues;
    expect(issues[0]?.path).toBe("options.dashboard");
    expect(issues[0]?.message).toContain(`needs the ${missing} package, which could not be loaded`);
    expect(issues[0]?.message).toContain(`pack ${missing} from the Skyward repository`);
  });

  it("loads the workspace's package when it is there", async () => {
    const recording = await startDashboardRecording(project);
    expect(typeof recording.record).toBe("function");
  });
});
