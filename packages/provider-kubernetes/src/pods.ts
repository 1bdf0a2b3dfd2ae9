/**
 * Skyward's nodes as pods: the manifest of one (resources, labels, deadline, the command that waits
 * for its worker), what a pod says turned into an `Instance`, and the reasons a pending pod will not
 * start that a user acts on (an image missing, a resource short).
 */
import { randomBytes } from "node:crypto";
import type { V1Pod, V1Toleration } from "@kubernetes/client-node";
import { NoCapacityError, ProvisionError } from "@skyward/core";
import type { Instance } from "@skyward/core/contract";
import { SKYWARD_TAGS } from "@skyward/provider-utils";
import { PROVIDER_NAME } from "./kubernetes-api.js";
import { GPU_PRODUCT_LABEL, GPU_RESOURCE, type KubernetesOfferData } from "./kubernetes-offers.js";
import type { ParsedKubernetesSettings } from "./kubernetes-settings.js";

/** Labels Skyward puts on its pods: what `skyward instances` and `down` select by. */
export const POD_LABELS = Object.freeze({
  managedBy: "app.kubernetes.io/managed-by",
  cluster: "skyward.dev/cluster",
});
/** Annotations (values too free for labels). */
export const POD_ANNOTATIONS = Object.freeze({
  pool: "skyward.dev/pool",
  offer: "skyward.dev/offer",
  hourlyPrice: "skyward.dev/hourly-price",
  owner: "skyward.dev/owner",
});
/** The selector of every pod Skyward made. */
export const SKYWARD_POD_SELECTOR = `${POD_LABELS.managedBy}=skyward`;
/** The container that runs the worker. */
export const WORKER_CONTAINER = "worker";
/** The file whose appearance starts the worker (written by the launcher once the bootstrap is done). */
export const START_SCRIPT = "start.sh";

/** What one pod of a cluster is made from. */
export interface PodRequest {
  readonly clusterId: string;
  readonly poolId: string;
  readonly offerId: string;
  readonly hourlyPrice: number;
  readonly size: KubernetesOfferData;
  readonly namespace: string;
  readonly settings: ParsedKubernetesSettings;
  /** Seconds the pod may run at most (`activeDeadlineSeconds`). */
  readonly deadlineSeconds: number;
}

/**
 * The pod's command: it waits (as PID 1, so the container lives) until the launcher has bootstrapped
 * the environment through exec and written the start script, then runs it (it becomes the worker,
 * see `renderStartScript`). When the worker exits (released and its TTL out, or stopped) the container ends and, with `restartPolicy: Never`,
 * the pod stops holding its node's resources.
 */
export function podCommand(root: string): string[] {
  const start = `${root}/${START_SCRIPT}`;
  return ["/bin/sh", "-c", `while [ ! -f '${start}' ]; do sleep 0.2; done; exec /bin/sh '${start}'`];
}

/** The manifest of one new pod. */
export function podManifest(request: PodRequest): V1Pod {
  const { settings, size } = request;
  const requests: Record<string, string> = {
    cpu: `${Math.round(size.vcpus * 1000)}m`,
    memory: `${Math.round(size.memoryGb * 1024)}Mi`,
  };
  const limits: Record<string, string> = {};
  if (size.gpus > 0) {
    requests[GPU_RESOURCE] = String(size.gpus);
    // Extended resources must be requested and limited alike.
    limits[GPU_RESOURCE] = String(size.gpus);
  }
  const nodeSelector = {
    ...settings.nodeSelector,
    ...(size.gpuProduct !== undefined ? { [GPU_PRODUCT_LABEL]: size.gpuProduct } : {}),
  };
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name: `${request.clusterId}-${randomBytes(3).toString("hex")}`,
      namespace: request.namespace,
      labels: {
        ...settings.labels,
        [POD_LABELS.managedBy]: "skyward",
        [POD_LABELS.cluster]: request.clusterId,
      },
      annotations: {
        [POD_ANNOTATIONS.pool]: request.poolId,
        [POD_ANNOTATIONS.offer]: request.offerId,
        [POD_ANNOTATIONS.hourlyPrice]: String(request.hourlyPrice),
      },
    },
    spec: {
      restartPolicy: "Never",
      activeDeadlineSeconds: request.deadlineSeconds,
      terminationGracePeriodSeconds: 5,
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      ...(settings.serviceAccount !== undefined ? { serviceAccountName: settings.serviceAccount } : {}),
      ...(Object.keys(nodeSelector).length > 0 ? { nodeSelector } : {}),
      ...(settings.tolerations.length > 0 ? { tolerations: settings.tolerations as V1Toleration[] } : {}),
      containers: [
        {
          name: WORKER_CONTAINER,
          image: settings.image,
          imagePullPolicy: settings.imagePullPolicy,
          command: podCommand(settings.root),
          resources: { requests, ...(Object.keys(limits).length > 0 ? { limits } : {}) },
        },
      ],
    },
  };
}

