import type { V1ContainerState, V1Pod } from "@kubernetes/client-node";
import { NoCapacityError, ProvisionError } from "@skyward/core";
import { describe, expect, it } from "vitest";
import { parseSettings } from "./kubernetes-settings.js";
import { instanceOfPod, pendingPodFailure, podManifest } from "./pods.js";

const settings = parseSettings(
  {
    image: "localhost/skyward-python:bookworm",
    imagePullPolicy: "Never",
    nodeSelector: { pool: "gpu" },
    tolerations: [{ key: "nvidia.com/gpu", operator: "Exists", effect: "NoSchedule" }],
    serviceAccount: "skyward",
    labels: { team: "ml" },
  },
  "",
);

/** A running pod's status whose worker container is in `state` (the kubelet's `containerStatuses`). */
function workerStatus(state: V1ContainerState): V1Pod["status"] {
  return {
    phase: "Running",
    podIP: "10.214.0.7",
    containerStatuses: [{ name: "worker", image: "x", imageID: "", ready: true, restartCount: 0, state }],
  };
}

describe("podManifest", () => {
  const pod = podManifest({
    clusterId: "skyward-1a2b3c4d",
    poolId: "train run",
    offerId: "kubernetes:Tesla-T4:x86_64:1x2c4g",
    hourlyPrice: 0.35,
    size: { gpuProduct: "Tesla-T4", gpus: 1, vcpus: 2, memoryGb: 4 },
    namespace: "ml",
    settings,
    deadlineSeconds: 3600,
  });

  it("requests the size, GPUs requested and limited alike, on the GPU's nodes", () => {
    const container = pod.spec?.containers[0];
    expect(container?.resources).toEqual({
      requests: { cpu: "2000m", memory: "4096Mi", "nvidia.com/gpu": "1" },
      limits: { "nvidia.com/gpu": "1" },
    });
    expect(pod.spec?.nodeSelector).toEqual({ pool: "gpu", "nvidia.com/gpu.product": "Tesla-T4" });
    expect(pod.spec?.tolerations).toEqual([
      { key: "nvidia.com/gpu", operator: "Exists", effect: "NoSchedule" },
    ]);
    expect(container?.image).toBe("localhost/skyward-python:bookworm");
    expect(container?.imagePullPolicy).toBe("Never");
  });

  it("carries Skyward's labels, the hard deadline, no restarts and no mounted token", () => {
    expect(pod.metadata?.labels).toEqual({
      team: "ml",
      "app.kubernetes.io/managed-by": "skyward",
      "skyward.dev/cluster": "skyward-1a2b3c4d",
    });
    expect(pod.metadata?.annotations?.["skyward.dev/pool"]).toBe("train run");
    expect(pod.metadata?.name).toMatch(/^skyward-1a2b3c4d-[0-9a-f]{6}$/);
    expect(pod.spec).toMatchObject({
      restartPolicy: "Never",
      activeDeadlineSeconds: 3600,
      automountServiceAccountToken: false,
      serviceAccountName: "skyward",
    });
  });

  it("is read back as an instance with Skyward's tags", () => {
    const running: V1Pod = {
      ...pod,
      metadata: { ...pod.metadata, creationTimestamp: new Date("2026-11-29T00:00:00Z") },
      status: workerStatus({ running: { startedAt: new Date() } }),
    };
    expect(instanceOfPod(running)).toMatchObject({
      status: "running",
      privateIp: "10.214.0.7",
      ssh: null,
      hourlyPrice: 0.35,
      offerId: "kubernetes:Tesla-T4:x86_64:1x2c4g",
      tags: { "skyward:cluster": "skyward-1a2b3c4d", "skyward:pool": "train run", "skyward:region": "ml" },
    });
    expect(instanceOfPod({ ...running, status: { phase: "Failed" } }).status).toBe("terminated");
    expect(instanceOfPod({ ...running, status: { phase: "Pending" } }).status).toBe("pending");
  });

  // A deleted pod keeps its container running through its grace period
  // (https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/#pod-termination).
  it("reads a deleted pod as stopping, or (graceful) as running until its container has ended", () => {
    const deleted: V1Pod = {
      ...pod,
      metadata: { ...pod.metadata, deletionTimestamp: new Date("2026-11-29T00:01:00Z") },
      status: workerStatus({ running: { startedAt: new Date() } }),
    };
    expect(instanceOfPod(deleted).status).toBe("stopping");
    expect(instanceOfPod(deleted, true).status).toBe("running");
    const ended: V1Pod = { ...deleted, status: workerStatus({ terminated: { exitCode: 0 } }) };
    expect(instanceOfPod(ended, true).status).toBe("stopping");
  });
});

// Pod statuses as the kubelet and scheduler write them: container waiting reasons
// (https://kubernetes.io/docs/concepts/containers/images/#imagepullbackoff) and the PodScheduled
// condition (https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/#pod-conditions).
describe("pendingPodFailure", () => {
  const pending = (status: V1Pod["status"]): V1Pod => ({
    metadata: { name: "p" },
    status: { phase: "Pending", ...status },
  });

  it("names a missing image", () => {
    const failure = pendingPodFailure(
      pending({
        containerStatuses: [
          {
            name: "worker",
            image: "nope:1",
            imageID: "",
            ready: false,
            restartCount: 0,
            state: {
              waiting: {
                reason: "ErrImageNeverPull",
                message: 'Container image "nope:1" is not present with pull policy of Never',
              },
            },
          },
        ],
      }),
      "nope:1",
    );
    expect(ProvisionError.isInstance(failure)).toBe(true);
    expect(failure?.message).toContain('the image "nope:1" is not present');
  });

  it("names the resource the scheduler found short", () => {
    const failure = pendingPodFailure(
      pending({
        conditions: [
          {
            type: "PodScheduled",
            status: "False",
            reason: "Unschedulable",
            message:
              "0/1 nodes are available: 1 Insufficient nvidia.com/gpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.",
          },
        ],
      }),
      "x",
    );
    expect(NoCapacityError.isInstance(failure)).toBe(true);
    expect(failure?.message).toContain("insufficient nvidia.com/gpu");
  });

  it("is undefined while the pod may still start", () => {
    expect(pendingPodFailure(pending({}), "x")).toBeUndefined();
  });
});
