/**
 * The Google APIs besides Compute Engine that the GCP provider asks, as the fake Compute Engine serves
 * them (on its own address, by path): the Cloud Billing Catalog (prices), Resource Manager's effective
 * organisation policy and IAM's permission test on a service account. Each answer follows its
 * reference page.
 */
import { type FakeRestAnswer, type FakeRestRequest, jsonAnswer } from "@skyward/testing";
import { PROJECT, SKU_PAGES } from "./fixtures.js";

const JSON_UTF8 = "application/json; charset=UTF-8";
const send = (body: unknown) => jsonAnswer(200, body, JSON_UTF8);

/** What of the fake's state these APIs read. */
export interface OtherApiState {
  readonly billingNeedsQuotaProject: boolean;
  readonly billingQuotaProjects: (string | undefined)[];
  readonly requireOsLoginPolicy: boolean;
  readonly missingServiceAccounts: ReadonlySet<string>;
  readonly actAsDenied: ReadonlySet<string>;
}

/** The answer to a Cloud Billing, Resource Manager or IAM request, or undefined for any other request. */
export function otherApiAnswer(fake: OtherApiState, request: FakeRestRequest): FakeRestAnswer | undefined {
  const { path, method, query } = request;
  const body = request.body as Record<string, unknown> | undefined;
  // Cloud Billing Catalog: https://cloud.google.com/billing/docs/reference/rest/v1/services.skus/list
  if (method === "GET" && path === "/v1/services/6F81-5844-456A/skus") {
    const quotaProject = request.headers["x-goog-user-project"];
    fake.billingQuotaProjects.push(typeof quotaProject === "string" ? quotaProject : undefined);
    if (fake.billingNeedsQuotaProject && quotaProject === undefined)
      return jsonAnswer(
        403,
        {
          error: {
            code: 403,
            message:
              "Your application is authenticating by using local Application Default Credentials. The cloudbilling.googleapis.com API requires a quota project, which is not set by default. To learn how to set your quota project, see https://cloud.google.com/docs/authentication/adc-troubleshooting/user-creds .",
            status: "PERMISSION_DENIED",
            details: [
              {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                reason: "SERVICE_DISABLED",
                domain: "googleapis.com",
                metadata: { service: "cloudbilling.googleapis.com", consumer: "projects/764086051850" },
              },
            ],
          },
        },
        JSON_UTF8,
      );
    const page = Number(query.get("pageToken") || "0");
    return send({
      skus: SKU_PAGES[page] ?? [],
      nextPageToken: page + 1 < SKU_PAGES.length ? String(page + 1) : "",
    });
  }

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
