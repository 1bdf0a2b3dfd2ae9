/**
 * The cluster's API, through `@kubernetes/client-node`: the kubeconfig loaded once per provider, and
 * every call's refusal turned into the error a user acts on — forbidden by RBAC (naming the verb and
 * resource), a namespace quota exceeded (no capacity), or another failure of the API.
 */
import { ApiException, CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import { ConfigurationError, NoCapacityError, ProvisionError } from "@skyward/core";
import type { ParsedKubernetesSettings } from "./kubernetes-settings.js";

/** The provider's name, in offers, tags, events and errors. */
export const PROVIDER_NAME = "kubernetes";

/** A loaded kubeconfig and the clients made from it. */
export interface KubernetesApi {
  /** The kubeconfig, its context selected. */
  readonly config: KubeConfig;
  /** The core (v1) API: nodes, pods, events. */
  readonly core: CoreV1Api;
  /** The namespace pods are created in. */
  readonly namespace: string;
  /** The context's name, for messages and cache keys (never a credential). */
  readonly context: string;
}

/** Loads the kubeconfig the settings name (or the default one) and selects the context. */
export function loadKubernetesApi(settings: ParsedKubernetesSettings): KubernetesApi {
  const config = new KubeConfig();
  try {
    if (settings.kubeconfig !== undefined) config.loadFromFile(settings.kubeconfig);
    else config.loadFromDefault();
  } catch (error) {
    throw new ConfigurationError({
      issues: [
        {
          path: "kubeconfig",
          message: `could not read the kubeconfig ${settings.kubeconfig ?? "(default)"}: ${(error as Error).message}`,
        },
      ],
      cause: error,
    });
  }
  if (settings.context !== undefined) {
    if (config.getContextObject(settings.context) === null) {
      throw new ConfigurationError({
        issues: [
          {
            path: "context",
            message: `the kubeconfig has no context "${settings.context}" (it has ${
              config
                .getContexts()
                .map((context) => `"${context.name}"`)
                .join(", ") || "none"
            })`,
          },
        ],
      });
    }
    config.setCurrentContext(settings.context);
  }
  const context = config.getCurrentContext();
  const namespace = settings.namespace ?? config.getContextObject(context)?.namespace ?? "default";
  return { config, core: config.makeApiClient(CoreV1Api), namespace, context };
}

/** What a call does, for its error: `create` `pods` in the namespace. */
export interface KubernetesCall {
  /** The API verb (`create`, `list`, `get`, `delete`). */
  readonly verb: string;
  /** The resource (`pods`, `nodes`, `events`). */
  readonly resource: string;
  /** The namespace, for namespaced resources. */
  readonly namespace?: string;
}

/** The `message` of the Status object a refusal carries, or the error's own message. */
export function statusMessage(error: unknown): string {
  if (error instanceof ApiException) {
    const body: unknown = typeof error.body === "string" ? safeJson(error.body) : error.body;
    const message = (body as { message?: unknown } | undefined)?.message;
    if (typeof message === "string" && message !== "") return message;
    return `HTTP ${error.code}`;
  }
  return error instanceof Error ? error.message : String(error);
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return { message: text.slice(0, 500) };
  }
}

/** The HTTP status of a refusal, or undefined for an error that did not come from the API. */
export function statusCode(error: unknown): number | undefined {
  return error instanceof ApiException ? error.code : undefined;
}

/**
 * Runs one API call; a refusal becomes `NoCapacityError` (a quota exceeded), `ProvisionError`
 * naming the verb and resource (forbidden by RBAC, not retryable) or `ProvisionError` (others,
 * retryable when the API was unavailable or asked to slow down).
 */
export async function callKubernetes<T>(call: KubernetesCall, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (error) {
    throw kubernetesError(call, error);
  }
}

/** The error {@link callKubernetes} throws for `error`. */
export function kubernetesError(call: KubernetesCall, error: unknown): Error {
  const code = statusCode(error);
  const message = statusMessage(error);
  const where = call.namespace !== undefined ? ` in namespace "${call.namespace}"` : "";
  if (code === 403 && /exceeded quota/i.test(message)) {
    return new NoCapacityError({
      attempts: [
        { provider: PROVIDER_NAME, reason: `the namespace's resource quota is exceeded: ${message}` },
      ],
      cause: error,
    });
  }
  if (code === 403 && /error looking up service account/i.test(message)) {
    // Admission, not RBAC: a namespace just made has no default service account for a moment.
    return new ProvisionError({
      provider: PROVIDER_NAME,
      message: `Kubernetes: the pods' service account${where} does not exist (yet): ${message}`,
      isRetryable: true,
      cause: error,
    });
  }
  if (code === 403) {
    return new ProvisionError({
      provider: PROVIDER_NAME,
      message: `Kubernetes forbids ${call.verb} ${call.resource}${where} to this kubeconfig's user (RBAC: grant the verb "${call.verb}" on "${call.resource}"): ${message}`,
      cause: error,
    });
  }
  if (code === 401) {
    return new ProvisionError({
      provider: PROVIDER_NAME,
      message: `Kubernetes did not accept the kubeconfig's credentials (${call.verb} ${call.resource}${where}): ${message}`,
      cause: error,
    });
  }
  return new ProvisionError({
    provider: PROVIDER_NAME,
    message: `Kubernetes: ${call.verb} ${call.resource}${where} failed: ${message}`,
    isRetryable: code === undefined || code === 429 || code >= 500,
    cause: error,
  });
}
