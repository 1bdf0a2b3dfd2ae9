/**
 * The safeguards of the machine-provider base as RunPod gets them, and the defects of issue 33 fixed:
 * the boot watchdog in the pod's start command, errors told apart (403, 400), community pods never
 * rented on demand without a public IP, spot CUDA versions from the catalog, a multi-node pool in one
 * data center, and the price cap on the market actually launched.
 */
import { execFile } from "node:child_process";
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { accelerators, NoCapacityError, type SpecInput } from "@skyward/core";
import { type Offer, Plugin } from "@skyward/core/contract";
import { preparedCluster, useMswFake } from "@skyward/testing";
import { HttpResponse, http } from "msw";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { startFakeRunPod, TEST_API_KEY } from "../test/fake-runpod.js";
import { RunPodApiError, runpodClient } from "./runpod-api.js";
import { selfDestructCommand, watchedStartCommand } from "./runpod-boot.js";
import { RunPod } from "./runpod-provider.js";
import type { RunPodSettings } from "./runpod-settings.js";

const run = promisify(execFile);
const fake = startFakeRunPod();
const keys = useMswFake(fake, "skyward-runpod-safeguards-");
const call = () => ({ signal: AbortSignal.timeout(10_000) });

const provider = (settings: RunPodSettings = {}) =>
  RunPod({ apiKey: TEST_API_KEY, keysDirectory: keys.keysDirectory, retryDelayMs: 1, ...settings });

async function clusterFor(
  input: Omit<SpecInput, "provider">,
  pick: (offers: readonly Offer[]) => Offer | undefined = (offers) => offers[0],
  settings: RunPodSettings = {},
) {
  const runpod = provider(settings);
  return { runpod, cluster: await preparedCluster(runpod, input, pick) };
}

/** The watchdog script a start command carries (base64 in `bash -c "echo … | base64 -d | bash; …"`). */
function watchdogOf(startCommand: string): string {
  const encoded = /echo ([A-Za-z0-9+/=]+) \| base64 -d/.exec(startCommand)?.[1] ?? "";
  return Buffer.from(encoded, "base64").toString("utf8");
}

