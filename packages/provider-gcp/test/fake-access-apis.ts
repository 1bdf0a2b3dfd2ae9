/**
 * The two Google APIs besides Compute Engine that the GCP provider's `prepare` asks, as the fake
 * Compute Engine serves them (on its own address, by path): Resource Manager's effective organisation
 * policy and IAM's permission test on a service account. Each answer follows its reference page.
 */
import { type FakeRestAnswer, jsonAnswer } from "@skyward/testing";
import { PROJECT } from "./fixtures.js";

const JSON_UTF8 = "application/json; charset=UTF-8";
const send = (body: unknown) => jsonAnswer(200, body, JSON_UTF8);

/** What of the fake's state these APIs read. */
export interface AccessApiState {
  readonly requireOsLoginPolicy: boolean;
  readonly missingServiceAccounts: ReadonlySet<string>;
  readonly actAsDenied: ReadonlySet<string>;
}

/** The answer to a Resource Manager or IAM request, or undefined for any other request. */
export function accessApiAnswer(
  fake: AccessApiState,
  method: string,
  path: string,
  body: Record<string, unknown> | undefined,
): FakeRestAnswer | undefined {
  // Resource Manager's effective organisation policy of a boolean constraint
  // (https://cloud.google.com/resource-manager/reference/rest/v1/projects/getEffectiveOrgPolicy,
  // the Policy resource: https://cloud.google.com/resource-manager/reference/rest/v1/Policy).
  if (method === "POST" && path === `/v1/projects/${PROJECT}:getEffectiveOrgPolicy`) {
    const constraint = String(body?.constraint ?? "");
    const enforced = constraint === "constraints/compute.requireOsLogin" && fake.requireOsLoginPolicy;
    return send({
      constraint,
      ...(enforced
        ? { version: 1, booleanPolicy: { enforced: true }, etag: "BwYU3lr5iXc=" }
        : { booleanPolicy: {} }),
    });
  }
  // IAM: the permissions the caller has on a service account, a subset of those asked; `{}` for none
  // (https://cloud.google.com/iam/docs/reference/rest/v1/projects.serviceAccounts/testIamPermissions).
  const testPermissions = /^\/v1\/projects\/[^/]+\/serviceAccounts\/([^/:]+):testIamPermissions$/.exec(path);
  if (method === "POST" && testPermissions?.[1]) {
    const email = decodeURIComponent(testPermissions[1]);
    if (fake.missingServiceAccounts.has(email))
      return jsonAnswer(
        404,
        {
          error: {
            code: 404,
            message: `Service account projects/-/serviceAccounts/${email} does not exist.`,
            status: "NOT_FOUND",
          },
        },
        JSON_UTF8,
      );
    const asked = Array.isArray(body?.permissions) ? (body.permissions as string[]) : [];
    const granted = fake.actAsDenied.has(email)
      ? asked.filter((permission) => permission !== "iam.serviceAccounts.actAs")
      : asked;
    return send(granted.length > 0 ? { permissions: granted } : {});
  }
  return undefined;
}
