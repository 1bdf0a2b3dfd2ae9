/** The Verda provider's settings: the schema is their only declaration, checked by name before anything is asked of the API. */
import {
  type MachineSettingsShape,
  machineSettingsShape,
  type SshStandIn,
  wholeNumberField,
} from "@skyward/provider-utils";
import { z } from "zod";
import { VERDA_API_URL } from "./verda-api.js";

/** Where an instance is reached instead of its own address: see {@link VerdaSettings} `sshAddress` (user default `root`). */
export type VerdaSshAddress = SshStandIn;

type VerdaSeam = (instance: { readonly id: string; readonly ip: string }) => VerdaSshAddress;
// Verda signs in with a client id and secret: no API key. Typed by name, so its TSDoc is published.
const { apiKey: _apiKey, ...machineFields } = machineSettingsShape<VerdaSeam>(VERDA_API_URL);
const machineShape: Omit<MachineSettingsShape<VerdaSeam>, "apiKey"> = machineFields;

const verdaShape = {
  /** The API client id. Default: the `VERDA_CLIENT_ID` environment variable, read on the first API call. */
  clientId: z.string().min(1, { message: "expected a non-empty client id" }).optional(),
  /** The API client secret. Default: the `VERDA_CLIENT_SECRET` environment variable. A secret: never logged. */
  clientSecret: z.string().min(1, { message: "expected a non-empty client secret" }).optional(),
  /** The location instances are deployed in (`FIN-01`); a spec's `region` does the same. Default: any location with capacity. */
  location: z.string().min(1, { message: "expected a location code like FIN-01" }).optional(),
  /** The OS image of every instance, verbatim (`ubuntu-24.04-cuda-12.8-open-docker`). Default: see the README's OS images. */
  image: z.string().min(1, { message: "expected an OS image name" }).optional(),
  /** The CUDA version of the default GPU image (`ubuntu-24.04-cuda-<cuda>-open`). Default `"13.0"`, as in the Python project. */
  cuda: z
    .string()
    .regex(/^\d{1,2}\.\d{1,2}$/, { message: 'expected a CUDA version like "12.8"' })
    .default("13.0"),
  /** The OS volume size, GB; a spec's `diskGb` raises it. Default: Verda's size for the type (100 GB on spot, see the README). */
  osVolumeGb: wholeNumberField("the OS volume size in GB").min(1).optional(),
};

/** Every field checked, unknown ones refused by name (the schema's type written out keeps each key's TSDoc published). */
export const settingsSchema: z.ZodObject<typeof machineShape & typeof verdaShape, z.core.$strict> =
  z.strictObject({ ...machineShape, ...verdaShape });

/** Settings of the Verda provider; every field is optional. Between deletes Verda refused for now, five times `retryDelayMs` passes. */
export type VerdaSettings = z.input<typeof settingsSchema>;

/** The settings as parsed, defaults filled in. */
export type ParsedSettings = z.output<typeof settingsSchema>;
