import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";
import { createProviderFromEntry, parseConfigText, validateConfig } from "@skyward/core/config";
import {
  type Cluster,
  type Instance,
  LaunchCommand,
  offerQuery,
  type ProviderV1,
  resolvePoolSpec,
  whyNotProvider,
} from "@skyward/core/contract";
import { cleanNodeRootCommand, DEFAULT_NODE_ROOT } from "@skyward/ssh";
import { isCi, type TestbedHost, testbedSshHost, testbedSshHosts } from "@skyward/testing";
import { describe, expect, it } from "vitest";
import { createProviderFromConfig, SSH, type SshClusterData } from "./index.js";

const key = "-----BEGIN OPENSSH PRIVATE KEY-----\nkey\n-----END OPENSSH PRIVATE KEY-----\n";
const signal = new AbortController().signal;

function issuesOf(run: () => unknown): { path: string; message: string }[] {
  try {
    run();
  } catch (error) {
    if (sky.ConfigurationError.isInstance(error)) return [...error.issues];
    throw error;
  }
  return [];
}

async function clusterOf(
  provider: ProviderV1<SshClusterData>,
  input: sky.SpecInput = {},
): Promise<Cluster<SshClusterData>> {
  const spec = resolvePoolSpec(sky.spec({ provider, ...input }), sky.options());
  const [offer] = await provider.offers({ query: offerQuery(spec), signal });
  if (!offer) throw new Error("no offer");
  return provider.prepare({ spec, offer, signal });
}

