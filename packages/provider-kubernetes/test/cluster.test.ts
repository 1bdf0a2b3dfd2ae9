/**
 * The Kubernetes provider end to end on a real cluster (scripts/k8s-testbed.sh: etcd, the API
 * server, scheduler, controller manager, containerd and a kubelet built from k8s.io/kubernetes, the
 * node advertising 2 `nvidia.com/gpu` and NVIDIA's GPU labels): pools of pods run the dispatch
 * shapes through exec and port-forward, a pod asking for more GPUs than a node has is refused before
 * anything waits, a deleted or evicted pod is a preemption whose tasks run again elsewhere, PyTorch
 * DDP forms one gloo world across two pods (an image with Debian's python3-torch), a client
 * SIGKILLed leaves pods that its workers' TTL or `skyward down --all` (the built CLI) ends, and the
 * provider conformance suite runs with a real pool.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import * as sky from "@skyward/core";
import { torch } from "@skyward/plugin-torch";
import {
  builtCli,
  ddpTasks,
  eventually,
  expectAllReduceSum,
  expectDdpAgreement,
  expectGlooWorld,
  isCi,
  runProviderConformance,
  useScratchSkywardHome,
} from "@skyward/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Kubernetes } from "../src/index.js";
import {
  kubectl,
  kubernetesTorchImage,
  requireKubernetesTestbed,
  startKubernetesTestbed,
  stopKubernetesTestbed,
} from "./kubernetes-testbed.js";

const skipReason = await requireKubernetesTestbed();
const tasks = fileURLToPath(new URL("./fixtures/k8s_tasks.py", import.meta.url));
const sigkillChild = fileURLToPath(new URL("./fixtures/sigkill-child.ts", import.meta.url));
const cli = builtCli(import.meta.url, "provider-kubernetes");
const add = sky.python<[number, number], number>("k8s_tasks:add");
const square = sky.python<[number], number>("k8s_tasks:square");
const sleep = sky.python<[number], number>("k8s_tasks:sleep");
const info = sky.python<[], { node: number; total_nodes: number; hostname: string; head_addr: string }>(
  "k8s_tasks:info",
);

let kubeconfig = "";
const provider = () =>
  Kubernetes({
    kubeconfig,
    image: "localhost/skyward-python:bookworm",
    imagePullPolicy: "Never",
    defaultMemoryGb: 0.25,
    defaultVcpus: 0.1,
  });
/** Skyward's pods that still hold their node: neither ending (being deleted) nor ended. */
const skywardPods = async (): Promise<string[]> => {
  const list = JSON.parse(
    await kubectl(kubeconfig, "get", "pods", "-l", "app.kubernetes.io/managed-by=skyward", "-o", "json"),
  ) as { items: { metadata: { name: string; deletionTimestamp?: string }; status?: { phase?: string } }[] };
  return list.items
    .filter((pod) => pod.metadata.deletionTimestamp === undefined)
    .filter((pod) => pod.status?.phase !== "Succeeded" && pod.status?.phase !== "Failed")
    .map((pod) => pod.metadata.name);
};

beforeAll(async () => {
  if (skipReason !== undefined) return;
  await useScratchSkywardHome("skyward-kubernetes-e2e-");
  kubeconfig = await startKubernetesTestbed();
}, 600_000);

const clients: ChildProcess[] = [];

afterAll(async () => {
  for (const client of clients) client.kill("SIGKILL");
  if (skipReason !== undefined) return;
  await stopKubernetesTestbed();
}, 120_000);

