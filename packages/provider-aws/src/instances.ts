/**
 * EC2 instances as the provider reads and ends them: the tags Skyward puts on what it creates, paged
 * `DescribeInstances` by filter, `TerminateInstances` that copes with EC2's eventual consistency, and
 * the ledger of this provider's own launches that makes that possible.
 */
import {
  DescribeInstancesCommand,
  type Instance as Ec2Instance,
  type Filter,
  type Tag,
  TerminateInstancesCommand,
} from "@aws-sdk/client-ec2";
import { ProvisionError } from "@skyward/core";
import type { InstanceStatus } from "@skyward/core/contract";
import { SKYWARD_TAGS } from "@skyward/provider-utils";
import {
  type AwsClients,
  awsCall,
  awsErrorCode,
  PROVIDER_NAME,
  sleep,
  translateAwsError,
} from "./aws-api.js";

/** The tag keys Skyward puts on what it creates at AWS: Skyward's own (`SKYWARD_TAGS` of `@skyward/provider-utils`) and `Name`. */
export const AWS_TAGS = Object.freeze({ ...SKYWARD_TAGS, name: "Name" } as const);

/** Instance states that still hold resources (everything but `terminated`). */
export const LIVE_STATES = ["pending", "running", "stopping", "stopped", "shutting-down"];

/**
 * How long after `RunInstances` an instance id AWS answers `InvalidInstanceID.NotFound` for is
 * taken for one not visible yet, rather than gone: EC2's API is eventually consistent
 * (https://docs.aws.amazon.com/ec2/latest/devguide/eventual-consistency.html).
 */
const EVENTUAL_CONSISTENCY_MS = 5 * 60_000;

/** The longest terminate keeps retrying an id AWS does not know yet (bounded backoff). */
export const NOT_FOUND_RETRY_MS = 90_000;

export function toAwsTags(tags: Readonly<Record<string, string>>): Tag[] {
  return Object.entries(tags).map(([Key, Value]) => ({ Key, Value }));
}

export function fromAwsTags(tags: readonly Tag[] | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const tag of tags ?? []) if (tag.Key !== undefined) out[tag.Key] = tag.Value ?? "";
  return out;
}

export function statusOf(raw: Ec2Instance): InstanceStatus {
  switch (raw.State?.Name) {
    case "running":
      return "running";
    case "pending":
      return "pending";
    case "terminated":
      return "terminated";
    default:
      return "stopping";
  }
}

/** The filters of a cluster's instances that still hold resources. */
export function liveFilterOf(clusterId: string): Filter[] {
  return [
    { Name: `tag:${AWS_TAGS.cluster}`, Values: [clusterId] },
    { Name: "instance-state-name", Values: LIVE_STATES },
  ];
}

/** The instances this provider launched, with when: AWS may not know them yet (eventual consistency). */
export class LaunchLedger {
  readonly #launched = new Map<string, { at: number; clusterId: string }>();

  /** Notes `ids` as launched now for `clusterId`. */
  record(ids: readonly string[], clusterId: string): void {
    const at = Date.now();
    for (const id of ids) this.#launched.set(id, { at, clusterId });
  }

  /** True when this provider launched `id` within the eventual-consistency window. */
  isRecent(id: string): boolean {
    const launched = this.#launched.get(id);
    return launched !== undefined && Date.now() - launched.at < EVENTUAL_CONSISTENCY_MS;
  }

  /** The instances launched for `clusterId` within the window (a tag filter may not show them yet). */
  recentOf(clusterId: string): string[] {
    return [...this.#launched.entries()]
      .filter(([id, launched]) => launched.clusterId === clusterId && this.isRecent(id))
      .map(([id]) => id);
  }
}

/** Instances matching `filters`, every page. Filters never fail on unknown ids, unlike `InstanceIds`. */
export async function describeInstances(
  clients: AwsClients,
  filters: Filter[],
  signal: AbortSignal,
): Promise<Ec2Instance[]> {
  const found: Ec2Instance[] = [];
  let nextToken: string | undefined;
  do {
    const page = await awsCall("DescribeInstances", signal, () =>
      clients.ec2.send(
        new DescribeInstancesCommand({ Filters: filters, MaxResults: 1000, NextToken: nextToken }),
        { abortSignal: signal },
      ),
    );
    for (const reservation of page.Reservations ?? []) found.push(...(reservation.Instances ?? []));
    nextToken = page.NextToken || undefined;
  } while (nextToken);
  return found;
}

/**
 * Terminates `ids`. An unknown id is skipped as gone — unless `ledger` says this provider launched it
 * moments ago: AWS may answer `InvalidInstanceID.NotFound` for an instance that runs but is not
 * visible yet, so it is asked again with bounded backoff ({@link NOT_FOUND_RETRY_MS}).
 */
export async function terminateIds(
  clients: AwsClients,
  ids: readonly string[],
  ledger: LaunchLedger,
  signal: AbortSignal,
): Promise<void> {
  const valid = [...new Set(ids)].filter((id) => /^i-[0-9a-f]{8,17}$/.test(id));
  const notFound = (code: string | undefined) =>
    code === "InvalidInstanceID.NotFound" || code === "InvalidInstanceID.Malformed";
  const terminateOne = async (id: string) => {
    const deadline = Date.now() + NOT_FOUND_RETRY_MS;
    let interval = 1000;
    for (;;) {
      try {
        await clients.ec2.send(new TerminateInstancesCommand({ InstanceIds: [id] }), {
          abortSignal: signal,
        });
        return;
      } catch (single) {
        signal.throwIfAborted();
        const code = awsErrorCode(single);
        if (!notFound(code)) throw translateAwsError(single, "TerminateInstances", signal);
        if (code === "InvalidInstanceID.Malformed" || !ledger.isRecent(id)) return;
        if (Date.now() >= deadline)
          throw new ProvisionError({
            provider: PROVIDER_NAME,
            message: `instance ${id}, launched moments ago, is still unknown to TerminateInstances after ${NOT_FOUND_RETRY_MS / 1000} s; check it in the EC2 console (aws ec2 describe-instances --instance-ids ${id})`,
            isRetryable: true,
          });
        await sleep(Math.min(interval, Math.max(0, deadline - Date.now())), signal);
        interval = Math.min(interval * 2, 10_000);
      }
    }
  };
  for (let start = 0; start < valid.length; start += 500) {
    const batch = valid.slice(start, start + 500);
    try {
      await clients.ec2.send(new TerminateInstancesCommand({ InstanceIds: batch }), {
        abortSignal: signal,
      });
    } catch (error) {
      signal.throwIfAborted();
      if (!notFound(awsErrorCode(error))) throw translateAwsError(error, "TerminateInstances", signal);
      // One unknown id fails the whole call: terminate the rest one by one.
      for (const id of batch) await terminateOne(id);
    }
  }
}
