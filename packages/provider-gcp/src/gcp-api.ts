/**
 * Compute Engine through Google's official client (`@google-cloud/compute`, REST transport): the
 * clients, credentials, the project, calls bound to a signal, and waiting on operations.
 */
import { readFileSync } from "node:fs";
import {
  AcceleratorTypesClient,
  FirewallsClient,
  GlobalOperationsClient,
  InstancesClient,
  MachineTypesClient,
  ProjectsClient,
  RegionsClient,
  ZoneOperationsClient,
  ZonesClient,
  // The v1 clients only: the package's index also loads the v1beta and v1small APIs' descriptions
  // (tens of MB of JSON), which took 3-4 s more at every start.
} from "@google-cloud/compute/build/src/v1/index.js";
import { ConfigurationError, ProvisionError } from "@skyward/core";
import { abortableSleep, machineErrorKind } from "@skyward/provider-utils";
import { GoogleAuth, JWT, OAuth2Client } from "google-auth-library";
import { isAlreadyExists, isNotFound, translateGcpError } from "./gcp-errors.js";
import type { ResolvedGcpSettings } from "./settings.js";

/** The provider's name. */
export const PROVIDER_NAME = "gcp";

const COMPUTE_ENDPOINT = "https://compute.googleapis.com";
const BILLING_ENDPOINT = "https://cloudbilling.googleapis.com";
/** Attempts at a Cloud Billing call on a transient error (network, HTTP 429/5xx). */
const BILLING_ATTEMPTS = 3;
const SCOPES = ["https://www.googleapis.com/auth/cloud-platform"];

/** Something that signs requests: `getRequestHeaders()` gives the `Authorization` header. */
export interface GcpAuth {
  getRequestHeaders(): Promise<Headers | Record<string, string>>;
}

/** The Compute Engine clients the provider uses, all on one endpoint and one credential. */
export interface GcpClients {
  readonly project: string;
  readonly instances: InstancesClient;
  readonly zoneOperations: ZoneOperationsClient;
  readonly globalOperations: GlobalOperationsClient;
  readonly firewalls: FirewallsClient;
  readonly machineTypes: MachineTypesClient;
  readonly acceleratorTypes: AcceleratorTypesClient;
  readonly zones: ZonesClient;
  readonly regions: RegionsClient;
  readonly projects: ProjectsClient;
  /** A POST of JSON to another Google API (IAM, Resource Manager) with the same credential: its status and JSON answer. */
  readonly post: (
    url: string,
    body: unknown,
    signal: AbortSignal,
  ) => Promise<{ status: number; body: unknown }>;
  /** GET of a Cloud Billing API path (`/v1/services/…/skus`), with the same credential. */
  readonly billing: (path: string, query: Record<string, string>, signal: AbortSignal) => Promise<unknown>;
}

/**
 * The project: the setting, the environment, or the credentials file's `project_id` (only that field
 * is kept); undefined when none names one.
 */
export function projectOf(settings: ResolvedGcpSettings): string | undefined {
  if (settings.project) return settings.project;
  for (const name of ["GOOGLE_CLOUD_PROJECT", "GCLOUD_PROJECT", "CLOUDSDK_CORE_PROJECT"]) {
    const value = process.env[name]?.trim();
    if (value) return value;
  }
  const file = settings.credentialsFile ?? process.env.GOOGLE_APPLICATION_CREDENTIALS;
  if (file) {
    try {
      const parsed = JSON.parse(readFileSync(file, "utf8")) as { project_id?: unknown };
      if (typeof parsed.project_id === "string" && parsed.project_id) return parsed.project_id;
    } catch {
      // Reported as a missing project; the credential problem shows on the first call.
    }
  }
  return undefined;
}

/** The project, as {@link projectOf} finds it; a `ConfigurationError` when none names one. */
function resolveProject(settings: ResolvedGcpSettings): string {
  const project = projectOf(settings);
  if (project !== undefined) return project;
  throw new ConfigurationError({
    issues: [
      {
        path: "GCP.project",
        message:
          "expected a project: set `project`, or GOOGLE_CLOUD_PROJECT in the environment, or use a service-account key file that names one",
      },
    ],
  });
}

function createAuth(settings: ResolvedGcpSettings): OAuth2Client | JWT | GoogleAuth {
  const token = settings.accessToken ?? process.env.GOOGLE_OAUTH_ACCESS_TOKEN?.trim();
  if (token) {
    const client = new OAuth2Client();
    client.setCredentials({ access_token: token });
    return client;
  }
  if (settings.credentialsFile !== undefined) return serviceAccountClient(settings.credentialsFile);
  // Application Default Credentials; a service account among them signs its own tokens too (below).
  const auth = new GoogleAuth({ scopes: SCOPES });
  auth.useJWTAccessWithScope = true;
  return auth;
}

