/** The Novita provider's settings: the schema is their only declaration, checked by name before anything is asked of the API. */
import { containerImageSchema } from "@skyward/core/contract";
import {
  environmentVariablesSchema,
  httpSettingsShape,
  type MachineEndpointAddress,
  machineSettingsShape,
  type SshStandIn,
  wholeNumberField,
} from "@skyward/provider-utils";
import { z } from "zod";
import { NOVITA_API_URL } from "./novita-api.js";

/** The image instances run when none is set, as in the Python project: CUDA 12.9 runtime on Ubuntu 24.04. */
export const DEFAULT_NOVITA_IMAGE = "nvcr.io/nvidia/cuda:12.9.1-runtime-ubuntu24.04";

/** Where an instance is reached instead of its own address: see {@link NovitaSettings} `sshAddress` (user default `root`). */
export type NovitaSshAddress = SshStandIn;

type NovitaSeam = (instance: { readonly id: string } & MachineEndpointAddress) => NovitaSshAddress;
const machineShape = machineSettingsShape<NovitaSeam>(NOVITA_API_URL);

const novitaShape = {
  /** The API key. Default: the `NOVITA_API_KEY` environment variable, read on the first API call. A secret: never logged. */
  apiKey: httpSettingsShape.apiKey,
  /** The cluster (region) instances are created in; a spec's `region` does the same. Default: any, Novita's choice. */
  clusterId: z.string().min(1, { message: "expected a cluster id" }).optional(),
  /** The container image, a tag or a `DockerImage` (`sky.containers.cuda("12.8")`), with a shell. Default {@link DEFAULT_NOVITA_IMAGE}. */
  dockerImage: containerImageSchema.default(DEFAULT_NOVITA_IMAGE),
  /** The root filesystem, GB (10–6144, and at most the product's `maxRootFS`); a spec's `diskGb` raises it. Default 50, as in the Python project. */
  rootfsSize: wholeNumberField("the root filesystem size in GB")
    .min(10, { message: "expected at least 10 GB" })
    .max(6144, { message: "expected at most 6144 GB" })
    .default(50),
  /** More environment variables for every instance. */
  env: environmentVariablesSchema.default({}),
};

/** Every field checked, unknown ones refused by name (the schema's type written out keeps each key's TSDoc published). */
export const settingsSchema: z.ZodObject<typeof machineShape & typeof novitaShape, z.core.$strict> =
  z.strictObject({ ...machineShape, ...novitaShape });

/** Settings of the Novita provider; every field is optional. */
export type NovitaSettings = z.input<typeof settingsSchema>;

/** The settings as parsed, defaults filled in. */
export type ParsedSettings = z.output<typeof settingsSchema>;
