// A real detached pool for the CLI's tests: a client process that starts a Local pool with tasks and
// detaches it prints its id and worker pids on one line; it is then SIGKILLed, as a client that went away.
import { spawn } from "node:child_process";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

/** The core's detach-child: a 2-node Local pool, six tasks. */
export const detachChild = fileURLToPath(
  new URL("../../core/test/fixtures/detach-child.ts", import.meta.url),
);

/**
 * Starts a detaching client (`fixture`, by default {@link detachChild}) with its work under
 * `scratch`, waits for its detach and kills it; the detached pool's id and its workers' pids.
 */
export async function detachedLocalPool(
  scratch: string,
  env: NodeJS.ProcessEnv,
  fixture = detachChild,
): Promise<{ id: string; pids: number[] }> {
  const client = spawn(process.execPath, [fixture, join(scratch, "work")], {
    env,
    stdio: ["ignore", "pipe", "inherit"],
  });
  const line = await new Promise<string>((resolve, reject) => {
    createInterface({ input: client.stdout }).once("line", resolve);
    client.once("exit", (code) => reject(new Error(`the client exited (${code}) before detaching`)));
  });
  client.kill("SIGKILL");
  await new Promise((resolve) => client.once("exit", resolve));
  return JSON.parse(line) as { id: string; pids: number[] };
}