/**
 * The service account of a key file. It signs its own tokens (a self-signed JWT with the scope,
 * https://google.aip.dev/auth/4111), as Google's clients do, so no token endpoint is called.
 */
function serviceAccountClient(file: string): JWT {
  const fail = (message: string): never => {
    throw new ConfigurationError({ issues: [{ path: "GCP.credentialsFile", message }] });
  };
  let parsed: Record<string, unknown> = {};
  try {
    parsed = JSON.parse(readFileSync(file, "utf8")) as Record<string, unknown>;
  } catch (error) {
    fail(
      `expected a readable service-account key file (JSON): ${(error as NodeJS.ErrnoException).code ?? "not JSON"}`,
    );
  }
  const { type, client_email: email, private_key: key, private_key_id: keyId } = parsed;
  if (type !== "service_account" || typeof email !== "string" || typeof key !== "string")
    fail(
      'expected a service-account key file (type "service_account" with client_email and private_key); for other credentials use Application Default Credentials',
    );
  const client = new JWT({
    email: email as string,
    key: key as string,
    ...(typeof keyId === "string" ? { keyId } : {}),
    scopes: SCOPES,
  });
  client.useJWTAccessWithScope = true;
  return client;
}

/**
 * The clients for the settings, made on first use (so that `GCP()` itself reads no credential) and
 * kept for the provider's life.
 */
export function createClientFactory(settings: ResolvedGcpSettings): () => GcpClients {
  let clients: GcpClients | undefined;
  return () => {
    if (clients) return clients;
    const project = resolveProject(settings);
    const auth = createAuth(settings);
    const url = new URL(settings.apiEndpoint ?? COMPUTE_ENDPOINT);
    const https = url.protocol === "https:";
    const options = {
      apiEndpoint: url.hostname,
      port: url.port ? Number(url.port) : https ? 443 : 80,
      protocol: https ? "https" : "http",
      fallback: true,
      ...(auth instanceof GoogleAuth ? { auth } : { authClient: auth }),
    };
    const billingBase = (settings.billingEndpoint ?? BILLING_ENDPOINT).replace(/\/+$/, "");
    /** Set once the Catalog asked for a quota project: every later call sends it. */
    let sendQuotaProject = false;
    const billing = async (path: string, query: Record<string, string>, signal: AbortSignal) => {
      const headers = new Headers(await requestHeaders(auth));
      if (sendQuotaProject && !headers.has("x-goog-user-project"))
        headers.set("x-goog-user-project", project);
      const target = `${billingBase}${path}?${new URLSearchParams(query).toString()}`;
      let quotaProjectSet = headers.has("x-goog-user-project");
      for (let attempt = 1; ; attempt++) {
        let response: Response;
        try {
          response = await fetch(target, { headers, signal });
        } catch (error) {
          signal.throwIfAborted();
          if (attempt < BILLING_ATTEMPTS) {
            await sleep(250 * 2 ** attempt, signal);
            continue;
          }
          throw new ProvisionError({
            provider: PROVIDER_NAME,
            message: `Cloud Billing API: ${(error as Error).message}`,
            isRetryable: true,
            cause: error,
          });
        }
        const body = await response.text();
        if (response.ok) return JSON.parse(body) as unknown;
        // User credentials (a gcloud token, user ADC) may need a quota project for this API: "The
        // cloudbilling.googleapis.com API requires a quota project, which is not set by default"
        // (https://cloud.google.com/docs/authentication/adc-troubleshooting/user-creds). Asked again
        // once, charging the provider's project (https://cloud.google.com/apis/docs/system-parameters).
        if (response.status === 403 && !quotaProjectSet && /quota project|X-Goog-User-Project/i.test(body)) {
          headers.set("x-goog-user-project", project);
          quotaProjectSet = true;
          sendQuotaProject = true;
          continue;
        }
        if ((response.status === 429 || response.status >= 500) && attempt < BILLING_ATTEMPTS) {
          await sleep(250 * 2 ** attempt, signal);
          continue;
        }
        throw new ProvisionError({
          provider: PROVIDER_NAME,
          message: `Cloud Billing API answered HTTP ${response.status}: ${googleErrorMessage(body)}`,
          isRetryable: response.status === 429 || response.status >= 500,
        });
      }
    };
    const post = async (target: string, body: unknown, signal: AbortSignal) => {
      const headers = new Headers(await requestHeaders(auth));
      headers.set("content-type", "application/json");
      let response: Response;
      try {
        response = await fetch(target, { method: "POST", headers, body: JSON.stringify(body), signal });
      } catch (error) {
        signal.throwIfAborted();
        return { status: 0, body: { error: { message: (error as Error).message } } };
      }
      const text = await response.text();
      let parsed: unknown = text;
      try {
        parsed = JSON.parse(text);
      } catch {
        // not JSON: kept as text
      }
      return { status: response.status, body: parsed };
    };
    clients = Object.freeze({
      project,
      post,
      instances: new InstancesClient(options),
      zoneOperations: new ZoneOperationsClient(options),
      globalOperations: new GlobalOperationsClient(options),
      firewalls: new FirewallsClient(options),
      machineTypes: new MachineTypesClient(options),
      acceleratorTypes: new AcceleratorTypesClient(options),
      zones: new ZonesClient(options),
      regions: new RegionsClient(options),
      projects: new ProjectsClient(options),
      billing,
    });
    return clients;
  };
}