describe.skipIf(skipReason !== undefined)("kubernetes pools on a real cluster", () => {
  it("a pool of two pods runs run, broadcast and map, each pod its own node", async () => {
    await using pool = await sky.compute({
      provider: provider(),
      nodes: 2,
      image: { includes: [tasks] },
      options: { console: false },
    });
    expect(await pool.run(add(2, 3))).toBe(5);
    const nodes = await pool.broadcast(info());
    expect(nodes.map((entry) => entry.node)).toEqual([0, 1]);
    expect(new Set(nodes.map((entry) => entry.hostname)).size).toBe(2);
    expect(nodes.every((entry) => entry.total_nodes === 2)).toBe(true);
    expect(await pool.map(square, [[1], [2], [3], [4], [5]])).toEqual([1, 4, 9, 16, 25]);
    expect(await skywardPods()).toHaveLength(2);
  }, 300_000);

  it("refuses more nvidia.com/gpu than any node has before a pod waits, naming the resource", async () => {
    const before = await skywardPods();
    const attempt = sky.compute({
      provider: provider(),
      accelerator: sky.accelerators.T4({ count: 4 }),
      allocation: "on-demand",
      image: { includes: [tasks] },
      options: { console: false, maxProvisionAttempts: 1 },
    });
    await expect(attempt).rejects.toThrow(
      /nvidia\.com\/gpu: 4 asked per pod, the most a node has allocatable is 2/,
    );
    expect(await skywardPods()).toEqual(before);
  }, 120_000);

  it("runs a pod with the node's GPUs, scheduled by the extended resource", async () => {
    await using pool = await sky.compute({
      provider: provider(),
      accelerator: sky.accelerators.T4({ count: 2 }),
      allocation: "on-demand",
      image: { includes: [tasks] },
      options: { console: false },
    });
    expect(await pool.run(add(20, 22))).toBe(42);
    const [name] = await skywardPods();
    const limits = await kubectl(
      kubeconfig,
      "get",
      "pod",
      name ?? "",
      "-o",
      "jsonpath={.spec.containers[0].resources.limits.nvidia\\.com/gpu}",
    );
    expect(limits).toBe("2");
  }, 300_000);

  it("a pod deleted, then one evicted, is preempted: its tasks run again on its replacement, each result once", async () => {
    await using pool = await sky.compute({
      provider: provider(),
      nodes: 2,
      image: { includes: [tasks] },
      options: { console: false },
    });
    let retried = 0;
    pool.on("task.failed", (event) => {
      if (event.willRetry) retried += 1;
    });
    const preempted: string[] = [];
    pool.on("node.preempted", (event) => preempted.push(event.reason ?? ""));
    const replaced: string[] = [];
    pool.on("node.replaced", (event) => replaced.push(event.previousInstanceId));
    const evict = async (pod: string) => {
      const config = new KubeConfig();
      config.loadFromFile(kubeconfig);
      await config
        .makeApiClient(CoreV1Api)
        .createNamespacedPodEviction({ name: pod, namespace: "default", body: { metadata: { name: pod } } });
    };
    const takeBack = [
      (pod: string) => kubectl(kubeconfig, "delete", "pod", pod, "--wait=false").then(() => undefined),
      evict,
    ];
    for (const [round, end] of takeBack.entries()) {
      const [, second] = await pool.broadcast(info());
      const deliveries: number[] = [];
      const results = Promise.all(
        [0, 1, 2, 3].map((index) =>
          pool.run(sleep(3)).then((value) => {
            deliveries.push(index);
            return value;
          }),
        ),
      );
      await new Promise((resolve) => setTimeout(resolve, 1000));
      await end(second?.hostname ?? "");
      expect(await results).toEqual([3, 3, 3, 3]);
      expect(deliveries.sort()).toEqual([0, 1, 2, 3]);
      // The worker took the kubelet's SIGTERM for a preemption and said so, once per pod.
      expect(preempted).toHaveLength(round + 1);
      expect(preempted[round]).toMatch(/^preempted SIGTERM at \S+$/);
      await expect.poll(() => replaced, { timeout: 120_000 }).toHaveLength(round + 1);
      expect(replaced[round]).toBe(second?.hostname);
      const after = await pool.broadcast(info());
      expect(after.map((entry) => entry.node)).toEqual([0, 1]);
      expect(after[1]?.hostname).not.toBe(second?.hostname);
    }
    expect(retried).toBeGreaterThan(0);
  }, 360_000);

  it("PyTorch DDP through the torch plugin forms one gloo world across two pods", async () => {
    const image = await kubernetesTorchImage();
    await using pool = await sky.compute({
      provider: Kubernetes({
        kubeconfig,
        image,
        imagePullPolicy: "Never",
        defaultMemoryGb: 0.5,
        defaultVcpus: 0.2,
      }),
      nodes: 2,
      ttl: 0,
      // Debian's python3-torch is the image's own: the workers' environment sees it.
      image: { python: "/usr/bin/python3", includes: [ddpTasks.file] },
      plugins: [torch({ backend: "gloo" })],
      options: { console: false, bootstrapTimeout: 240 },
    });
    // The master is the head pod, at its pod IP.
    const head = pool.nodes()[0]?.instanceId ?? "";
    const headIp = await kubectl(kubeconfig, "get", "pod", head, "-o", "jsonpath={.status.podIP}");
    expectGlooWorld(await pool.broadcast(ddpTasks.groupInfo()), 2, headIp);
    expectAllReduceSum(await pool.broadcast(ddpTasks.allReduceSum(4)), 4, 2);
    expectDdpAgreement(await pool.broadcast(ddpTasks.ddpGradients()));
  }, 1_800_000);

  it("a detached pool is attached again: the same pods, their workers reached again", async () => {
    const pool = await sky.compute({
      provider: provider(),
      nodes: 2,
      image: { includes: [tasks] },
      options: { console: false },
    });
    const before = await pool.broadcast(info());
    const id = await pool.detach();
    await using again = await sky.attach(id, { provider: provider(), options: { console: false } });
    expect(again.id).toBe(id);
    const after = await again.broadcast(info());
    expect(after.map((entry) => entry.hostname)).toEqual(before.map((entry) => entry.hostname));
    expect(await again.map(square, [[3], [4]])).toEqual([9, 16]);
  }, 300_000);

  it("refuses to attach a detached pool whose pod is gone, naming the pod", async () => {
    const pool = await sky.compute({
      provider: provider(),
      image: { includes: [tasks] },
      options: { console: false },
    });
    const [pod] = pool.nodes().map((node) => node.instanceId);
    const id = await pool.detach();
    await kubectl(kubeconfig, "delete", "pod", pod ?? "", "--wait=true");
    await expect(sky.attach(id, { provider: provider(), options: { console: false } })).rejects.toThrow(
      new RegExp(`pod default/${pod} is gone`),
    );
  }, 300_000);

  it("names the verb and resource RBAC forbids", async () => {
    const nobody = Kubernetes({ kubeconfig: kubeconfig.replace(/admin\.kubeconfig$/, "nobody.kubeconfig") });
    await expect(
      nobody.offers({
        query: { accelerator: null, allocation: "cheapest" },
        signal: AbortSignal.timeout(30_000),
      }),
    ).rejects.toThrow(/forbids list nodes .*User "skyward-nobody" cannot list resource "nodes"/);
  }, 60_000);

  it("says which image is missing", async () => {
    const attempt = sky.compute({
      provider: Kubernetes({ kubeconfig, image: "localhost/no-such-image:1", imagePullPolicy: "Never" }),
      image: { includes: [tasks] },
      options: { console: false, maxProvisionAttempts: 1 },
    });
    await expect(attempt).rejects.toThrow(
      /the image "localhost\/no-such-image:1" is not present .*ErrImageNeverPull/,
    );
  }, 120_000);

  it("makes a namespace quota exceeded a lack of capacity", async () => {
    const namespace = `skyward-quota-${Date.now().toString(36)}`;
    await kubectl(kubeconfig, "create", "namespace", namespace);
    await kubectl(kubeconfig, "create", "quota", "no-pods", "--hard=pods=0", "-n", namespace);
    // Pods are admitted only once the namespace's default service account exists.
    await eventually(
      () =>
        kubectl(kubeconfig, "get", "serviceaccount", "default", "-n", namespace).then(
          () => true,
          () => false,
        ),
      30_000,
    );
    const attempt = sky.compute({
      provider: Kubernetes({
        kubeconfig,
        namespace,
        image: "localhost/skyward-python:bookworm",
      }),
      image: { includes: [tasks] },
      options: { console: false, maxProvisionAttempts: 1 },
    });
    await expect(attempt).rejects.toThrow(/resource quota is exceeded: .*exceeded quota: no-pods/);
  }, 120_000);

  /** Starts a client whose one-pod pool has workers of `ttl` seconds and returns it with its pods. */
  const startClient = async (ttl: number) => {
    const client = spawn(process.execPath, [sigkillChild, kubeconfig, String(ttl)], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    clients.push(client);
    const line = await new Promise<string>((resolve, reject) => {
      createInterface({ input: client.stdout }).once("line", resolve);
      client.once("exit", (code) =>
        reject(new Error(`the client exited (${code}) before its pool was ready`)),
      );
    });
    const { pods } = JSON.parse(line) as { pods: string[] };
    expect((await skywardPods()).filter((name) => pods.includes(name))).toEqual(pods);
    return { client, pods };
  };

  it("a client SIGKILLed leaves no pod running once its workers' TTL is out", async () => {
    const { client, pods } = await startClient(3);
    client.kill("SIGKILL");
    // The worker finds its client gone, waits out the TTL (3 s), stops: its pod ends with it.
    expect(
      await eventually(async () => (await skywardPods()).every((name) => !pods.includes(name)), 60_000),
    ).toBe(true);
    await kubectl(kubeconfig, "delete", "pod", ...pods, "--wait=false");
  }, 180_000);

  it.skipIf(!cli.built && !isCi())(
    "skyward down --all deletes the pods a SIGKILLed client left",
    async () => {
      const { client, pods } = await startClient(3600);
      client.kill("SIGKILL");
      await using project = await cli.project({
        prefix: "skyward-kubernetes-cli-",
        toml: `
[providers.cluster]
type = "kubernetes"
kubeconfig = "${kubeconfig}"
image = "localhost/skyward-python:bookworm"
image_pull_policy = "Never"
`,
      });
      const listed = await project.run(["instances", "--provider", "cluster"]);
      expect(listed.code, listed.stderr).toBe(0);
      for (const pod of pods) expect(listed.stdout).toContain(pod);
      // Still running without its client: its worker waits out an hour's TTL.
      expect((await skywardPods()).filter((name) => pods.includes(name))).toEqual(pods);
      const down = await project.run(["down", "--all", "--yes", "--wait", "60"]);
      expect(down.code, down.stderr).toBe(0);
      await expect
        .poll(async () => (await skywardPods()).filter((name) => pods.includes(name)), { timeout: 60_000 })
        .toEqual([]);
      const after = await project.run(["instances", "--provider", "cluster"]);
      expect(after.code, after.stderr).toBe(0);
      for (const pod of pods) expect(after.stdout).not.toContain(pod);
    },
    180_000,
  );

  it("leaves no pod when the pools are closed", async () => {
    const deadline = Date.now() + 60_000;
    while ((await skywardPods()).length > 0 && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 1000));
    expect(await skywardPods()).toEqual([]);
  }, 90_000);
});

if (skipReason === undefined) {
  runProviderConformance({
    name: "kubernetes (a real single-node cluster)",
    create: provider,
    spec: { accelerator: sky.accelerators.T4(), allocation: "on-demand" },
    supports: { accelerator: "T4", selfDestruct: false },
    leftovers: skywardPods,
    unknownInstanceId: "skyward-00000000-000000",
    pool: { image: { includes: [tasks] } },
    timeoutMs: 180_000,
  });
}
