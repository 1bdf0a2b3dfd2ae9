/**
 * moto's S3 in server mode for these tests, on a port it picks itself (`-p 0`, read from its banner).
 * The Python with `moto[server]` is `SKYWARD_MOTO_PYTHON`, else `packages/provider-aws/.venv` (made by
 * `pnpm --filter @skyward/provider-aws setup:moto`). Without one the suites skip, saying why, except
 * under CI, where a missing moto fails the run.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { isCi } from "@skyward/testing";

const providerAwsVenv = fileURLToPath(new URL("../../provider-aws/.venv/bin/python", import.meta.url));

/** The Python with moto's server, or undefined. */
export function findMotoPython(): string | undefined {
  for (const python of [process.env.SKYWARD_MOTO_PYTHON, providerAwsVenv]) {
    if (!python || !existsSync(python)) continue;
    if (
      spawnSync(python, ["-c", "import moto.server, flask"], { stdio: "ignore", timeout: 60_000 }).status ===
      0
    )
      return python;
  }
  return undefined;
}

/** Why moto cannot run here, or undefined; under CI a missing moto throws instead. */
export function motoSkipReason(): string | undefined {
  if (findMotoPython()) return undefined;
  const reason =
    "moto[server] is not installed: run `pnpm --filter @skyward/provider-aws setup:moto` (or set SKYWARD_MOTO_PYTHON)";
  if (isCi()) throw new Error(reason);
  return reason;
}

/** A running moto server. */
export interface MotoS3 {
  /** `http://HOST:PORT`. */
  readonly endpoint: string;
  /** Stops it (SIGTERM, then SIGKILL after 5 s). Idempotent. */
  stop(): Promise<void>;
}

/** Starts moto on `host` (default 127.0.0.1) and resolves once it listens. */
export async function startMotoS3(host = "127.0.0.1"): Promise<MotoS3> {
  const python = findMotoPython();
  if (!python) throw new Error(motoSkipReason() ?? "moto is not installed");
  const child: ChildProcess = spawn(python, ["-m", "moto.server", "-H", host, "-p", "0"], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, PYTHONUNBUFFERED: "1" },
  });
  const killOnExit = () => child.kill("SIGKILL");
  process.once("exit", killOnExit);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  let output = "";
  const port = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`moto did not start within 60 s:\n${output}`));
    }, 60_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const match = /Running on http:\/\/[^:\s]+:(\d+)/.exec(output);
      if (match?.[1]) {
        clearTimeout(timer);
        resolve(match[1]);
      }
    };
    child.stdout?.on("data", onData);
    child.stderr?.on("data", onData);
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`moto exited (code ${code}) before it started:\n${output}`));
    });
  });
  child.stdout?.resume();
  child.stderr?.resume();
  let stopped = false;
  return {
    endpoint: `http://${host}:${port}`,
    async stop() {
      if (stopped) return;
      stopped = true;
      process.removeListener("exit", killOnExit);
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
      await exited;
      clearTimeout(timer);
    },
  };
}
