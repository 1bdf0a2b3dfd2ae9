/**
 * The SSH key pair a pool's instances accept: one made for the pool (ed25519, its private key in a
 * 0600 file under ~/.skyward/keys, removed with the pool), or the user's `keyName` with its
 * `identityFile`.
 */
import { readFile } from "node:fs/promises";
import { CreateKeyPairCommand, DeleteKeyPairCommand } from "@aws-sdk/client-ec2";
import { ProvisionError } from "@skyward/core";
import { privateKeyPath, writePrivateKey } from "@skyward/provider-utils";
import { type AwsClients, awsCall, awsErrorCode, PROVIDER_NAME, translateAwsError } from "./aws-api.js";
import { toAwsTags } from "./instances.js";

/** A key pair the instances accept, with its private key. */
export interface PoolKey {
  readonly keyName: string;
  /** The private key's file on this machine. */
  readonly keyFile: string;
  readonly privateKey: string;
}

/** The user's key pair (`keyName`) and the private key read from `identityFile`. */
export async function givenKey(keyName: string, identityFile: string): Promise<PoolKey> {
  const privateKey = await readFile(identityFile, "utf8").catch((error: unknown) => {
    throw new ProvisionError({
      provider: PROVIDER_NAME,
      message: `cannot read identityFile ${identityFile}: ${(error as Error).message}`,
      cause: error,
    });
  });
  return { keyName, keyFile: identityFile, privateKey };
}

/**
 * Creates the key pair `keyName`, tagged, and writes its private key to its file. `onCreated` hears
 * of it as soon as AWS has it, so that a failure afterwards still removes it.
 */
export async function createKeyPair(
  clients: AwsClients,
  keyName: string,
  tags: Readonly<Record<string, string>>,
  onCreated: (key: { keyName: string; keyFile: string }) => void,
  signal: AbortSignal,
): Promise<PoolKey> {
  const created = await awsCall("CreateKeyPair", signal, () =>
    clients.ec2.send(
      new CreateKeyPairCommand({
        KeyName: keyName,
        KeyType: "ed25519",
        TagSpecifications: [{ ResourceType: "key-pair", Tags: toAwsTags(tags) }],
      }),
      { abortSignal: signal },
    ),
  );
  const keyFile = privateKeyPath(keyName);
  onCreated({ keyName, keyFile });
  const privateKey = created.KeyMaterial;
  if (!privateKey)
    throw new ProvisionError({ provider: PROVIDER_NAME, message: "CreateKeyPair returned no private key" });
  await writePrivateKey(keyName, privateKey);
  return { keyName, keyFile, privateKey };
}

/** Deletes a key pair; one already gone is fine. */
export async function deleteKeyPair(
  clients: AwsClients,
  keyName: string,
  signal: AbortSignal,
): Promise<void> {
  try {
    await clients.ec2.send(new DeleteKeyPairCommand({ KeyName: keyName }), { abortSignal: signal });
  } catch (error) {
    signal.throwIfAborted();
    if (awsErrorCode(error) !== "InvalidKeyPair.NotFound")
      throw translateAwsError(error, "DeleteKeyPair", signal);
  }
}
