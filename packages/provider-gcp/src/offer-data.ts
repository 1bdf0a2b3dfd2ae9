/** What the GCP provider keeps in an offer's and a cluster's `specific`. Holds no secret. */

/** What an offer of this provider carries in {@link Offer.specific}. */
export interface GcpOfferData {
  /** The zone. */
  readonly zone: string;
  /** The machine type (`n1-standard-4`, `g2-standard-8`). */
  readonly machineType: string;
  /** An accelerator type attached to the VM (`nvidia-tesla-t4`), or null (none, or built into the machine type). */
  readonly acceleratorType: string | null;
  /** How many of {@link GcpOfferData.acceleratorType}. */
  readonly acceleratorCount: number;
  /** Whether the VM has GPUs (attached or built in): it must then stop, not migrate, on host maintenance. */
  readonly gpu: boolean;
  /** The GPUs' accelerator type, attached or built in (`nvidia-l4` of `g2-standard-4`), or null: its quotas. */
  readonly gpuType: string | null;
  /** How many GPUs a VM has. */
  readonly gpuCount: number;
}

/** What the GCP provider keeps per cluster ({@link Cluster.specific}). Holds no secret. */
export interface GcpClusterData {
  /** The project. */
  readonly project: string;
  /** The zone every VM runs in. */
  readonly zone: string;
  /** The network tag on every VM, which the pool's firewall rules target. */
  readonly networkTag: string;
  /** The pool's firewall rules (created by `prepare`, removed by `teardown`). */
  readonly firewallRules: readonly string[];
  /** The public key put in the VMs' `ssh-keys` metadata. */
  readonly publicKey: string;
  /** The private key's 0600 file on this machine. */
  readonly identityFile: string;
  /** The boot image. */
  readonly image: string;
  /** The boot disk size, GB. */
  readonly diskGb: number;
  /** Skyward's tags of this cluster. */
  readonly tags: Readonly<Record<string, string>>;
}
