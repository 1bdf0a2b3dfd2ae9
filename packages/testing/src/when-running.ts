/**
 * What a pool does after `provision`: `provision` may hand instances back still starting, and the
 * pool polls `getInstance` until each runs (`@skyward/core`'s pool, `provisionInstances`). A test that
 * reads a running instance's SSH coordinates or addresses waits the same way.
 */
import type { Cluster, Instance, ProviderV1 } from "@skyward/core/contract";
import { expect } from "vitest";

/**
 * Polls `provider.getInstance` for instance `id` of `cluster`, as the pool does after `provision`,
 * until its status is `running`, and returns the instance as then seen. Fails when it does not run
 * within `timeoutMs` (default 60 s): a limit on the wait, not a measure of how long starting takes.
 */
export async function whenRunning<Specific>(
  provider: Pick<ProviderV1<Specific>, "getInstance">,
  cluster: Cluster<Specific>,
  id: string,
  timeoutMs = 60_000,
): Promise<Instance> {
  let seen: Instance | null = null;
  await expect
    .poll(
      async () => {
        seen = await provider.getInstance({ cluster, id, signal: AbortSignal.timeout(timeoutMs) });
        return seen?.status;
      },
      { timeout: timeoutMs, interval: 250 },
    )
    .toBe("running");
  return seen as unknown as Instance;
}
