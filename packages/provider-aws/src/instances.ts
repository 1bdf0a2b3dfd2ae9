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

/**
 * How long after a `RunInstances` whose answer never came (the call stopped, the connection lost) the
 * instances it may have launched are looked for by its client token: EC2 shows a new instance to
 * `DescribeInstances` only after a while (eventual consistency), as the machine-provider base waits for
 * a create whose answer was lost (`lostCreateWaitMs`).
 */
export const LOST_LAUNCH_WAIT_MS = 60_000;

/** The instances this provider launched, with when: AWS may not know them yet (eventual consistency). */
export class LaunchLedger {
  readonly #launched = new Map<string, { at: number; clusterId: string }>();
  /** `RunInstances` calls sent and not answered, by client token: EC2 may have launched them. */
  readonly #unanswered = new Map<string, { at: number; clusterId: string }>();

  /** Notes a `RunInstances` of `clusterId` sent with `clientToken`, unanswered until {@link answered}. */
  sent(clientToken: string, clusterId: string): void {
    this.#unanswered.set(clientToken, { at: Date.now(), clusterId });
  }

  /** The launch of `clientToken` was answered (its instances, or a refusal): nothing of it is unknown. */
  answered(clientToken: string): void {
    this.#unanswered.delete(clientToken);
  }

  /** The client tokens of `clusterId`'s launches never answered, and when the last was sent. */
  unansweredOf(clusterId: string): { tokens: string[]; lastSentAt: number } {
    const entries = [...this.#unanswered.entries()].filter(([, sent]) => sent.clusterId === clusterId);
    return {
      tokens: entries.map(([token]) => token),
      lastSentAt: Math.max(0, ...entries.map(([, sent]) => sent.at)),
    };
  }

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

/**
 * The instances of `clusterId`'s launches whose answers never came, found by their client tokens: looked
 * for until each token shows an instance or {@link LOST_LAUNCH_WAIT_MS} after the last was sent (a
 * launch EC2 never carried out shows nothing). Found ones are recorded as launched, so that
 * terminating them copes with EC2 not knowing them yet.
 */
export async function lostLaunches(
  clients: AwsClients,
  clusterId: string,
  ledger: LaunchLedger,
  signal: AbortSignal,
): Promise<string[]> {
  const { tokens, lastSentAt } = ledger.unansweredOf(clusterId);
  if (tokens.length === 0) return [];
  const deadline = lastSentAt + LOST_LAUNCH_WAIT_MS;
  const found = new Map<string, string>();
  for (let interval = 1000; ; interval = Math.min(interval * 2, 10_000)) {
    const missing = tokens.filter((token) => ![...found.values()].includes(token));
    for (const raw of await describeInstances(clients, [{ Name: "client-token", Values: missing }], signal))
      if (raw.InstanceId) found.set(raw.InstanceId, raw.ClientToken ?? "");
    const shown = new Set(found.values());
    if (tokens.every((token) => shown.has(token)) || Date.now() >= deadline) break;
    await sleep(Math.min(interval, Math.max(0, deadline - Date.now())), signal);
  }
  for (const token of new Set(found.values())) ledger.answered(token);
  ledger.record([...found.keys()], clusterId);
  return [...found.keys()];
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
