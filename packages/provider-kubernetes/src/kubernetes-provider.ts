/**
 * The Kubernetes provider: each Skyward node is a pod of the user's cluster, requesting the spec's
 * CPUs, memory and `nvidia.com/gpu`, labelled with the cluster id; its worker is bootstrapped and
 * started through exec and reached through port-forward (see `pod-worker-launcher.ts`), so nothing
 * but the API server is reached from the client.
 */
import type { V1Pod } from "@kubernetes/client-node";
import { ConfigurationError, ConnectionError, NoCapacityError } from "@skyward/core";
import type {
  Cluster,
  ClusterCallOptions,
  GetInstanceOptions,
  Instance,
  LaunchWorkerOptions,
  OffersOptions,
  PrepareOptions,
  ProviderCallOptions,
  ProviderV1,
  ProvisionOptions,
  ReconnectWorkerOptions,
  TerminateOptions,
} from "@skyward/core/contract";
import { createClusterId } from "@skyward/provider-utils";
import {
  callKubernetes,
  type KubernetesApi,
  kubernetesError,
  loadKubernetesApi,
  PROVIDER_NAME,
  statusCode,
} from "./kubernetes-api.js";
import {
  type KubernetesOfferData,
  nodeResources,
  offersFromNodes,
  whyNoNodeFits,
} from "./kubernetes-offers.js";
import {
  type KubernetesSettings,
  type ParsedKubernetesSettings,
  parseSettings,
} from "./kubernetes-settings.js";
import { launchPodWorker, podEndpoint } from "./pod-worker-launcher.js";
import { instanceOfPod, POD_LABELS, pendingPodFailure, podManifest, SKYWARD_POD_SELECTOR } from "./pods.js";

/** What a Kubernetes cluster (a pool's pods) keeps between calls. */
export interface KubernetesClusterData {
  /** The namespace its pods are in. */
  readonly namespace: string;
}

