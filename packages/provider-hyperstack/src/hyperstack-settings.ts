/** The Hyperstack provider's settings, declared once: the schema checks them by name, {@link HyperstackSettings} is its input. */
import { machineSettingsObject, type SshStandIn, sshUserSchema, textField } from "@skyward/provider-utils";
import { z } from "zod";

/** What the `sshAddress` test seam receives: the VM as Hyperstack describes it (its id, floating and fixed IP). */
export type HyperstackVmAddresses = Readonly<{ id: string; floatingIp: string; fixedIp: string | null }>;

/** What the `sshAddress` test seam returns: the stand-in host, and the address peers reach it on (default the VM's fixed IP). */
export type HyperstackSshMapping = SshStandIn & { readonly privateIp?: string };

const regionName = textField('a region name such as "CANADA-1"').transform((value) => value.toUpperCase());
const regionList = z.array(regionName).min(1, { message: "expected at least one region" }).readonly();

const settingsObject = machineSettingsObject<(vm: HyperstackVmAddresses) => HyperstackSshMapping>()(
  "https://infrahub-api.nexgencloud.com/v1",
  {
    /** Where VMs may go: a region (`"CANADA-1"`) or several; a spec's `region` narrows it. Default: every region. */
    region: z
      .union([regionName, regionList], {
        error: 'expected a region name such as "CANADA-1", or a list of them',
      })
      .optional(),
    /** The OS image's name. Default: the newest Ubuntu image with CUDA in the region (else the newest Ubuntu). */
    image: textField("an image name").optional(),
    /** The login user of the image. Default `"ubuntu"` (with passwordless sudo), as on Hyperstack's images. */
    sshUser: sshUserSchema("ubuntu"),
  },
);

/** The settings schema: every field checked, unknown ones refused by name; `regions` is `region` as a list. */
export const settingsSchema = settingsObject.transform((parsed) => ({
  ...parsed,
  regions: parsed.region === undefined ? undefined : [parsed.region].flat(),
}));

/** Settings of the Hyperstack provider; every field is optional. */
export type HyperstackSettings = z.input<typeof settingsObject>;
/** The settings as parsed, defaults filled in. */
export type ParsedSettings = z.output<typeof settingsSchema>;
