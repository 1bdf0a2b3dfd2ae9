/**
 * A fake of Compute Engine's metadata server, the part Skyward's interruption-notice poller reads,
 * so tests can preempt a Spot VM's node or schedule a host maintenance that stops it. It serves
 * several VMs at once, each under its own path prefix (`/<vm name>`); `endpointFor(name)` is what
 * the node is told to poll (`InterruptionNoticeSource` `kind: "gcp-metadata"`).
 *
 * The shapes come from Google's documentation:
 * - every request carries `Metadata-Flavor: Google`, and one without it is refused (403); values are
 *   plain text — https://cloud.google.com/compute/docs/metadata/querying-metadata
 * - `GET /computeMetadata/v1/instance/preempted`: `FALSE`, then `TRUE` once the Spot VM is
 *   preempted — https://cloud.google.com/compute/docs/instances/create-use-spot#detect-preemption
 * - `GET /computeMetadata/v1/instance/maintenance-event`: `NONE`, `MIGRATE_ON_HOST_MAINTENANCE`, or
 *   `TERMINATE_ON_HOST_MAINTENANCE` before a maintenance that stops the VM —
 *   https://cloud.google.com/compute/docs/instances/monitor-plan-host-maintenance-event
 */
import { createServer } from "node:http";
import { listenOnFreePort } from "./http-listen.js";

/** One request the fake answered. */
export interface FakeGceMetadataRequest {
  /** The path without the VM prefix (`/computeMetadata/v1/instance/preempted`). */
  readonly path: string;
  /** The VM whose prefix it used. */
  readonly vm: string;
  readonly status: number;
}

/** What `maintenance-event` may answer. */
export type GceMaintenanceEvent = "NONE" | "MIGRATE_ON_HOST_MAINTENANCE" | "TERMINATE_ON_HOST_MAINTENANCE";

/** A running fake metadata server. */
export interface FakeGceMetadata extends AsyncDisposable {
  /** `http://127.0.0.1:port`. */
  readonly url: string;
  /** The endpoint a node of VM `name` polls: `http://127.0.0.1:port/<name>`. */
  endpointFor(name: string): string;
  /** Preempts VM `name`: its `preempted` answers `TRUE` from now on. */
  preempt(name: string): void;
  /** Sets what VM `name`'s `maintenance-event` answers. */
  scheduleMaintenance(name: string, event: GceMaintenanceEvent): void;
  /** Every request answered, in order. */
  readonly requests: readonly FakeGceMetadataRequest[];
  close(): Promise<void>;
}

const INSTANCE_PREFIX = "/computeMetadata/v1/instance/";

/** Starts a fake metadata server on loopback. */
export async function startFakeGceMetadata(): Promise<FakeGceMetadata> {
  const preempted = new Set<string>();
  const maintenance = new Map<string, GceMaintenanceEvent>();
  const requests: FakeGceMetadataRequest[] = [];
  const server = createServer((request, response) => {
    request.resume();
    const url = new URL(request.url ?? "/", "http://metadata");
    const [, vm = "", ...rest] = url.pathname.split("/");
    const path = `/${rest.join("/")}`;
    const reply = (status: number, body = "") => {
      requests.push({ path, vm, status });
      response.writeHead(status, {
        "content-type": "application/text",
        "content-length": Buffer.byteLength(body),
        "metadata-flavor": "Google",
      });
      response.end(body);
    };
    if (request.method !== "GET") return reply(405);
    if (request.headers["metadata-flavor"] !== "Google") return reply(403);
    if (path === `${INSTANCE_PREFIX}preempted`) return reply(200, preempted.has(vm) ? "TRUE" : "FALSE");
    if (path === `${INSTANCE_PREFIX}maintenance-event`) return reply(200, maintenance.get(vm) ?? "NONE");
    return reply(404);
  });
  const { url, close } = await listenOnFreePort(server);
  return {
    url,
    endpointFor: (name) => `${url}/${name}`,
    preempt: (name) => void preempted.add(name),
    scheduleMaintenance: (name, event) => void maintenance.set(name, event),
    requests,
    close,
    [Symbol.asyncDispose]: close,
  };
}