/** The provider built on parsed settings; its API client is made on the first call that needs it. */
function kubernetesProvider(settings: ParsedKubernetesSettings): ProviderV1<KubernetesClusterData> {
  let loaded: KubernetesApi | undefined;
  const api = () => {
    loaded ??= loadKubernetesApi(settings);
    return loaded;
  };
  const listNodes = async () => {
    const list = await callKubernetes({ verb: "list", resource: "nodes" }, () => api().core.listNode());
    return list.items.map(nodeResources);
  };
  const readPod = async (name: string): Promise<V1Pod | null> => {
    try {
      return await api().core.readNamespacedPod({ name, namespace: api().namespace });
    } catch (error) {
      if (statusCode(error) === 404) return null;
      throw kubernetesError({ verb: "get", resource: "pods", namespace: api().namespace }, error);
    }
  };
  // Deleted, then waited for (a few seconds: the worker dies on the kubelet's SIGTERM) until gone,
  // so that what `terminate` ended is never listed as still stopping.
  const deletePods = async (names: readonly string[], signal: AbortSignal) => {
    await requestDeletion(names);
    const deadline = Date.now() + 60_000;
    let left = [...names];
    while (left.length > 0 && Date.now() < deadline && !signal.aborted) {
      left = (
        await Promise.all(left.map(async (name) => ((await readPod(name)) === null ? "" : name)))
      ).filter((name) => name !== "");
      if (left.length > 0) await new Promise((resolve) => setTimeout(resolve, 500));
    }
  };
  const requestDeletion = async (names: readonly string[]) => {
    await Promise.all(
      names.map(async (name) => {
        try {
          await api().core.deleteNamespacedPod({ name, namespace: api().namespace, gracePeriodSeconds: 5 });
        } catch (error) {
          if (statusCode(error) === 404) return;
          throw kubernetesError({ verb: "delete", resource: "pods", namespace: api().namespace }, error);
        }
      }),
    );
  };
  const listPods = async (selector: string) => {
    const list = await callKubernetes({ verb: "list", resource: "pods", namespace: api().namespace }, () =>
      api().core.listNamespacedPod({ namespace: api().namespace, labelSelector: selector }),
    );
    return list.items;
  };

  return {
    specificationVersion: "v1",
    name: PROVIDER_NAME,
    capabilities: { spot: false, peerNetwork: "private", provisionTimeout: 600 },
    get cacheKey() {
      return `${api().context}/${api().namespace}`;
    },

    async offers({ query }: OffersOptions) {
      return offersFromNodes(await listNodes(), query, settings, api().namespace);
    },

    async prepare({ spec, offer, poolId }: PrepareOptions): Promise<Cluster<KubernetesClusterData>> {
      if (offer.provider !== PROVIDER_NAME)
        throw new ConfigurationError({
          issues: [
            {
              path: "offer",
              message: `expected an offer of the kubernetes provider, got one of ${offer.provider}`,
            },
          ],
        });
      if ((spec.volumes ?? []).length > 0)
        throw new ConfigurationError({
          issues: [
            {
              path: "volumes",
              message:
                "the kubernetes provider does not mount volumes: give the data to the pods another way (storage, includes)",
            },
          ],
        });
      return Object.freeze({
        id: createClusterId(),
        provider: PROVIDER_NAME,
        poolId: poolId ?? "",
        region: api().namespace,
        spec,
        offer,
        ssh: null,
        specific: Object.freeze({ namespace: api().namespace }),
      });
    },

    async provision({
      cluster,
      count,
    }: ProvisionOptions<KubernetesClusterData>): Promise<readonly Instance[]> {
      const size = cluster.offer.specific as unknown as KubernetesOfferData;
      // Refused before any pod waits: a pod no node can ever hold would stay pending forever.
      const short = whyNoNodeFits(await listNodes(), size, settings.nodeSelector);
      if (short !== undefined)
        throw new NoCapacityError({
          attempts: [{ provider: PROVIDER_NAME, offer: cluster.offer.id, reason: short }],
        });
      const created: Instance[] = [];
      for (let index = 0; index < count; index++) {
        const manifest = podManifest({
          clusterId: cluster.id,
          poolId: cluster.poolId,
          offerId: cluster.offer.id,
          hourlyPrice: cluster.offer.onDemandPrice ?? 0,
          size,
          namespace: api().namespace,
          settings,
          deadlineSeconds: settings.activeDeadlineSeconds,
        });
        try {
          const pod = await callKubernetes(
            { verb: "create", resource: "pods", namespace: api().namespace },
            () => api().core.createNamespacedPod({ namespace: api().namespace, body: manifest }),
          );
          created.push(instanceOfPod(pod));
        } catch (error) {
          if (created.length > 0 && NoCapacityError.isInstance(error)) break;
          throw error;
        }
      }
      return created;
    },

    async getInstance({ id }: GetInstanceOptions<KubernetesClusterData>) {
      const pod = await readPod(id);
      if (pod === null) return null;
      // A pod deleted behind the pool's back (evicted, preempted, deleted) reads as running until
      // its worker has ended: the kubelet's SIGTERM makes the worker report its preemption itself
      // (`node.preempted`, its tasks retried), which the reconcile tick would otherwise forestall by
      // finding the pod stopping first and declaring the node merely lost.
      const instance = instanceOfPod(pod, true);
      if (instance.status === "pending") {
        const failure = pendingPodFailure(pod, settings.image);
        if (failure !== undefined) throw failure;
      }
      return instance;
    },

    launchWorker(options: LaunchWorkerOptions<KubernetesClusterData>) {
      return launchPodWorker(api(), settings.root, options);
    },

    async reconnectWorker({ instance, worker, nodeId }: ReconnectWorkerOptions<KubernetesClusterData>) {
      // The worker is its container's PID 1: while the pod runs (its container running, not being
      // deleted), so does the worker a detached pool left there; the handshake checks the rest.
      const pod = await readPod(instance.id);
      const current = pod === null ? null : instanceOfPod(pod);
      if (current?.status !== "running") {
        throw new ConnectionError({
          host: `pod ${api().namespace}/${instance.id}`,
          node: nodeId,
          message: `the detached pool's pod ${api().namespace}/${instance.id} is ${current?.status ?? "gone"}: its worker no longer runs`,
        });
      }
      return podEndpoint(api(), current, worker.port, worker.pid, nodeId);
    },

    async terminate({ ids, signal }: TerminateOptions<KubernetesClusterData>) {
      await deletePods(ids, signal);
    },

    async teardown({ cluster, signal }: ClusterCallOptions<KubernetesClusterData>) {
      const pods = await listPods(`${POD_LABELS.cluster}=${cluster.id}`);
      await deletePods(
        pods.map((pod) => pod.metadata?.name ?? "").filter((name) => name !== ""),
        signal,
      );
    },

    // The pod ends when its worker exits after the TTL (it is the container's PID 1), and its
    // activeDeadlineSeconds ends it regardless: nothing more to run.
    selfDestruct: () => "true",

    async listInstances(_options: ProviderCallOptions) {
      return (await listPods(SKYWARD_POD_SELECTOR)).map((pod) => instanceOfPod(pod));
    },
  };
}

/**
 * The Kubernetes provider: `Kubernetes()` uses the default kubeconfig's current context, or
 * `Kubernetes({ context: "gpu-cluster", namespace: "ml", image: "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime" })`.
 * Throws {@link ConfigurationError} for bad settings; the kubeconfig is read on the first call.
 */
export function Kubernetes(settings: KubernetesSettings = {}): ProviderV1<KubernetesClusterData> {
  return kubernetesProvider(parseSettings(settings, "Kubernetes"));
}

/**
 * Creates the provider from a `[providers.NAME]` table of `skyward.toml` (`type = "kubernetes"`), its
 * keys already camelCased by the core: `node_selector` arrives as `nodeSelector`.
 */
export function createProviderFromConfig(
  settings: Record<string, unknown>,
): ProviderV1<KubernetesClusterData> {
  return kubernetesProvider(parseSettings(settings as KubernetesSettings, ""));
}
