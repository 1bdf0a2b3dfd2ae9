/**
 * The pool's firewall rules (SSH from anywhere, all traffic between the pool's VMs, matched by its
 * network tag): created by `prepare`, found again by the Skyward tags their description holds, and
 * deleted with the pool. A rule someone else made is never touched.
 */
import type { protos } from "@google-cloud/compute";
import { ProvisionError } from "@skyward/core";
import { SKYWARD_TAGS } from "@skyward/provider-utils";
import { type GcpClients, gcpCall, PROVIDER_NAME, waitForOperation } from "./gcp-api.js";
import { isAlreadyExists, isNotFound, translateGcpError } from "./gcp-errors.js";
import { noAutoPages } from "./vms.js";

export type RawFirewall = protos.google.cloud.compute.v1.IFirewall;

/** Every firewall rule of the project. */
export async function firewallRulesOf(clients: GcpClients, signal: AbortSignal): Promise<RawFirewall[]> {
  const found: RawFirewall[] = [];
  await gcpCall("listing firewall rules", signal, async () => {
    for await (const rule of clients.firewalls.listAsync({ project: clients.project }, noAutoPages()))
      found.push(rule);
  });
  return found;
}

/** The Skyward tags a firewall rule's description holds (JSON), or undefined for others' rules. */
export function firewallTags(rule: RawFirewall): Record<string, string> | undefined {
  try {
    const parsed = JSON.parse(rule.description ?? "") as Record<string, unknown>;
    return typeof parsed[SKYWARD_TAGS.cluster] === "string" ? (parsed as Record<string, string>) : undefined;
  } catch {
    return undefined;
  }
}

/** Deletes a rule; resolves false when it was already gone. */
export async function deleteFirewall(
  clients: GcpClients,
  name: string,
  signal: AbortSignal,
): Promise<boolean> {
  try {
    const [operation] = await gcpCall(`deleting firewall rule ${name}`, signal, () =>
      clients.firewalls.delete({ project: clients.project, firewall: name }),
    );
    const outcome = await waitForOperation(clients, operation.latestResponse, "global", signal);
    const failure = outcome.errors.find((entry) => entry.code !== "RESOURCE_NOT_FOUND");
    if (failure)
      throw new ProvisionError({
        provider: PROVIDER_NAME,
        message: `deleting firewall rule ${name}: ${failure.code}: ${failure.message}`,
      });
    return true;
  } catch (error) {
    if (isNotFound(error)) return false;
    throw translateGcpError(error, `deleting firewall rule ${name}`, signal);
  }
}

/** Creates a rule; one that already exists is fine. */
export async function createFirewall(clients: GcpClients, rule: RawFirewall, signal: AbortSignal) {
  try {
    const [operation] = await gcpCall(`creating firewall rule ${rule.name}`, signal, () =>
      clients.firewalls.insert({ project: clients.project, firewallResource: rule }),
    );
    const outcome = await waitForOperation(clients, operation.latestResponse, "global", signal);
    const failure = outcome.errors.find((entry) => entry.code !== "RESOURCE_ALREADY_EXISTS");
    if (failure)
      throw new ProvisionError({
        provider: PROVIDER_NAME,
        message: `creating firewall rule ${rule.name}: ${failure.code}: ${failure.message}`,
      });
  } catch (error) {
    if (!isAlreadyExists(error))
      throw translateGcpError(error, `creating firewall rule ${rule.name}`, signal);
  }
}
