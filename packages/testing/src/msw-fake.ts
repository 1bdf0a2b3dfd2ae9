/**
 * What the unit tests of a provider against an msw fake of its cloud API share: the fake's server
 * started for the test file and reset before each test, a keys directory of its own, and a cluster
 * prepared on an offer for a spec.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { options as poolOptions, type SpecInput, spec as toSpec } from "@skyward/core";
import {
  type Cluster,
  type Offer,
  offerQuery,
  type ProviderV1,
  resolvePoolSpec,
} from "@skyward/core/contract";
import { afterAll, afterEach, beforeAll, beforeEach } from "vitest";

/** An msw fake of a cloud API, as the provider packages' fakes are. */
export interface MswFake {
  readonly server: {
    listen(options: { onUnhandledFrame: "error" }): void;
    resetHandlers(): void;
    close(): void;
  };
  /** Forgets what the tests before did (requests, instances, faults). */
  reset(): void;
}

/**
 * Listens with `fake` for the test file (an unhandled request fails the test), resets it before each
 * test and drops handlers a test added after it; `keysDirectory` is a new directory for the file's keys.
 */
export function useMswFake(fake: MswFake, prefix: string): { readonly keysDirectory: string } {
  let keysDirectory: string | undefined;
  beforeAll(async () => {
    fake.server.listen({ onUnhandledFrame: "error" });
    keysDirectory = await mkdtemp(join(tmpdir(), prefix));
  });
  afterAll(async () => {
    fake.server.close();
    if (keysDirectory) await rm(keysDirectory, { recursive: true, force: true });
  });
  beforeEach(() => fake.reset());
  afterEach(() => fake.server.resetHandlers());
  return {
    get keysDirectory() {
      if (keysDirectory === undefined) throw new Error("useMswFake: the keys directory is made in beforeAll");
      return keysDirectory;
    },
  };
}

/**
 * A cluster of `provider` for the spec `input`: its offers for the spec's query, the one `pick`
 * chooses (default the first), prepared.
 */
export async function preparedCluster<ClusterData>(
  provider: ProviderV1<ClusterData>,
  input: Omit<SpecInput, "provider">,
  pick: (offers: readonly Offer[]) => Offer | undefined = (offers) => offers[0],
  signal: AbortSignal = AbortSignal.timeout(20_000),
): Promise<Cluster<ClusterData>> {
  const spec = resolvePoolSpec(toSpec({ ...input, provider }), poolOptions({}));
  const offer = pick(await provider.offers({ query: offerQuery(spec), signal }));
  if (!offer) throw new Error("no offer picked");
  return provider.prepare({ spec, offer, signal });
}
