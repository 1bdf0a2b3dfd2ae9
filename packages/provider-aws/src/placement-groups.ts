/**
 * The cluster placement group of a multi-node accelerator pool (one zone, close together, for NCCL):
 * made for the pool, tagged with it, removed with it.
 */
import {
  CreatePlacementGroupCommand,
  DeletePlacementGroupCommand,
  DescribePlacementGroupsCommand,
  type PlacementGroup,
} from "@aws-sdk/client-ec2";
import { type AwsClients, awsCall, awsErrorCode, translateAwsError } from "./aws-api.js";
import { AWS_TAGS, toAwsTags } from "./instances.js";

/** Creates the cluster placement group `groupName`, tagged. */
export async function createPlacementGroup(
  clients: AwsClients,
  groupName: string,
  tags: Readonly<Record<string, string>>,
  signal: AbortSignal,
): Promise<void> {
  await awsCall("CreatePlacementGroup", signal, () =>
    clients.ec2.send(
      new CreatePlacementGroupCommand({
        GroupName: groupName,
        Strategy: "cluster",
        TagSpecifications: [{ ResourceType: "placement-group", Tags: toAwsTags(tags) }],
      }),
      { abortSignal: signal },
    ),
  );
}

/** Deletes a placement group; one already gone is fine. */
export async function deletePlacementGroup(
  clients: AwsClients,
  groupName: string,
  signal: AbortSignal,
): Promise<void> {
  try {
    await clients.ec2.send(new DeletePlacementGroupCommand({ GroupName: groupName }), {
      abortSignal: signal,
    });
  } catch (error) {
    signal.throwIfAborted();
    const code = awsErrorCode(error);
    if (code !== "InvalidPlacementGroup.Unknown" && code !== "InvalidPlacementGroup.NotFound")
      throw translateAwsError(error, `DeletePlacementGroup ${groupName}`, signal);
  }
}

/** The placement groups tagged with a cluster tag (all of them when `clusterId` is undefined). */
export async function taggedPlacementGroups(
  clients: AwsClients,
  clusterId: string | undefined,
  signal: AbortSignal,
): Promise<PlacementGroup[]> {
  const found = await awsCall("DescribePlacementGroups", signal, () =>
    clients.ec2.send(
      new DescribePlacementGroupsCommand({
        Filters:
          clusterId !== undefined
            ? [{ Name: `tag:${AWS_TAGS.cluster}`, Values: [clusterId] }]
            : [{ Name: "tag-key", Values: [AWS_TAGS.cluster] }],
      }),
      { abortSignal: signal },
    ),
  );
  return found.PlacementGroups ?? [];
}
