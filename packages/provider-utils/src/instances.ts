/** What providers whose nodes are reached over SSH share about the instances they report. */
import type { InstanceSsh, InstanceStatus } from "@skyward/core/contract";

/**
 * The status to report for an instance reached over SSH: `running` only once it has its SSH
 * coordinates (the pool starts the worker as soon as it sees `running`), else `pending`; other
 * statuses as they are.
 */
export function sshReachableStatus(status: InstanceStatus, ssh: InstanceSsh | null): InstanceStatus {
  return status === "running" && ssh === null ? "pending" : status;
}
