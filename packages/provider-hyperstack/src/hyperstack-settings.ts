/**
 * The Hyperstack provider's settings: what a user may set, checked by name before anything is asked of
 * the API, and the test seam that puts a stand-in SSH host in a VM's place.
 */
import { parseInput } from "@skyward/core/contract";
import {
  type HttpSettings,
  httpSettingsShape,
  keysDirectorySchema,
  type SshStandIn,
} from "@skyward/provider-utils";
import { z } from "zod";
import { HYPERSTACK_API_URL } from "./hyperstack-api.js";

/** What the {@link HyperstackSettings.sshAddress} test seam receives: the VM as Hyperstack describes it. */
export interface HyperstackVmAddresses {
  /** The VM id. */
  readonly id: string;
  /** Its floating (public) IP. */
  readonly floatingIp: string;
  /** Its fixed (private) IP, or null. */
  readonly fixedIp: string | null;
}

/** What the {@link HyperstackSettings.sshAddress} test seam returns: the stand-in host, and the address peers reach it on (default the VM's fixed IP). */
export type HyperstackSshMapping = SshStandIn & { readonly privateIp?: string };

/** Settings of the Hyperstack provider; every field is optional. */
export interface HyperstackSettings extends HttpSettings {
  /** The API key. Default: the `HYPERSTACK_API_KEY` environment variable, read on the first API call. A secret: never logged. */
  apiKey?: string;
  /** The API root. Default `https://infrahub-api.nexgencloud.com/v1`. */
  apiUrl?: string;
  /** Where VMs may go: a region (`"CANADA-1"`) or several; a spec's `region` narrows it. Default: every region. */
  region?: string | readonly string[];
  /** The OS image's name. Default: the newest Ubuntu image with CUDA in the region (else the newest Ubuntu). */
  image?: string;
  /** The login user of the image. Default `"ubuntu"` (with passwordless sudo), as on Hyperstack's images. */
  sshUser?: string;
  /** Where the SSH key pair is kept. Default `$SKYWARD_HOME/keys` (`~/.skyward/keys`). */
  keysDirectory?: string;
  /**
   * For tests only: where the pool reaches a VM instead of its floating IP (a stand-in SSH host), and
   * what runs instead of its self-destruct.
   */
  sshAddress?: (vm: HyperstackVmAddresses) => HyperstackSshMapping;
}

const text = (what: string) =>
  z.string({ error: `expected ${what}` }).min(1, { message: `expected ${what}` });
const regionName = text('a region name such as "CANADA-1"').transform((value) => value.toUpperCase());

const settingsSchema = z.strictObject({
  ...httpSettingsShape,
  apiUrl: z
    .url({ error: "expected the API's base URL" })
    .transform((value) => value.replace(/\/+$/, ""))
    .default(HYPERSTACK_API_URL),
  region: z
    .union([regionName, z.array(regionName).min(1, { message: "expected at least one region" })], {
      error: 'expected a region name such as "CANADA-1", or a list of them',
    })
    .optional(),
  image: text("an image name").optional(),
  sshUser: z
    .string({ error: "expected a user name" })
    .regex(/^[a-z_][a-z0-9_-]*$/, { message: "expected a user name" })
    .default("ubuntu"),
  keysDirectory: keysDirectorySchema,
  sshAddress: z
    .custom<(vm: HyperstackVmAddresses) => HyperstackSshMapping>((value) => typeof value === "function", {
      message: "expected a function (for tests only)",
    })
    .optional(),
});

/** The settings as parsed, defaults filled in; `regions` is `region` as a list. */
export type ParsedSettings = z.output<typeof settingsSchema> & {
  readonly regions: readonly string[] | undefined;
};

/** Parses settings, or throws a `ConfigurationError` naming each bad field under `prefix`. */
export function parseSettings(settings: HyperstackSettings | undefined, prefix: string): ParsedSettings {
  const parsed = parseInput(settingsSchema, settings ?? {}, prefix);
  return { ...parsed, regions: parsed.region === undefined ? undefined : [parsed.region].flat() };
}