describe("the boot watchdog", () => {
  it("rides in every pod's start command, v2's args and GraphQL's dockerArgs, with the pool's deadline", async () => {
    const onDemand = await clusterFor({
      accelerator: accelerators.A100({ count: 2 }),
      allocation: "on-demand",
    });
    await onDemand.runpod.provision({ cluster: onDemand.cluster, count: 1, ...call() });
    const { ttl, sshTimeout, bootstrapTimeout } = onDemand.cluster.spec;
    const seconds = Math.ceil(ttl + sshTimeout + bootstrapTimeout);
    const args = String((fake.to("/v2/pods", "POST")[0]?.body as { args?: string } | undefined)?.args);
    expect(args).toMatch(/; exec \/start\.sh"$/);
    expect(watchdogOf(args)).toContain(`sleep ${seconds}\n`);
    const spot = await clusterFor({ accelerator: accelerators.A100({ count: 2 }), allocation: "spot" });
    await spot.runpod.provision({ cluster: spot.cluster, count: 1, ...call() });
    const input = fake.operations("SkywardRentInterruptable")[0]?.variables?.input as { dockerArgs: string };
    expect(watchdogOf(input.dockerArgs)).toContain(`sleep ${seconds}\n`);
    expect(input).toMatchObject({ supportPublicIp: true });
  });

  it("deletes the pod when no worker started since the container did, and leaves it when one did (run by a real shell)", async () => {
    const directory = await mkdtemp(join(tmpdir(), "skyward-runpod-watchdog-"));
    try {
      const bin = join(directory, "bin");
      await mkdir(bin);
      // A stand-in runpodctl recording what it was asked (the API key must come from the environment).
      await writeFile(
        join(bin, "runpodctl"),
        `#!/bin/sh\necho "$* key=$RUNPOD_API_KEY" >> ${join(directory, "calls")}\n`,
      );
      // A `sleep` that returns once the test says (`go`): the watchdog's wait ends then.
      await writeFile(
        join(bin, "sleep"),
        `#!/bin/sh\nwhile [ ! -e ${join(directory, "go")} ]; do /bin/sleep 0.05; done\n`,
      );
      await chmod(join(bin, "runpodctl"), 0o755);
      await chmod(join(bin, "sleep"), 0o755);
      const root = join(directory, "pods", "{id}");
      const env = {
        ...process.env,
        PATH: `${bin}:${process.env.PATH}`,
        RUNPOD_API_KEY: "k",
      };
      const command = watchedStartCommand({ seconds: 1, root, startCommand: "true" });
      /** Starts the pod `pod`'s watchdog, runs `meanwhile`, lets its wait end, and answers what it asked runpodctl. */
      const watched = async (pod: string, meanwhile: () => Promise<void> = async () => undefined) => {
        await rm(join(directory, "calls"), { force: true });
        await rm(join(directory, "go"), { force: true });
        await run("bash", ["-c", watchdogOf(command)], { env: { ...env, RUNPOD_POD_ID: pod } });
        await meanwhile();
        await writeFile(join(directory, "go"), "");
        // Its check is made once its shell (whose command line names the directory) has ended.
        while ((await run("pgrep", ["-f", directory]).catch(() => undefined)) !== undefined)
          await new Promise((resolve) => setTimeout(resolve, 50));
        return readFile(join(directory, "calls"), "utf8").catch(() => "");
      };
      expect(await watched("pod1")).toBe("pod delete pod1 key=k\n");
      // With a worker started (its pid file under the pod's root) after the container did, nothing is deleted.
      const pod2 = join(directory, "pods", "pod2");
      await mkdir(pod2, { recursive: true });
      expect(await watched("pod2", () => writeFile(join(pod2, "worker.pid"), "1\n"))).toBe("");
      // The container restarted, its root on a kept disk (the pod volume): the old worker died with
      // it, and its pid file and log, still there, do not count. The log is kept.
      await writeFile(join(pod2, "worker.log"), "the old worker's output\n");
      expect(await watched("pod2")).toBe("pod delete pod2 key=k\n");
      expect(await readFile(join(pod2, "worker.log.old"), "utf8")).toBe("the old worker's output\n");
    } finally {
      await rm(directory, { recursive: true, force: true });
    }
  });
});

describe("the self-destruct", () => {
  it("tries again while RunPod refuses or cannot be reached, since the boot watchdog runs it once", async () => {
    const directory = await mkdtemp(join(tmpdir(), "skyward-runpod-self-destruct-"));
    try {
      const bin = join(directory, "bin");
      await mkdir(bin);
      // A stand-in runpodctl refused the first time (a 429, a 5xx), and a python3 that cannot reach the API.
      const calls = join(directory, "calls");
      const refused = join(directory, "refused");
      await writeFile(
        join(bin, "runpodctl"),
        `#!/bin/sh\necho "$*" >> ${calls}\nif [ ! -e ${refused} ]; then touch ${refused}; exit 1; fi\n`,
      );
      await writeFile(join(bin, "python3"), "#!/bin/sh\nexit 1\n");
      await chmod(join(bin, "runpodctl"), 0o755);
      await chmod(join(bin, "python3"), 0o755);
      const env = { ...process.env, PATH: `${bin}:${process.env.PATH}`, SKYWARD_RETRY_SECONDS: "0" };
      await run("bash", ["-c", selfDestructCommand("pod1")], { env });
      expect(await readFile(calls, "utf8")).toBe("pod delete pod1\npod delete pod1\n");
    } finally {
      await rm(directory, { recursive: true, force: true });
    }
  });
});

describe("errors told apart", () => {
  it("a GraphQL error (HTTP 200 with `errors`) echoing the API key does not carry it", async () => {
    // A GraphQL server may quote what it could not parse; the key must not reach the error, an event or a log.
    const secret = "rp-echoed-secret-key-0123456789";
    const echoing = (message: string) => async () =>
      new Response(JSON.stringify({ errors: [{ message }] }), {
        status: 200,
        headers: { "content-type": "application/json" },
      });
    for (const message of [`invalid input near "${secret}"`, `API key ${secret} is unauthorized`]) {
      const settings = {
        apiKey: secret,
        fetch: echoing(message),
        maxRetries: 0,
        retryDelayMs: 1,
        requestTimeoutMs: 5000,
      };
      const client = runpodClient(settings);
      const error = await client
        .graphql(z.looseObject({}), {
          query: "mutation { podRentInterruptable }",
          purpose: "renting an interruptible pod",
          idempotent: false,
          ...call(),
        })
        .catch((caught: unknown) => caught);
      expect(RunPodApiError.isInstance(error)).toBe(true);
      expect((error as Error).message).not.toContain(secret);
      expect((error as Error).message).toContain("[redacted]");
    }
  });

  it("a 403 is an account that may not use that pool, not a bad API key", async () => {
    // https://docs.runpod.io/api-reference-v2/pods/create-a-pod ("Authorizations"): a valid key that
    // lacks access to the requested resource or action is answered 403.
    const { runpod, cluster } = await clusterFor({
      accelerator: accelerators.A100({ count: 2 }),
      allocation: "on-demand",
    });
    fake.interrupt(1, () =>
      HttpResponse.json(
        { title: "Forbidden", status: 403, detail: "this account cannot use the requested pool" },
        { status: 403 },
      ),
    );
    const error = await runpod.provision({ cluster, count: 1, ...call() }).catch((caught: unknown) => caught);
    expect(RunPodApiError.isInstance(error) && error.kind).toBe("account");
    expect((error as Error).message).toMatch(
      /^RunPod refused this account \(HTTP 403\) while creating a GPU pod \(POST \/v2\/pods\): this account cannot use the requested pool/,
    );
    expect((error as Error).message).not.toContain("RUNPOD_API_KEY");
  });

  it("a 400 that is not about capacity is a bad request, reported as such, not 'no capacity'", async () => {
    const { runpod, cluster } = await clusterFor({
      accelerator: accelerators.A100({ count: 2 }),
      allocation: "on-demand",
    });
    fake.interrupt(1, () =>
      HttpResponse.json(
        {
          title: "Bad Request",
          status: 400,
          detail: "mounts.persistent and mounts.network are mutually exclusive",
        },
        { status: 400 },
      ),
    );
    const error = await runpod.provision({ cluster, count: 1, ...call() }).catch((caught: unknown) => caught);
    expect(NoCapacityError.isInstance(error)).toBe(false);
    expect(RunPodApiError.isInstance(error) && error.kind).toBe("bad-request");
    expect((error as Error).message).toContain("mutually exclusive");
  });
});

describe("offers and placement", () => {
  it("community pods are never rented on demand (v2 cannot require a public IP): interruptible only", async () => {
    const offers = await provider({ cloudType: "community" }).offers({
      query: { accelerator: { name: "A100", count: 2 }, allocation: "spot-if-available" },
      ...call(),
    });
    expect(offers.map((offer) => [offer.id, offer.onDemandPrice])).toEqual([
      ["runpod:community:NVIDIA A100 80GB PCIe:x2", null],
    ]);
    const onDemand = await provider({ cloudType: "community" }).offers({
      query: { accelerator: { name: "A100", count: 2 }, allocation: "on-demand" },
      ...call(),
    });
    expect(onDemand).toEqual([]);
  });

  it("spot pods ask for the CUDA versions the catalog lists, a newer one than any list kept here included", async () => {
    fake.machines["NVIDIA A100 80GB PCIe"]?.push({
      cloud: "SECURE",
      dataCenterId: "US-KS-2",
      cudaVersion: "13.1",
      free: 8,
    });
    const { runpod, cluster } = await clusterFor({
      accelerator: accelerators.A100({ count: 2 }),
      allocation: "spot",
    });
    await runpod.provision({ cluster, count: 1, ...call() });
    const input = fake.operations("SkywardRentInterruptable")[0]?.variables?.input;
    expect(input).toMatchObject({ allowedCudaVersions: expect.arrayContaining(["13.1", "12.9"]) });
  });

  it("the pods of a multi-node pool are pinned to one data center with global networking", async () => {
    // Secure A100 PCIe is stocked in EU-RO-1 (CUDA 12.4) and US-KS-2 (12.9), both with global networking.
    const ddp = Plugin.create("ddp").withPeerNetwork();
    const { runpod, cluster } = await clusterFor(
      { accelerator: accelerators.A100({ count: 1 }), allocation: "on-demand", nodes: 3, plugins: [ddp] },
      (offers) => offers.find((offer) => offer.id.startsWith("runpod:secure:NVIDIA A100 80GB PCIe")),
      { allowedCudaVersions: ["12.4", "12.9"] },
    );
    expect(cluster.specific.dataCenterIds).toHaveLength(1);
    await runpod.provision({ cluster, count: 3, ...call() });
    const centers = fake
      .to("/v2/pods", "POST")
      .map((request) => (request.body as { dataCenterIds: string[] }).dataCenterIds);
    expect(centers).toEqual([
      cluster.specific.dataCenterIds,
      cluster.specific.dataCenterIds,
      cluster.specific.dataCenterIds,
    ]);
    expect(new Set([...fake.pods.values()].map((pod) => pod.machine?.dataCenterId)).size).toBe(1);
  });
});

describe("the price cap", () => {
  it("is checked on the price RunPod reports for the pod launched: one above it is deleted at once", async () => {
    const { runpod, cluster } = await clusterFor({
      accelerator: accelerators.A100({ count: 2 }),
      allocation: "on-demand",
      maxHourlyCost: 3.5,
    });
    // The market moved between the offer ($3.28/h) and the create: RunPod bills $3.90/h.
    fake.server.use(
      http.post(
        "https://api.runpod.io/v2/pods",
        async ({ request }) => {
          const made = await fetch(request.url, {
            method: "POST",
            headers: request.headers,
            body: await request.text(),
          });
          return HttpResponse.json({ ...((await made.json()) as object), cost: 3.9 }, { status: 201 });
        },
        { once: true },
      ),
    );
    const error = await runpod.provision({ cluster, count: 1, ...call() }).catch((caught: unknown) => caught);
    expect(NoCapacityError.isInstance(error)).toBe(true);
    expect((error as NoCapacityError).attempts[0]?.reason).toBe(
      "on-demand: launched at $3.9/h, over maxHourlyCost $3.5/h; deleted",
    );
    // Created once, deleted at once: nothing left billing.
    expect(fake.to("/v2/pods", "POST")).toHaveLength(1);
    expect(fake.to(/^\/v2\/pods\/fakepod/, "DELETE")).toHaveLength(1);
    expect(fake.pods.size).toBe(0);
  });
});
