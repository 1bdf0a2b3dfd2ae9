/**
 * The real single-node Kubernetes of `scripts/k8s-testbed.sh`, for the end-to-end tests: started
 * once per test file from the binaries and images its build keeps in `$SKYWARD_K8S_CACHE`, stopped
 * completely after. Without that cache (or without root) the suites are skipped with the reason
 * locally, and fail under CI, whose `scripts/test.sh` builds the cache first. With
 * `SKYWARD_K8S_KUBECONFIG` set, the suites use that running test bed instead and leave it running.
 */
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { requirePrerequisite } from "@skyward/testing";

const run = promisify(execFile);
const script = fileURLToPath(new URL("../../../scripts/k8s-testbed.sh", import.meta.url));

/** Why the cluster cannot run here, or undefined when it can (its build is in the cache). */
async function missing(): Promise<string | undefined> {
  if (process.env.SKYWARD_K8S_KUBECONFIG) return undefined;
  if (process.getuid?.() !== 0) return "the Kubernetes test bed needs root (containerd, the kubelet)";
  try {
    await run("bash", [script, "built"]);
    return undefined;
  } catch {
    return "the Kubernetes test bed is not built: run `scripts/k8s-testbed.sh build` (about 10 minutes, once)";
  }
}

/** The skip reason of the cluster's suites (throws under CI when the cluster cannot run). */
export async function requireKubernetesTestbed(): Promise<string | undefined> {
  return requirePrerequisite(await missing(), "the Kubernetes test bed (scripts/k8s-testbed.sh)");
}

/**
 * Starts a new cluster and returns its admin kubeconfig's path. One an earlier run left running (a
 * run killed before its `stop`) is stopped first: its pods would hold the node's CPU and be counted
 * as this run's.
 */
export async function startKubernetesTestbed(): Promise<string> {
  if (process.env.SKYWARD_K8S_KUBECONFIG) return process.env.SKYWARD_K8S_KUBECONFIG;
  const { stdout } = await run("bash", [script, "fresh"], { timeout: 600_000 });
  return stdout.trim().split("\n").at(-1) ?? "";
}

/** Stops the cluster: no process, mount, network namespace or bridge of it is left. */
export async function stopKubernetesTestbed(): Promise<void> {
  if (process.env.SKYWARD_K8S_KUBECONFIG) return;
  await run("bash", [script, "stop"], { timeout: 120_000 });
}

/**
 * The pod image with Debian's PyTorch, in the running cluster: built into the cache the first time
 * (14 to 23 minutes on a loaded 2-core machine, its cost printed), then imported into the cluster's
 * containerd. Returns its name.
 */
export async function kubernetesTorchImage(): Promise<string> {
  const { stdout, stderr } = await run("bash", [script, "torch-image"], { timeout: 1_800_000 });
  if (stderr.trim() !== "") process.stderr.write(`${stderr.trim()}\n`);
  return stdout.trim().split("\n").at(-1) ?? "";
}

/** Runs the cluster's kubectl with the admin kubeconfig (for what a test does behind the provider's back). */
export async function kubectl(kubeconfig: string, ...args: string[]): Promise<string> {
  const cache = process.env.SKYWARD_K8S_CACHE ?? "/var/cache/skyward-k8s";
  const { stdout } = await run(`${cache}/bin/kubectl`, ["--kubeconfig", kubeconfig, ...args], {
    timeout: 60_000,
  });
  return stdout;
}
