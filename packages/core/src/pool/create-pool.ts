/**
 * Making a pool from a validated request: the two ways in. {@link openPool} provisions a new pool
 * (what `sky.compute` does once it has resolved its input); {@link resumePool} makes one around a
 * detached pool's running workers (what `sky.attach` does), and hands back what the attach needs of
 * it besides the {@link Pool}.
 */
import { collectPluginSecrets } from "../contract/plugin-hooks.js";
import type { Provider } from "../contract/provider.js";
import { ProvisionError, SkywardError } from "../errors/errors.js";
import type { SkywardEvent } from "../observe/events.js";
import type { Options } from "../spec/options.js";
import type { PoolSpec } from "../spec/spec.js";
import { checkVolumeClients, checkVolumeSources } from "../spec/volume.js";
import type { DetachHandler } from "./detach.js";
import type { Pool } from "./pool.js";
import { type PoolAnnouncement, type PoolInternals, type PoolResume, PoolRuntime } from "./pool-runtime.js";
import { checkNodeCeiling } from "./resize.js";
import { resolveSecretValues } from "./secret-values.js";
import { closeOnSignals } from "./signals.js";

/** A validated pool request, and what the pool is wired to. */
export interface PoolRequest {
  /** The specs, in the order given (at least one). */
  readonly specs: readonly PoolSpec[];
  readonly options: Options;
  /** Makes the provider of a spec that names none (`compute` gives `Local`). */
  readonly defaultProvider: () => Provider;
  /** Records the pool when it is detached (the session's state file). */
  readonly detach: DetachHandler;
  /** Receives every event from the start. */
  readonly onEvent?: ((event: SkywardEvent) => void) | undefined;
  /** Whether SIGINT/SIGTERM close the pool (default true). */
  readonly handleSignals?: boolean | undefined;
  /** Announced once the console and the log file listen, before provisioning (the dashboard's link). */
  readonly announcement?: PoolAnnouncement | undefined;
  /** Aborts provisioning; whatever was started is torn down. */
  readonly signal?: AbortSignal | undefined;
}

/** A pool made around a detached pool's workers, with what its picker-up needs of it. */
export interface ResumedPool {
  readonly pool: Pool;
  readonly internals: PoolInternals;
}

/** Provisions a pool and returns it once ready (its minimum node count up). */
export async function openPool(request: PoolRequest): Promise<Pool> {
  return launch(request, undefined);
}

/** Makes a pool around the running workers of a detached one (see {@link PoolResume}). */
export async function resumePool(request: PoolRequest, resume: PoolResume): Promise<ResumedPool> {
  const pool = await launch(request, resume);
  return { pool, internals: PoolRuntime.internals(pool) };
}

/** The spec with its plugins' secrets joined to its own (its own source wins for a shared name). */
function withPluginSecrets(spec: PoolSpec): PoolSpec {
  const fromPlugins = collectPluginSecrets(spec.plugins);
  if (Object.keys(fromPlugins).length === 0) return spec;
  return Object.freeze({ ...spec, secrets: Object.freeze({ ...fromPlugins, ...spec.secrets }) });
}

async function launch(request: PoolRequest, resume: PoolResume | undefined): Promise<PoolRuntime> {
  const specs = request.specs.map(withPluginSecrets);
  const first = specs[0] as PoolSpec;
  for (const [index, spec] of specs.entries()) {
    const path = specs.length > 1 ? `specs[${index}].nodes.max` : "nodes.max";
    checkNodeCeiling(spec.provider, spec.nodes, path);
    const volumesPath = specs.length > 1 ? `specs[${index}].volumes` : "volumes";
    checkVolumeSources(spec.provider?.name, spec.volumes, volumesPath);
    await checkVolumeClients(spec.provider?.name, spec.volumes, volumesPath);
  }
  // Read before anything is provisioned: a secret that cannot be read refuses the pool by its name.
  const secrets = await resolveSecretValues(specs);
  const pool = new PoolRuntime({
    spec: first,
    secrets,
    options: request.options,
    onEvent: request.onEvent,
    defaultProvider: request.defaultProvider,
    detach: request.detach,
    resume,
    announcement: request.announcement,
  });
  if (request.handleSignals !== false) closeOnSignals(pool);
  try {
    await pool.start(specs, request.signal);
  } catch (error) {
    await pool.close();
    if (SkywardError.isInstance(error)) throw error;
    throw new ProvisionError({
      provider: (first.provider ?? request.defaultProvider()).name,
      message: (error as Error).message,
      cause: error,
    });
  }
  return pool;
}
