/**
 * The settings of the GCP provider: what `GCP(settings)` and `skyward.toml`'s `[providers.x]` table
 * (`type = "gcp"`) accept, validated with zod into {@link ResolvedGcpSettings}.
 */
import { parseInput } from "@skyward/core/contract";
import { keysDirectorySchema, type SshStandIn } from "@skyward/provider-utils";
import { z } from "zod";

/** What the {@link GcpSettings.sshAddress} test seam receives: the VM as Compute Engine describes it. */
export interface GcpInstanceAddresses {
  /** The VM's name (Skyward's instance id). */
  readonly id: string;
  /** Its external IPv4 address (`accessConfigs[0].natIP`), or null. */
  readonly publicIp: string | null;
  /** Its internal IPv4 address (`networkIP`), or null. */
  readonly privateIp: string | null;
}

/**
 * What the {@link GcpSettings.sshAddress} test seam returns: where the pool reaches the VM instead,
 * and anything else the stand-in host needs.
 */
export interface GcpSshAddressMapping extends SshStandIn {
  /** The address other nodes reach the stand-in host on; default the VM's internal address. */
  readonly privateIp?: string;
  /**
   * The metadata server the worker on the stand-in host polls for preemption and host-maintenance
   * notices (a fake one: `@skyward/testing`'s `startFakeGceMetadata`). Default none: a stand-in host
   * never reads the real metadata server, so it gets no notices.
   */
  readonly metadataEndpoint?: string;
}

/** Settings of {@link GCP}. Every field is optional. */
export interface GcpSettings {
  /**
   * The Google Cloud project. Default: `GOOGLE_CLOUD_PROJECT`, `GCLOUD_PROJECT` or
   * `CLOUDSDK_CORE_PROJECT` from the environment, else the `project_id` of the credentials file.
   */
  project?: string;
  /** The zone VMs run in when the spec names no region. Default `us-central1-a`. */
  zone?: string;
  /**
   * A service-account key file (JSON). Default: Application Default Credentials
   * (`GOOGLE_APPLICATION_CREDENTIALS`, `gcloud auth application-default login`, the metadata server).
   */
  credentialsFile?: string;
  /**
   * An OAuth 2 access token (`gcloud auth print-access-token`) used as is, instead of credentials.
   * Default: the `GOOGLE_OAUTH_ACCESS_TOKEN` environment variable when set. A secret: never logged.
   */
  accessToken?: string;
  /** The Compute Engine API's address. Default `https://compute.googleapis.com`. */
  apiEndpoint?: string;
  /** The Cloud Billing API's address (prices). Default `https://cloudbilling.googleapis.com`. */
  billingEndpoint?: string;
  /** The IAM API's address (the service-account check). Default `https://iam.googleapis.com`. */
  iamEndpoint?: string;
  /** The Resource Manager API's address (the OS Login policy check). Default `https://cloudresourcemanager.googleapis.com`. */
  resourceManagerEndpoint?: string;
  /** The VPC network. Default `default`. */
  network?: string;
  /** A subnetwork of the network (name or `regions/R/subnetworks/S`). Default: the network's own. */
  subnetwork?: string;
  /**
   * The boot image (`projects/P/global/images/NAME` or `…/images/family/FAMILY`). Default: Ubuntu
   * 22.04 LTS for CPU VMs, a Deep Learning VM image with the NVIDIA driver and CUDA for GPU VMs.
   */
  image?: string;
  /** The login user, created by the guest agent from the `ssh-keys` metadata. Default `skyward`. */
  sshUser?: string;
  /** Skyward's directory on each VM. Default `/opt/skyward`. */
  root?: string;
  /** Boot disk size, GB; a spec's `diskGb` raises it. Default 100. */
  diskGb?: number;
  /**
   * Boot disk type (`pd-balanced`, `pd-ssd`, `pd-standard`, `pd-extreme`, `hyperdisk-balanced`).
   * Default `pd-balanced`, and `hyperdisk-balanced` for the series that boot from Hyperdisk only
   * (C4, C4A, C4D, N4, H3, M4, X4, A3 Ultra, A4, G4), which refuse Persistent Disk.
   */
  diskType?: string;
  /**
   * Compute Engine's own guard, in seconds: every VM is created with `scheduling.maxRunDuration` and
   * `instanceTerminationAction: DELETE`, so Compute Engine deletes it that long after it started —
   * even when the client and the VM's own watchdog are gone, or its service account may not delete
   * it. A hard limit on a node's life, not the pool's `ttl` (which counts from when the client lets
   * go): set it above your longest run. 30 s to 120 days; default none
   * (https://cloud.google.com/compute/docs/instances/limit-vm-runtime).
   */
  maxRunDuration?: number;
  /**
   * The service account VMs run as (its email), with the `cloud-platform` scope: the on-node TTL
   * self-destruct deletes the VM with it. Default `default` (the project's Compute Engine account).
   */
  serviceAccount?: string;
  /** Where the SSH key pair is kept. Default `$SKYWARD_HOME/keys` (`~/.skyward/keys`). */
  keysDirectory?: string;
  /**
   * FOR TESTS ONLY. Maps a VM to the SSH address the pool uses instead of its own, so a provider
   * driven against a fake Compute Engine reaches real SSH hosts (a test bed). Never set it against
   * real Google Cloud.
   */
  sshAddress?: (instance: GcpInstanceAddresses) => GcpSshAddressMapping;
}

