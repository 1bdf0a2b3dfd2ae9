/**
 * The TensorDock provider's settings: what a user may set, checked by name before anything is asked of
 * the API. vCPUs, RAM and storage are rounded up to TensorDock's steps when offers are made (see
 * `tensordock-offers.ts`).
 */
import {
  type MachineProviderSettings,
  machineSettingsShape,
  type SshStandIn,
  sshUserSchema,
} from "@skyward/provider-utils";
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
export type TensorDockSshMapping = SshStandIn;

/** Settings of the TensorDock provider; every field is optional. */
export interface TensorDockSettings
  extends MachineProviderSettings<(instance: TensorDockInstanceAddress) => TensorDockSshMapping> {
  /** The API token. Default: the `TENSORDOCK_API_TOKEN` environment variable, read on the first API call. A secret: never logged. */
  apiKey?: string;
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
}

/** The settings schema: every field checked, unknown ones refused by name. */
export const settingsSchema = z.strictObject({
  ...machineSettingsShape<(instance: TensorDockInstanceAddress) => TensorDockSshMapping>(TENSORDOCK_API_URL),
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
  sshUser: sshUserSchema("user"),
});

/** The settings as parsed, defaults filled in. */
export type ParsedSettings = z.output<typeof settingsSchema>;
