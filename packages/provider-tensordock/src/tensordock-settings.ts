/** The TensorDock provider's settings, declared once: the schema checks them by name, {@link TensorDockSettings} is its input. */
import { machineSettingsObject, type SshStandIn, sshUserSchema } from "@skyward/provider-utils";
import { z } from "zod";

/** What the `sshAddress` test seam receives: the instance as TensorDock describes it (its UUID and dedicated IP). */
export type TensorDockInstanceAddress = Readonly<{ id: string; ipAddress: string }>;

/** What the `sshAddress` test seam returns: where the pool reaches the instance instead. */
export type TensorDockSshMapping = SshStandIn;

/** The settings schema: every field checked, unknown ones refused by name. */
export const settingsSchema = machineSettingsObject<
  (instance: TensorDockInstanceAddress) => TensorDockSshMapping
>()("https://dashboard.tensordock.com/api/v2", {
  /** Only locations in this country, city, state or with this id (`"United States"`); a spec's `region` does the same. */
  location: z.string().min(1, { message: "expected a country, city or location id" }).optional(),
  /** Disk per VM, GB (TensorDock's minimum is 100, in steps of 50: rounded up); a spec's `diskGb` raises it. Default 100. */
  storageGb: z
    .number({ error: "expected the disk size in GB" })
    .int({ message: "expected the disk size in GB as a whole number" })
    .min(100, { message: "expected at least 100 GB (TensorDock's minimum)" })
    .default(100),
  /** The OS image (`"ubuntu2404"`, `"ubuntu2204"`). Default `"ubuntu2404"`. */
  operatingSystem: z
    .string()
    .regex(/^[a-z0-9][a-z0-9._-]*$/, { message: 'expected an image id such as "ubuntu2404"' })
    .default("ubuntu2404"),
  /** The fewest vCPUs a VM gets (in steps of 2: rounded up); a spec's `vcpus` raises it. Default 4. */
  minVcpus: z.number().int({ message: "expected a whole number of vCPUs" }).min(1).default(4),
  /** The least RAM a VM gets, GB (in steps of 8: rounded up); a spec's `memoryGb` raises it. Default 16. */
  minRamGb: z.number().positive({ message: "expected a RAM size in GB" }).default(16),
  /** The login user of the image. Default `"user"` (with passwordless sudo), as on TensorDock's images. */
  sshUser: sshUserSchema("user"),
});

/** Settings of the TensorDock provider; every field is optional. */
export type TensorDockSettings = z.input<typeof settingsSchema>;
/** The settings as parsed, defaults filled in. */
export type ParsedSettings = z.output<typeof settingsSchema>;
