/**
 * The pool's health checker (`options.healthChecker`): a Python function run on each node through
 * the runtime's `skyward.health:run_check`, straight over the node's connection as a nested task (it
 * never waits for, or takes, a task slot). A node is ready only after its first success; once ready,
 * it is checked every `interval` seconds — after a check that raised or timed out too — and
 * `failures` failures in a row have it replaced.
 */
import type { WireValue } from "../protocol/protocol.js";
import type { HealthChecker } from "../spec/options.js";
import type { WorkerConnection } from "./worker-connection.js";

/** What one check found: healthy, or the reason it is not. */
export type HealthOutcome = { readonly healthy: true } | { readonly healthy: false; readonly reason: string };

let nextCheck = 0;

/** Runs the check once on the node behind `connection`. Never rejects. */
export function checkHealth(connection: WorkerConnection, checker: HealthChecker): Promise<HealthOutcome> {
  nextCheck += 1;
  const id = `health-${nextCheck}`;
  return new Promise<HealthOutcome>((resolve) => {
    let settled = false;
    const settle = (outcome: HealthOutcome) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      connection.offTask(id);
      resolve(outcome);
    };
    // The worker enforces the timeout; this covers a worker that cannot answer at all.
    const timer = setTimeout(
      () => settle({ healthy: false, reason: `${checker.check} did not answer within ${checker.timeout} s` }),
      checker.timeout * 1000 + 2_000,
    );
    connection.onTask(id, (message) => {
      if (message.t === "result") {
        settle(
          message.value === true
            ? { healthy: true }
            : { healthy: false, reason: String(message.value as WireValue) },
        );
      } else if (message.t === "error") {
        settle({
          healthy: false,
          reason:
            message.kind === "timeout"
              ? `${checker.check} took longer than ${checker.timeout} s`
              : `${checker.check} raised ${message.type}: ${message.message}`,
        });
      }
    });
    try {
      connection.send({
        t: "submit",
        id,
        fn: "skyward.health:run_check",
        args: [checker.check],
        kwargs: {},
        timeout: checker.timeout,
        stream: false,
        worker: null,
        nested: true,
      });
    } catch (error) {
      settle({ healthy: false, reason: `could not run ${checker.check}: ${(error as Error).message}` });
    }
  });
}

function pause(seconds: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, seconds * 1000);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });
}

/**
 * Checks until the first success (a node's readiness waits for it). Returns the last reason when
 * `failures` checks in a row failed first, or undefined once healthy (or when `signal` aborts).
 */
export async function firstHealthy(
  connection: WorkerConnection,
  checker: HealthChecker,
  signal: AbortSignal,
): Promise<string | undefined> {
  let failed = 0;
  for (;;) {
    if (signal.aborted) return undefined;
    const outcome = await checkHealth(connection, checker);
    if (outcome.healthy) return undefined;
    failed += 1;
    if (failed >= checker.failures) return outcome.reason;
    await pause(checker.interval, signal);
  }
}

/**
 * Checks a ready node every `interval` seconds until `signal` aborts or the connection ends, and
 * calls `onUnhealthy` once after `failures` consecutive failures.
 */
export function monitorHealth(
  connection: WorkerConnection,
  checker: HealthChecker,
  signal: AbortSignal,
  onUnhealthy: (reason: string, failures: number) => void,
): void {
  void (async () => {
    let failed = 0;
    for (;;) {
      await pause(checker.interval, signal);
      if (signal.aborted || !connection.isOpen) return;
      const outcome = await checkHealth(connection, checker);
      if (signal.aborted || !connection.isOpen) return;
      if (outcome.healthy) {
        failed = 0;
        continue;
      }
      failed += 1;
      if (failed >= checker.failures) {
        onUnhealthy(outcome.reason, failed);
        return;
      }
    }
  })();
}