/** Whether the pod's worker container runs (a pod being deleted runs it until its grace period ends). */
export function workerContainerRunning(pod: V1Pod): boolean {
  return (
    pod.status?.containerStatuses?.some(
      (container) => container.name === WORKER_CONTAINER && container.state?.running !== undefined,
    ) ?? false
  );
}

/**
 * The pod as an instance: running once its container runs, its address the pod IP; stopping once
 * deleted (`graceful`: once its container has ended too, see the provider's `getInstance`).
 */
export function instanceOfPod(pod: V1Pod, graceful = false): Instance {
  const metadata = pod.metadata ?? {};
  const annotations = metadata.annotations ?? {};
  const phase = pod.status?.phase;
  const containerRunning = workerContainerRunning(pod);
  const ending = metadata.deletionTimestamp !== undefined && !(graceful && containerRunning);
  const status: Instance["status"] = ending
    ? "stopping"
    : phase === "Succeeded" || phase === "Failed"
      ? "terminated"
      : phase === "Running" && containerRunning && pod.status?.podIP
        ? "running"
        : "pending";
  const price = Number(annotations[POD_ANNOTATIONS.hourlyPrice]);
  const tags: Record<string, string> = {
    [SKYWARD_TAGS.cluster]: metadata.labels?.[POD_LABELS.cluster] ?? "",
    [SKYWARD_TAGS.pool]: annotations[POD_ANNOTATIONS.pool] ?? "",
    [SKYWARD_TAGS.region]: metadata.namespace ?? "",
    [SKYWARD_TAGS.offer]: annotations[POD_ANNOTATIONS.offer] ?? "",
  };
  return {
    id: metadata.name ?? "",
    status,
    publicIp: null,
    privateIp: pod.status?.podIP ?? null,
    ssh: null,
    spot: false,
    hourlyPrice: Number.isFinite(price) ? price : null,
    offerId: annotations[POD_ANNOTATIONS.offer] ?? "",
    createdAt: metadata.creationTimestamp ? new Date(metadata.creationTimestamp).getTime() : Date.now(),
    tags,
  };
}

const IMAGE_FAILURES = new Set(["ErrImageNeverPull", "ErrImagePull", "ImagePullBackOff", "InvalidImageName"]);

/**
 * Why a pending pod will not start, as the error the pool reports, or undefined while it may still:
 * the image missing or not pullable (never retried: the next pod would fail alike), the scheduler
 * finding no node with room (no capacity, naming the short resource from its message). A pod
 * unschedulable for another reason (a taint, a node not ready yet) may still start: it waits.
 */
export function pendingPodFailure(pod: V1Pod, image: string): Error | undefined {
  const name = pod.metadata?.name ?? "";
  for (const container of pod.status?.containerStatuses ?? []) {
    const waiting = container.state?.waiting;
    if (waiting?.reason !== undefined && IMAGE_FAILURES.has(waiting.reason)) {
      return new ProvisionError({
        provider: PROVIDER_NAME,
        message:
          `pod ${name}: the image "${image}" is not present on its node or cannot be pulled (${waiting.reason}): ${waiting.message ?? ""}`.trim(),
      });
    }
    if (waiting?.reason === "CreateContainerConfigError" || waiting?.reason === "CreateContainerError") {
      return new ProvisionError({
        provider: PROVIDER_NAME,
        message:
          `pod ${name}: its container could not be created (${waiting.reason}): ${waiting.message ?? ""}`.trim(),
      });
    }
  }
  const unschedulable = pod.status?.conditions?.find(
    (condition) =>
      condition.type === "PodScheduled" &&
      condition.status === "False" &&
      condition.reason === "Unschedulable",
  );
  // Only a resource short is final: a taint or a not-ready node may clear while the pool waits.
  const short = [...(unschedulable?.message ?? "").matchAll(/Insufficient ([A-Za-z0-9./_-]+)/g)].map(
    (match) => match[1],
  );
  if (unschedulable && short.length > 0) {
    const reason = `no node has room for pod ${name}: insufficient ${[...new Set(short)].join(", ")} (scheduler: ${unschedulable.message})`;
    return new NoCapacityError({ attempts: [{ provider: PROVIDER_NAME, reason }] });
  }
  return undefined;
}