describe("SSH()", () => {
  it("is a v1 provider whose workers start over SSH", () => {
    const provider = SSH({ hosts: [{ host: "10.0.0.5", privateKey: key }] });
    expect(whyNotProvider(provider)).toBeUndefined();
    expect(provider.name).toBe("ssh");
    // launchWorker is launchSshWorker's, naming the host of a bad key: "names the host of an unusable key".
    expect(typeof provider.launchWorker).toBe("function");
  });

  it("refuses bad settings, naming the field", () => {
    expect(issuesOf(() => SSH({ hosts: [] }))).toEqual([
      { path: "SSH.hosts", message: "expected at least one host" },
    ]);
    expect(issuesOf(() => SSH({ hosts: [{ host: "a" }] })).map((issue) => issue.path)).toEqual([
      "SSH.hosts[0].privateKey",
    ]);
    const twice = { host: "a", identityFile: "/k" };
    expect(issuesOf(() => SSH({ hosts: [twice, twice] }))).toEqual([
      { path: "SSH.hosts[1].host", message: "duplicate host a:22" },
    ]);
    expect(issuesOf(() => SSH({ hosts: [{ ...twice, root: "/" }] })).map((issue) => issue.path)).toEqual([
      "SSH.hosts[0].root",
    ]);
    expect(
      issuesOf(() => SSH({ hosts: [{ ...twice, hostKeyFingerprint: "MD5:aa" }] })).map((issue) => issue.path),
    ).toEqual(["SSH.hosts[0].hostKeyFingerprint"]);
  });

  it("offers its hosts on demand, with the accelerator they have, and nothing else", async () => {
    const provider = SSH({
      hosts: [{ host: "a", identityFile: "/k" }],
      accelerator: sky.accelerators.A100({ count: 2 }),
    });
    const offers = (input: sky.SpecInput) =>
      provider.offers({
        query: offerQuery(resolvePoolSpec(sky.spec({ provider, ...input }), sky.options())),
        signal,
      });
    expect(await offers({ accelerator: sky.accelerators.A100() })).toMatchObject([
      { provider: "ssh", instanceType: "2x A100 host", onDemandPrice: 0, spotPrice: null },
    ]);
    expect(await offers({ accelerator: sky.accelerators.A100({ count: 4 }) })).toEqual([]);
    expect(await offers({ accelerator: sky.accelerators.H100() })).toEqual([]);
    expect(await offers({ allocation: "spot" })).toEqual([]);
    const cpuOnly = SSH({ hosts: [{ host: "a", identityFile: "/k" }] });
    expect(
      await cpuOnly.offers({
        query: offerQuery(
          resolvePoolSpec(sky.spec({ provider: cpuOnly, accelerator: sky.accelerators.T4() }), sky.options()),
        ),
        signal,
      }),
    ).toEqual([]);
  });

  it("labels its offer with the hosts' form factor, and a spec asking for another gets none", async () => {
    const provider = SSH({
      hosts: [{ host: "10.0.0.5", privateKey: key }],
      accelerator: sky.accelerators.H100({ formFactor: "PCIe" }),
    });
    const offers = (input: sky.SpecInput) =>
      provider.offers({
        query: offerQuery(resolvePoolSpec(sky.spec({ provider, ...input }), sky.options())),
        signal,
      });
    expect((await offers({ accelerator: sky.accelerators.H100() }))[0]?.accelerator).toEqual({
      name: "H100",
      count: 1,
      memoryGb: 80,
      formFactor: "PCIe",
    });
    expect(await offers({ accelerator: sky.accelerators.H100({ formFactor: "PCIe" }) })).toHaveLength(1);
    expect(await offers({ accelerator: sky.accelerators.H100({ formFactor: "SXM" }) })).toEqual([]);
    // Hosts declared without a form factor: the offer does not say, and is kept.
    const unlabelled = SSH({
      hosts: [{ host: "a", identityFile: "/k" }],
      accelerator: sky.accelerators.H100(),
    });
    const kept = await unlabelled.offers({
      query: offerQuery(
        resolvePoolSpec(
          sky.spec({ provider: unlabelled, accelerator: sky.accelerators.H100({ formFactor: "SXM" }) }),
          sky.options(),
        ),
      ),
      signal,
    });
    expect(kept.map((offer) => offer.accelerator)).toEqual([{ name: "H100", count: 1, memoryGb: 80 }]);
  });

  it("matches a spec's vcpus, memory, disk, architecture, region and accelerator memory against what the settings declare, refusing what they cannot show", async () => {
    const query = (provider: ProviderV1<SshClusterData>, input: sky.SpecInput) =>
      offerQuery(resolvePoolSpec(sky.spec({ provider, ...input }), sky.options()));
    const refusal = async (provider: ProviderV1<SshClusterData>, input: sky.SpecInput) => {
      try {
        await provider.offers({ query: query(provider, input), signal });
      } catch (error) {
        expect(sky.NoCapacityError.isInstance(error)).toBe(true);
        return (error as Error).message;
      }
      throw new Error("expected the offers to be refused");
    };
    const hosts = [{ host: "a", identityFile: "/k" }];
    // Nothing declared: a spec asking for sizes cannot be shown to fit, and says which field.
    const bare = SSH({ hosts });
    expect(await refusal(bare, { vcpus: 8 })).toBe(
      "SSH hosts cannot be shown to meet the spec: the spec asks for vcpus >= 8, but SSH({ vcpus }) declares none: set it to what every host has",
    );
    expect(await refusal(bare, { memoryGb: 16 })).toMatch(
      /memoryGb >= 16 GB, but SSH\(\{ memoryGb \}\) declares none/,
    );
    expect(await refusal(bare, { diskGb: 100 })).toMatch(
      /diskGb >= 100 GB, but SSH\(\{ diskGb \}\) declares none/,
    );
    expect(await refusal(bare, { architecture: "arm64" })).toMatch(
      /architecture "arm64", the hosts are "x86_64" \(SSH\(\{ architecture \}\)\)/,
    );
    expect(await refusal(bare, { region: "eu-west" })).toMatch(/region "eu-west", the hosts are in "ssh"/);
    // The offer says what is known: nothing of the sizes, the default architecture and region.
    expect(await bare.offers({ query: query(bare, {}), signal })).toMatchObject([
      { vcpus: 0, memoryGb: 0, architecture: "x86_64", region: "ssh" },
    ]);
    expect((await bare.offers({ query: query(bare, {}), signal }))[0]).not.toHaveProperty("diskGb");

    // Declared: the offer carries the sizes, and a spec is matched against them.
    const declared = SSH({
      hosts,
      accelerator: sky.accelerators.A100({ memory: "40GB" }),
      vcpus: 32,
      memoryGb: 256,
      diskGb: 500,
      architecture: "arm64",
      region: "basement",
    });
    const fitting = {
      accelerator: sky.accelerators.A100({ memory: "40GB" }),
      vcpus: 32,
      memoryGb: 200,
      diskGb: 500,
      architecture: "arm64",
      region: "basement",
    } as const;
    expect(await declared.offers({ query: query(declared, fitting), signal })).toMatchObject([
      {
        accelerator: { name: "A100", count: 1, memoryGb: 40 },
        vcpus: 32,
        memoryGb: 256,
        diskGb: 500,
        architecture: "arm64",
        region: "basement",
      },
    ]);
    expect(await refusal(declared, { ...fitting, vcpus: 64 })).toMatch(
      /vcpus >= 64, the hosts have 32 \(SSH\(\{ vcpus \}\)\)/,
    );
    expect(await refusal(declared, { ...fitting, memoryGb: 512 })).toMatch(
      /memoryGb >= 512 GB, the hosts have 256 GB/,
    );
    expect(await refusal(declared, { ...fitting, diskGb: 1000 })).toMatch(
      /diskGb >= 1000 GB, the hosts have 500 GB/,
    );
    expect(await refusal(declared, { ...fitting, architecture: "x86_64" })).toMatch(
      /architecture "x86_64", the hosts are "arm64"/,
    );
    expect(
      await refusal(declared, { ...fitting, accelerator: sky.accelerators.A100({ memory: "80GB" }) }),
    ).toMatch(/accelerator.memoryGb >= 80 GB, the hosts' A100 has 40 GB/);
    // A pool asking for what the hosts cannot be shown to have fails before connecting to any,
    // with the field in its message.
    const refused = await sky
      .compute({ provider: bare, vcpus: 8, options: { console: false } })
      .catch((error: unknown) => error);
    expect(sky.NoOffersError.isInstance(refused)).toBe(true);
    expect((refused as Error).message).toContain("vcpus >= 8, but SSH({ vcpus }) declares none");
    // The cluster is in the declared region.
    const cluster = await clusterOf(declared, fitting);
    expect(cluster.region).toBe("basement");

    // skyward.toml's snake_case keys reach the same settings; bad values name the field.
    const fromToml = createProviderFromConfig({
      hosts: [{ host: "a", identity_file: "/k" }],
      vcpus: 16,
      memoryGb: 64,
      diskGb: 200,
      architecture: "x86_64",
      region: "rack-2",
    });
    expect(
      await fromToml.offers({
        query: query(fromToml, { vcpus: 16, memoryGb: 64, region: "rack-2" }),
        signal,
      }),
    ).toMatchObject([{ vcpus: 16, memoryGb: 64, diskGb: 200, region: "rack-2" }]);
    expect(
      issuesOf(() => SSH({ hosts, vcpus: 0, memoryGb: -1, architecture: "sparc" as "arm64" })).map(
        (issue) => issue.path,
      ),
    ).toEqual(["SSH.vcpus", "SSH.memoryGb", "SSH.architecture"]);
  });

  it("hands out free hosts, one node each, until none is left; terminate frees them", async () => {
    const provider = SSH({
      hosts: [
        { host: "a", identityFile: "/k", root: "/srv/sky/" },
        { host: "b", port: 2222, user: "ubuntu", privateKey: key, privateIp: "10.0.0.2" },
      ],
    });
    const cluster = await clusterOf(provider);
    const [first, second] = await provider.provision({ cluster, count: 2, signal });
    expect(first).toMatchObject({
      id: "ssh:root@a:22",
      privateIp: "a",
      ssh: {
        host: "a",
        port: 22,
        user: "root",
        identityFile: "/k",
        hostKeyScope: "address",
        root: "/srv/sky",
      },
    });
    expect(second).toMatchObject({
      id: "ssh:ubuntu@b:2222",
      privateIp: "10.0.0.2",
      ssh: { root: DEFAULT_NODE_ROOT },
    });
    const error = await provider.provision({ cluster, count: 1, signal }).catch((caught: unknown) => caught);
    expect(sky.NoCapacityError.isInstance(error)).toBe(true);
    expect(await provider.getInstance({ cluster, id: "ssh:root@a:22", signal })).toMatchObject({
      status: "running",
    });
    await provider.terminate({ cluster, ids: ["ssh:root@a:22"], signal });
    expect(await provider.getInstance({ cluster, id: "ssh:root@a:22", signal })).toBeNull();
    expect((await provider.provision({ cluster, count: 2, signal })).map((instance) => instance.id)).toEqual([
      "ssh:root@a:22",
    ]);
    // A released worker's self-destruct cleans its root (keeping the environment), never the machine.
    const op = provider.selfDestruct?.({ cluster, instance: first as Instance });
    expect(op).toBe(cleanNodeRootCommand("/srv/sky"));
    expect(op).not.toMatch(/shutdown|poweroff|halt/);
  });
});

describe("createProviderFromConfig", () => {
  it("takes the host tables' snake_case keys and an accelerator by name", async () => {
    const provider = createProviderFromConfig({
      accelerator: "A100:2",
      hosts: [
        {
          host: "a",
          identity_file: "/k",
          host_key_fingerprint: `SHA256:${"A".repeat(43)}`,
          private_ip: "10.0.0.9",
        },
      ],
    });
    const cluster = await clusterOf(provider, { accelerator: sky.accelerators.A100({ count: 2 }) });
    expect(cluster.specific.hosts).toEqual([
      expect.objectContaining({
        identityFile: "/k",
        hostKeyFingerprint: `SHA256:${"A".repeat(43)}`,
        privateIp: "10.0.0.9",
      }),
    ]);
  });

  it("names the host of an unusable key: an unreadable identityFile, a private key that is not one", async () => {
    const provider = SSH({
      hosts: [
        { host: "a", identityFile: "/nonexistent/skyward-key" },
        { host: "b", privateKey: key },
      ],
    });
    const cluster = await clusterOf(provider);
    const instances = await provider.provision({ cluster, count: 2, signal });
    const paths: string[] = [];
    for (const instance of instances) {
      const error = await provider
        .launchWorker({
          instance,
          cluster,
          nodeId: 0,
          image: sky.image({}),
          command: () => LaunchCommand.create({ launcher: "true" }),
          env: {},
          token: "provider-test-token",
          timeoutSeconds: 5,
          connectTimeoutSeconds: 5,
          connectRetryIntervalSeconds: 1,
          signal,
        })
        .catch((caught: unknown) => caught);
      expect(sky.ConfigurationError.isInstance(error)).toBe(true);
      paths.push(...(error as sky.ConfigurationError).issues.map((issue) => issue.path));
    }
    expect(paths).toEqual(["SSH.hosts[0].identityFile", "SSH.hosts[1].privateKey"]);
  });

  it("refuses bad settings at their path in the table", () => {
    expect(
      issuesOf(() => createProviderFromConfig({ hosts: [{ host: "a" }] })).map((issue) => issue.path),
    ).toEqual(["hosts[0].privateKey"]);
    expect(
      issuesOf(() =>
        createProviderFromConfig({ hosts: [{ host: "a", identity_file: "/k" }], accelerator: "NOPE" }),
      ).map((issue) => issue.path),
    ).toEqual(["accelerator"]);
  });
});

const built = existsSync(new URL("../dist/index.js", import.meta.url));

describe.skipIf(!built && !isCi())('[providers.x] type = "ssh" in skyward.toml', () => {
  it("loads this package (its built dist, as an installed package is) and creates the provider", async () => {
    const config = validateConfig(
      parseConfigText(`
[providers.lab]
type = "ssh"

[[providers.lab.hosts]]
host = "10.0.0.5"
user = "ubuntu"
identity_file = "~/.ssh/id_ed25519"
`),
    );
    const entry = config.providers.lab;
    expect(entry?.package).toBe("@skyward/provider-ssh");
    const provider = await createProviderFromEntry(
      entry as NonNullable<typeof entry>,
      fileURLToPath(new URL("..", import.meta.url)),
    );
    expect(whyNotProvider(provider)).toBeUndefined();
    expect(provider.name).toBe("ssh");
  });
});

describe("the test bed's hosts", () => {
  it("are hosts SSH accepts, as given and with more fields spread in", () => {
    // Only the fields testbedSshHost reads.
    const fingerprint = `SHA256:${"0".repeat(43)}`;
    const host = { host: "10.213.9.2", port: 22, user: "root", privateKey: key, identityFile: "/k" };
    const bed = {
      hosts: [
        { ...host, root: "/tmp/skyward-testbed-9/root", hostKeyFingerprint: fingerprint } as TestbedHost,
      ],
    };
    expect(() => SSH({ hosts: testbedSshHosts(bed) })).not.toThrow();
    expect(() => SSH({ hosts: testbedSshHosts(bed, { keyFile: true, pinHostKey: false }) })).not.toThrow();
    expect(() =>
      SSH({ hosts: [{ ...testbedSshHost(bed.hosts[0] as TestbedHost), privateIp: "10.0.0.5" }] }),
    ).not.toThrow();
  });
});
