import { ApiException } from "@kubernetes/client-node";
import { NoCapacityError, ProvisionError } from "@skyward/core";
import { describe, expect, it } from "vitest";
import { kubernetesError } from "./kubernetes-api.js";

// Status bodies as the API server returns them
// (https://kubernetes.io/docs/reference/using-api/api-concepts/#response-status-kind).
const status = (code: number, reason: string, message: string) =>
  new ApiException(
    code,
    "HTTP-Code",
    JSON.stringify({ kind: "Status", apiVersion: "v1", status: "Failure", message, reason, code }),
    {},
  );
const call = { verb: "create", resource: "pods", namespace: "ml" };

describe("kubernetesError", () => {
  it("names the verb and resource RBAC forbids", () => {
    const error = kubernetesError(
      call,
      status(
        403,
        "Forbidden",
        'pods is forbidden: User "alice" cannot create resource "pods" in API group "" in the namespace "ml"',
      ),
    );
    expect(ProvisionError.isInstance(error)).toBe(true);
    expect(error.message).toContain('grant the verb "create" on "pods"');
    expect(error.message).toContain('User "alice" cannot create resource "pods"');
    expect((error as ProvisionError).isRetryable).toBe(false);
  });

  it("makes an exceeded quota a lack of capacity", () => {
    const error = kubernetesError(
      call,
      status(
        403,
        "Forbidden",
        'pods "p" is forbidden: exceeded quota: gpus, requested: requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=2, limited: requests.nvidia.com/gpu=2',
      ),
    );
    expect(NoCapacityError.isInstance(error)).toBe(true);
    expect(error.message).toContain("exceeded quota: gpus");
  });

  it("retries what the API server could not serve", () => {
    const error = kubernetesError(call, status(503, "ServiceUnavailable", "etcdserver: leader changed"));
    expect((error as ProvisionError).isRetryable).toBe(true);
  });
});
