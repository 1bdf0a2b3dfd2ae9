/**
 * Checks made in `prepare`, before anything is created, for two things a real project can have that
 * would make its VMs boot and bill while Skyward can never use them:
 *
 * - the organisation policy `constraints/compute.requireOsLogin` enforced: OS Login is then on for
 *   every VM whatever its own `enable-oslogin` metadata says, and the VM ignores the pool's key in
 *   `ssh-keys` (https://cloud.google.com/compute/docs/oslogin/manage-oslogin-in-an-org). Read with
 *   Resource Manager's `projects.getEffectiveOrgPolicy`
 *   (https://cloud.google.com/resource-manager/reference/rest/v1/projects/getEffectiveOrgPolicy);
 * - the service account the VMs run as: it must exist, and the caller must be allowed
 *   `iam.serviceAccounts.actAs` on it, or every insert fails
 *   (https://cloud.google.com/compute/docs/access/service-accounts#associating_a_service_account_to_an_instance).
 *   Read with IAM's `projects.serviceAccounts.testIamPermissions`
 *   (https://cloud.google.com/iam/docs/reference/rest/v1/projects.serviceAccounts/testIamPermissions).
 *
 * A check whose API cannot be read (disabled, or the caller may not read the policy) is skipped: the
 * insert's own error then says what is wrong.
 */
import type { GcpClients } from "./gcp-api.js";
import { gcpCall } from "./gcp-api.js";
import { gcpError } from "./gcp-errors.js";
import type { ResolvedGcpSettings } from "./settings.js";

const RESOURCE_MANAGER = "https://cloudresourcemanager.googleapis.com";
const IAM = "https://iam.googleapis.com";
/** The organisation policy constraint that forces OS Login on every VM of a project. */
export const REQUIRE_OS_LOGIN = "constraints/compute.requireOsLogin";
const ACT_AS = "iam.serviceAccounts.actAs";

const base = (value: string | undefined, fallback: string) => (value ?? fallback).replace(/\/+$/, "");

/** Refuses, naming what to fix, a project whose organisation forces OS Login on its VMs. */
async function checkOsLoginPolicy(
  clients: GcpClients,
  settings: ResolvedGcpSettings,
  signal: AbortSignal,
): Promise<void> {
  const url = `${base(settings.resourceManagerEndpoint, RESOURCE_MANAGER)}/v1/projects/${encodeURIComponent(clients.project)}:getEffectiveOrgPolicy`;
  const answer = await clients.post(url, { constraint: REQUIRE_OS_LOGIN }, signal);
  if (answer.status !== 200) return;
  const policy = answer.body as { booleanPolicy?: { enforced?: unknown } } | null;
  if (policy?.booleanPolicy?.enforced !== true) return;
  throw gcpError(
    "account",
    `the organisation policy ${REQUIRE_OS_LOGIN} is enforced on project ${clients.project}: its VMs ignore ` +
      "the SSH key Skyward puts in their metadata (enable-oslogin=FALSE is overridden), so a VM would boot and " +
      "bill unreachable; nothing was created. Ask an organisation policy administrator to exempt the project " +
      `(gcloud resource-manager org-policies disable-enforce ${REQUIRE_OS_LOGIN} --project=${clients.project}), ` +
      "or use a project outside that policy",
  );
}

/** The email of the service account VMs run as: the setting, or the project's Compute Engine default. */
async function serviceAccountOf(
  clients: GcpClients,
  settings: ResolvedGcpSettings,
  signal: AbortSignal,
): Promise<string | undefined> {
  if (settings.serviceAccount !== "default") return settings.serviceAccount;
  const [project] = await gcpCall("reading the project", signal, () =>
    clients.projects.get({ project: clients.project }),
  ).catch(() => [undefined]);
  return project?.defaultServiceAccount ?? undefined;
}

/** Refuses, naming what to fix, a service account that does not exist or that the caller may not act as. */
async function checkServiceAccount(
  clients: GcpClients,
  settings: ResolvedGcpSettings,
  signal: AbortSignal,
): Promise<void> {
  const email = await serviceAccountOf(clients, settings, signal);
  if (email === undefined) return;
  const url = `${base(settings.iamEndpoint, IAM)}/v1/projects/-/serviceAccounts/${encodeURIComponent(email)}:testIamPermissions`;
  const answer = await clients.post(url, { permissions: [ACT_AS] }, signal);
  const setting =
    settings.serviceAccount === "default" ? "the project's default" : "the serviceAccount setting";
  if (answer.status === 404)
    throw gcpError(
      "bad-request",
      `the service account ${email} the VMs would run as (${setting}) does not exist in project ${clients.project}; nothing was created. Create it, or set serviceAccount to one that exists`,
      { statusCode: 404 },
    );
  if (answer.status !== 200) return;
  const granted = (answer.body as { permissions?: unknown } | null)?.permissions;
  if (Array.isArray(granted) && granted.includes(ACT_AS)) return;
  throw gcpError(
    "auth",
    `these credentials may not run VMs as the service account ${email} (${setting}): they lack ${ACT_AS} on it; nothing was created. ` +
      `Grant them roles/iam.serviceAccountUser on ${email}, or set serviceAccount to one they may use`,
    { statusCode: 403 },
  );
}

/** Both checks; the first that refuses throws. */
export async function checkProjectAccess(
  clients: GcpClients,
  settings: ResolvedGcpSettings,
  signal: AbortSignal,
): Promise<void> {
  await Promise.all([
    checkOsLoginPolicy(clients, settings, signal),
    checkServiceAccount(clients, settings, signal),
  ]);
}