const ZONE = /^[a-z]+-[a-z]+\d+-[a-z]$/;

const text = (what: string) =>
  z.string({ error: `expected ${what}` }).min(1, { message: `expected ${what}` });

const endpoint = (example: string) =>
  z
    .url({ error: `expected a URL such as "${example}"` })
    .refine((value) => /^https?:\/\//.test(value), { message: `expected a URL such as "${example}"` });

const settingsSchema = z.strictObject({
  project: z
    .string({ error: 'expected a project id such as "my-project-123"' })
    .regex(/^[a-z][a-z0-9-]{4,28}[a-z0-9]$|^[a-z0-9.-]+:[a-z][a-z0-9-]{4,28}[a-z0-9]$/, {
      message: 'expected a project id such as "my-project-123"',
    })
    .optional(),
  zone: z
    .string({ error: 'expected a zone such as "us-central1-a"' })
    .regex(ZONE, { message: 'expected a zone such as "us-central1-a"' })
    .default("us-central1-a"),
  credentialsFile: text("the path of a service-account key file").optional(),
  accessToken: text("an OAuth 2 access token").optional(),
  apiEndpoint: endpoint("https://compute.googleapis.com").optional(),
  billingEndpoint: endpoint("https://cloudbilling.googleapis.com").optional(),
  iamEndpoint: endpoint("https://iam.googleapis.com").optional(),
  resourceManagerEndpoint: endpoint("https://cloudresourcemanager.googleapis.com").optional(),
  network: text("a network name").default("default"),
  subnetwork: text("a subnetwork name").optional(),
  image: z
    .string({
      error: 'expected an image such as "projects/ubuntu-os-cloud/global/images/family/ubuntu-2204-lts"',
    })
    .regex(/^(https:\/\/www\.googleapis\.com\/compute\/v1\/)?projects\/[^/]+\/global\/images\/.+$/, {
      message: 'expected an image such as "projects/ubuntu-os-cloud/global/images/family/ubuntu-2204-lts"',
    })
    .optional(),
  sshUser: z
    .string({ error: "expected a user name (lower-case letters, digits, _ and -)" })
    .regex(/^[a-z_][a-z0-9_-]{0,31}$/, {
      message: "expected a user name (lower-case letters, digits, _ and -)",
    })
    .default("skyward"),
  root: z
    .string({ error: "expected an absolute directory other than /" })
    .refine((value) => value.startsWith("/") && value.replace(/\/+$/, "") !== "", {
      message: "expected an absolute directory other than /",
    })
    .default("/opt/skyward"),
  diskGb: z
    .number({ error: "expected the disk size in GB as a whole number" })
    .int({ message: "expected the disk size in GB as a whole number" })
    .min(10, { message: "expected at least 10 GB" })
    .default(100),
  diskType: z
    .enum(["pd-balanced", "pd-ssd", "pd-standard", "pd-extreme", "hyperdisk-balanced"], {
      error: 'expected one of "pd-balanced", "pd-ssd", "pd-standard", "pd-extreme", "hyperdisk-balanced"',
    })
    .optional(),
  maxRunDuration: z
    .number({ error: "expected seconds as a whole number from 30 to 10368000 (120 days)" })
    .int({ message: "expected seconds as a whole number from 30 to 10368000 (120 days)" })
    .min(30, { message: "expected seconds as a whole number from 30 to 10368000 (120 days)" })
    .max(10_368_000, { message: "expected seconds as a whole number from 30 to 10368000 (120 days)" })
    .optional(),
  serviceAccount: text('a service account email or "default"').default("default"),
  keysDirectory: keysDirectorySchema,
  sshAddress: z
    .custom<(instance: GcpInstanceAddresses) => GcpSshAddressMapping>(
      (value) => typeof value === "function",
      {
        message: "expected a function (for tests only)",
      },
    )
    .optional(),
});

/** {@link GcpSettings} after validation, defaults applied. */
export type ResolvedGcpSettings = Readonly<z.output<typeof settingsSchema>>;

/** True for a zone name (`us-central1-a`), false for a region (`us-central1`). */
export function isZone(location: string): boolean {
  return ZONE.test(location);
}

/**
 * Validates settings, throwing `ConfigurationError` with paths such as `GCP.zone` (or, from
 * `skyward.toml`, relative ones the config loader prefixes with the provider's table). Messages
 * never echo a value: it may be a secret in the wrong field.
 */
export function resolveGcpSettings(input: unknown, prefix = "GCP"): ResolvedGcpSettings {
  const value = parseInput(settingsSchema, input ?? {}, prefix);
  return Object.freeze({ ...value, root: value.root.replace(/\/+$/, "") });
}
