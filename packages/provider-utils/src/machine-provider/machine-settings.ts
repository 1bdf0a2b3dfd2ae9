/**
 * The settings every provider on the machine-provider base accepts — the HTTP ones, its API root, its
 * keys directory and the `sshAddress` test seam — as a TypeScript type to extend and a zod shape to
 * spread, and the pair of factories each provider exports (`Provider(settings)` and
 * `createProviderFromConfig` for a `skyward.toml` table).
 */
import { ConfigurationError, DockerImage } from "@skyward/core";
import { type ProviderV1, parseInput } from "@skyward/core/contract";
import { z } from "zod";
import {
  environmentVariablesSchema,
  type HttpSettings,
  httpSettingsShape,
  keysDirectorySchema,
} from "../http/http-settings.js";
import type { MachineAdapter, MachineClusterData } from "./adapter.js";
import { defineMachineProvider } from "./machine-provider.js";

/** The settings of a provider on the base; `Seam` is its `sshAddress` function. */
export interface MachineProviderSettings<Seam> extends HttpSettings {
  /** The API root. Default: the provider's public API. */
  apiUrl?: string;
  /** Where the SSH key pair is kept. Default `$SKYWARD_HOME/keys` (`~/.skyward/keys`). */
  keysDirectory?: string;
  /**
   * For tests only: where the pool reaches a machine instead of its own address (a stand-in SSH host
   * of a test bed), and what runs instead of its self-destruct. Never set it against the real API.
   */
  sshAddress?: Seam;
}

/**
 * The zod shape {@link machineSettingsShape} returns, named so that a provider's published
 * declarations refer to it and keep each key's TSDoc (an inferred shape is printed without them).
 */
export type MachineSettingsShape<Seam> = typeof httpSettingsShape & {
  /** The API root. Default: the provider's public API. */
  apiUrl: z.ZodDefault<z.ZodPipe<z.ZodURL, z.ZodTransform<string, string>>>;
  /** Where the SSH key pair is kept. Default `$SKYWARD_HOME/keys` (`~/.skyward/keys`). */
  keysDirectory: typeof keysDirectorySchema;
  /**
   * For tests only: where the pool reaches a machine instead of its own address (a stand-in SSH host
   * of a test bed), and what runs instead of its self-destruct. Never set it against the real API.
   */
  sshAddress: z.ZodOptional<z.ZodCustom<Seam, Seam>>;
};

/** The zod shape of {@link MachineProviderSettings}, `apiUrl` defaulting to `defaultApiUrl`. */
export function machineSettingsShape<Seam>(defaultApiUrl: string): MachineSettingsShape<Seam> {
  return {
    ...httpSettingsShape,
    /** The API root. Default: the provider's public API. */
    apiUrl: z
      .url({ error: "expected the API's base URL" })
      .transform((value) => value.replace(/\/+$/, ""))
      .default(defaultApiUrl),
    /** Where the SSH key pair is kept. Default `$SKYWARD_HOME/keys` (`~/.skyward/keys`). */
    keysDirectory: keysDirectorySchema,
    /**
     * For tests only: where the pool reaches a machine instead of its own address (a stand-in SSH host
     * of a test bed), and what runs instead of its self-destruct. Never set it against the real API.
     */
    sshAddress: z
      .custom<Seam>((value) => typeof value === "function", {
        message: "expected a function (for tests only)",
      })
      .optional(),
  };
}

/** The zod shape of {@link containerSettingsShape}, named so that a provider's published declarations keep each key's TSDoc. */
export type ContainerSettingsShape = {
  /** More environment variables for every container. */
  env: z.ZodDefault<z.ZodReadonly<typeof environmentVariablesSchema>>;
  /** Where the SSH key pair is kept. Default `$SKYWARD_HOME/keys` (`~/.skyward/keys`). */
  keysDirectory: typeof keysDirectorySchema;
};

/** The settings of container marketplaces (RunPod, Vast.ai, Novita) beside their own: more environment variables, and where the key pair is kept. */
export const containerSettingsShape: ContainerSettingsShape = {
  /** More environment variables for every container. */
  env: environmentVariablesSchema.readonly().default({}),
  /** Where the SSH key pair is kept. Default `$SKYWARD_HOME/keys` (`~/.skyward/keys`). */
  keysDirectory: keysDirectorySchema,
};

/**
 * The CUDA version (`"12.9"`) a `DockerImage` given as the setting `key` states
 * (`sky.containers.cuda("12.9")`); undefined for a tag string, which parsing keeps alone.
 */
export function declaredImageCuda(written: unknown, key: string): string | undefined {
  const image = (written as Record<string, unknown> | undefined)?.[key];
  return DockerImage.isDockerImage(image) ? image.cuda : undefined;
}

/** Refuses a setting (or a spec's field) that cannot work here: a `ConfigurationError` naming it at `path`. */
export function refuseSetting(path: string, message: string): never {
  throw new ConfigurationError({ issues: [{ path, message }] });
}

/** A login user's name, as a setting (`sshUser`), defaulting to `user`. */
export function sshUserSchema(user: string) {
  return z
    .string({ error: "expected a user name" })
    .regex(/^[a-z_][a-z0-9_-]*$/, { message: "expected a user name" })
    .default(user);
}

/**
 * The two factories of a provider: from its settings (errors under `label.`), and from a config table.
 * Curried so that only `Settings` (the documented interface users write) is given; the rest is inferred:
 * `machineProviderFactories<AcmeSettings>()("Acme", settingsSchema, adapterFor)`.
 */
export function machineProviderFactories<Settings>() {
  return <Parsed, Machine, ClusterData extends MachineClusterData>(
    label: string,
    schema: z.ZodType<Parsed>,
    /** Also given the settings as written, for what parsing drops (a `DockerImage`'s CUDA, see {@link declaredImageCuda}). */
    adapterFor: (settings: Parsed, written: unknown) => MachineAdapter<Machine, ClusterData>,
  ) => {
    const build = (settings: unknown, prefix: string) =>
      defineMachineProvider(adapterFor(parseInput(schema, settings ?? {}, prefix), settings ?? {}));
    return {
      provider: (settings?: Settings): ProviderV1<ClusterData> => build(settings, label),
      fromConfig: (settings: Record<string, unknown>): ProviderV1<ClusterData> => build(settings, ""),
    };
  };
}