async function requestHeaders(auth: OAuth2Client | JWT | GoogleAuth): Promise<Headers> {
  const headers = await auth.getRequestHeaders();
  return headers instanceof Headers ? headers : new Headers(headers as Record<string, string>);
}

/** The message of a Google API error body (`{"error": {"message": …}}`), or the body's start. */
function googleErrorMessage(body: string): string {
  try {
    const parsed = JSON.parse(body) as { error?: { message?: unknown } };
    if (typeof parsed.error?.message === "string") return parsed.error.message;
  } catch {
    // not JSON
  }
  return body.slice(0, 200);
}

/** Sleeps, or rejects with the signal's reason once it aborts (provider-utils' own). */
export const sleep = abortableSleep;

/** Tries of a call Compute Engine refused for the project's API rate, with a doubling wait from 1 s. */
const RATE_LIMIT_ATTEMPTS = 5;

/**
 * Runs one client call with the caller's signal: the call's own deadline comes from the signal,
 * and an abort rejects at once (the client has no signal of its own). A refusal for the API rate
 * (HTTP 429 or 403 `rateLimitExceeded`, https://cloud.google.com/compute/api-quota) is asked again
 * after a doubling wait, as Google advises (its answer carries no Retry-After); every call is safe to
 * repeat (an insert carries its `requestId`).
 */
export async function gcpCall<T>(what: string, signal: AbortSignal, call: () => Promise<T>): Promise<T> {
  signal.throwIfAborted();
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
  });
  try {
    for (let attempt = 1; ; attempt += 1) {
      try {
        return await Promise.race([call(), aborted]);
      } catch (error) {
        if (isNotFound(error) || isAlreadyExists(error)) throw error;
        const failure = translateGcpError(error, what, signal);
        if (attempt >= RATE_LIMIT_ATTEMPTS || machineErrorKind(failure) !== "rate-limit") throw failure;
        await Promise.race([sleep(1000 * 2 ** (attempt - 1), signal), aborted]);
      }
    }
  } finally {
    if (onAbort) signal.removeEventListener("abort", onAbort);
  }
}

/** What a finished operation reported: nothing (success), or its errors' codes and messages. */
export interface OperationOutcome {
  readonly errors: readonly { readonly code: string; readonly message: string }[];
}

interface OperationLike {
  name?: string | null;
  status?: string | number | null;
  error?: { errors?: { code?: string | null; message?: string | null }[] | null } | null;
}

function outcomeOf(operation: OperationLike): OperationOutcome {
  return {
    errors: (operation.error?.errors ?? []).map((entry) => ({
      code: entry.code ?? "UNKNOWN",
      message: entry.message ?? "",
    })),
  };
}

/**
 * Waits for a zonal or global operation to be `DONE` (`zoneOperations.wait` / `globalOperations.wait`,
 * each returning after at most two minutes or when done) and returns its outcome.
 */
export async function waitForOperation(
  clients: GcpClients,
  started: unknown,
  where: { zone: string } | "global",
  signal: AbortSignal,
): Promise<OperationOutcome> {
  // The client types `latestResponse` loosely; it is Compute Engine's Operation resource.
  let current = started as OperationLike;
  const name = current.name;
  if (!name)
    throw new ProvisionError({ provider: PROVIDER_NAME, message: "an operation came back without a name" });
  while (current.status !== "DONE") {
    signal.throwIfAborted();
    const [next] =
      where === "global"
        ? await gcpCall("waiting for an operation", signal, () =>
            clients.globalOperations.wait({ project: clients.project, operation: name }),
          )
        : await gcpCall("waiting for an operation", signal, () =>
            clients.zoneOperations.wait({ project: clients.project, zone: where.zone, operation: name }),
          );
    current = next as OperationLike;
  }
  return outcomeOf(current);
}

/** Closes the clients' connections. */
export async function closeClients(clients: GcpClients): Promise<void> {
  await Promise.all(
    [
      clients.instances,
      clients.zoneOperations,
      clients.globalOperations,
      clients.firewalls,
      clients.machineTypes,
      clients.acceleratorTypes,
      clients.zones,
      clients.regions,
      clients.projects,
    ].map((client) => client.close().catch(() => undefined)),
  );
}
