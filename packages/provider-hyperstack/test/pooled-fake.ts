/**
 * The fake Infrahub API whose VMs are test-bed hosts, for whole-pool tests: the fake authorises the
 * cluster's key pair on the host it lends, so the pool logs in with the key `prepare` made; the
 * `sshAddress` seam only supplies the host's own root directory (the hosts share one filesystem) and
 * a harmless self-destruct.
 */
import { type FakeApiFixture, testbedAddressAt, useFakeApi } from "@skyward/testing";
import { Hyperstack } from "../src/hyperstack-provider.js";
import { type FakeHyperstack, startFakeHyperstack } from "./fake-hyperstack.js";

/** The enclosing suite's fake with two test-bed hosts, and the provider against it. */
export interface PooledHyperstack {
  readonly pooled: FakeApiFixture<FakeHyperstack>;
  /** The provider against the fake (a new object each call, as another process would make it). */
  provider(): ReturnType<typeof Hyperstack>;
}

/** Registers the fake (with a test bed of two hosts) for the enclosing suite; `prefix` names its keys directory. */
export function usePooledHyperstack(prefix: string): PooledHyperstack {
  const pooled = useFakeApi({ start: (hosts) => startFakeHyperstack({ hosts }), prefix, hosts: 2 });
  return {
    pooled,
    provider: () =>
      Hyperstack({
        apiUrl: pooled.fake.apiUrl,
        apiKey: pooled.fake.apiKey,
        keysDirectory: pooled.keysDirectory,
        retryDelayMs: 1,
        sshUser: "root",
        sshAddress: (vm) => ({
          ...testbedAddressAt(pooled.bed.hosts, vm.floatingIp),
          privateIp: vm.floatingIp,
        }),
      }),
  };
}
