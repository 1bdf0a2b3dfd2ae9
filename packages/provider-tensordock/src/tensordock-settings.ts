/**
 * The TensorDock provider's settings: what a user may set, checked by name before anything is asked of
 * the API. vCPUs, RAM and storage are rounded up to TensorDock's steps when offers are made (see
 * `tensordock-offers.ts`).
 */
import { parseInput } from "@skyward/core/contract";
import { type HttpSettings, httpSettingsShape, keysDirectorySchema } from "@skyward/provider-utils";
import { z } from "zod";
import { TENSORDOCK_API_URL } from "./tensordock-api.js";

/** What the {@link TensorDockSettings.sshAddress} test seam receives: the instance as TensorDock describes it. */
export interface TensorDockInstanceAddress {
  /** The instance id (a UUID). */
  readonly id: string;
  /** Its (dedicated) IP address. */
  readonly ipAddress: string;
}

/** What the {@link TensorDockSettings.sshAddress} test seam returns: where the pool reaches the instance instead. */
export interface TensorDockSshMapping {
  /** Host name or address to connect to. */
  readonly host: string;
  /** The SSH port. */
  readonly port: number;
  /** The login user; default the provider's `sshUser`. */
  readonly user?: string;
  /** The stand-in host's Skyward root directory. */
  readonly root?: string;
  /** The stand-in host's key fingerprint (`SHA256:…`); default trust on first use. */
  readonly hostKeyFingerprint?: string;
  /** The shell operation run instead of the instance's self-destruct (a stand-in host must never be deleted). */
  readonly selfDestruct?: string;
}

/** Settings of the TensorDock provider; every field is optional. */
export interface TensorDockSettings extends HttpSettings {
  /** The API token. Default: the `TENSORDOCK_API_TOKEN` environment variable, read on the first API call. A secret: never logged. */
  apiKey?: string;
  /** The API root. Default `https://dashboard.tensordock.com/api/v2`. */
  apiUrl?: string;
  /** Only locations in this country, city, state or with this id (`"United States"`); a spec's `region` does the same. */
  location?: string;
  /** Disk per VM, GB (TensorDock's minimum is 100, in steps of 50: rounded up); a spec's `diskGb` raises it. Default 100. */
  storageGb?: number;
  /** The OS image (`"ubuntu2404"`, `"ubuntu2204"`). Default `"ubuntu2404"`. */
  operatingSystem?: string;
  /** The fewest vCPUs a VM gets (in steps of 2: rounded up); a spec's `vcpus` raises it. Default 4. */
  minVcpus?: number;
  /** The least RAM a VM gets, GB (in steps of 8: rounded up); a spec's `memoryGb` raises it. Default 16. */
  minRamGb?: number;
  /** The login user of the image. Default `"user"` (with passwordless sudo), as on TensorDock's images. */
  sshUser?: string;
  /** Where the SSH key pair is kept. Default `$SKYWARD_HOME/keys` (`~/.skyward/keys`). */
  keysDirectory?: string;
  /**
   * For tests only: where the pool reaches an instance instead of its IP address (a stand-in SSH host),
   * and what runs instead of its self-destruct.
   */
  sshAddress?: (instance: TensorDockInstanceAddress) => TensorDockSshMapping;
}

/** The settings schema: every field checked, unknown ones refused by name. */
export const settingsSchema = z.strictObject({
  ...httpSettingsShape,
  apiUrl: z
    .url({ error: "expected the API's base URL" })
    .transform((value) => value.replace(/\/+$/, ""))
    .default(TENSORDOCK_API_URL),
  location: z.string().min(1, { message: "expected a country, city or location id" }).optional(),
  storageGb: z
    .number({ error: "expected the disk size in GB" })
    .int({ message: "expected the disk size in GB as a whole number" })
    .min(100, { message: "expected at least 100 GB (TensorDock's minimum)" })
    .default(100),
  operatingSystem: z
    .string()
    .regex(/^[a-z0-9][a-z0-9._-]*$/, { message: 'expected an image id such as "ubuntu2404"' })
    .default("ubuntu2404"),
  minVcpus: z.number().int({ message: "expected a whole number of vCPUs" }).min(1).default(4),
  minRamGb: z.number().positive({ message: "expected a RAM size in GB" }).default(16),
  sshUser: z
    .string({ error: "expected a user name" })
    .regex(/^[a-z_][a-z0-9_-]*$/, { message: "expected a user name" })
    .default("user"),
  keysDirectory: keysDirectorySchema,
  sshAddress: z
    .custom<(instance: TensorDockInstanceAddress) => TensorDockSshMapping>(
      (value) => typeof value === "function",
      {
        message: "expected a function (for tests only)",
      },
    )
    .optional(),
});

/** The settings as parsed, defaults filled in. */
export type ParsedSettings = z.output<typeof settingsSchema>;

/** Parses settings, or throws a `ConfigurationError` naming each bad field under `prefix`. */
export function parseSettings(settings: TensorDockSettings | undefined, prefix: string): ParsedSettings {
  return parseInput(settingsSchema, settings ?? {}, prefix);
}
