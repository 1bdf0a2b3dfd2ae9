/**
 * The settings of the `Slurm` provider, validated with zod so that a wrong field is refused, by
 * name, before the login node is ever reached.
 */
import type { Accelerator } from "@skyward/core";
import { acceleratorSchema } from "@skyward/core/contract";
import { z } from "zod";

/** The login node: the only machine of the cluster the client connects to. */
export interface SlurmLoginInput {
  /** Its address or name. */
  host: string;
  /** SSH port. Default 22. */
  port?: number;
  /** Your user on the cluster. Default `root` (a test bed); set it for a real cluster. */
  user?: string;
  /** The private key itself (OpenSSH or PEM text). A secret: never logged. */
  privateKey?: string;
  /** Path of the private key file. */
  identityFile?: string;
  /** The login node's host key fingerprint, `SHA256:…`; without it the key is trusted on first use. */
  hostKeyFingerprint?: string;
}

/** Settings of the `Slurm` provider. */
export interface SlurmSettings {
  /** How to reach the login node over SSH. */
  login: SlurmLoginInput;
  /** The partition jobs go to (`--partition`). Default: the cluster's default partition. */
  partition?: string;
  /** The account jobs are charged to (`--account`). */
  account?: string;
  /** The quality of service (`--qos`). */
  qos?: string;
  /**
   * The job's time limit (`--time`): minutes, or Slurm's text (`"2:00:00"`, `"1-12:00:00"`). The
   * scheduler ends the allocation at this limit even when the client is gone: the hard TTL. Default:
   * the partition's default time.
   */
  timeLimit?: number | string;
  /** Environment modules loaded before the bootstrap and the worker (`module load cuda/12.4`). */
  modules?: readonly string[];
  /**
   * A directory on the filesystem the login and compute nodes share (home or project), as they see
   * it: Skyward's environment is built there once, on one node, for all of a pool's nodes. Default:
   * `.skyward` in your home directory on the cluster.
   */
  sharedDirectory?: string;
  /**
   * A directory on each compute node's own disk (`/tmp`, `/scratch/local`), for clusters whose shared
   * filesystem is too slow or too small for a Python environment: the environment is then built on
   * every node, each in its own copy of this directory, instead of once in `sharedDirectory` (which
   * still holds the pool's staged files, scripts and logs). Removed from the nodes the pool gives back.
   */
  nodeLocalDirectory?: string;
  /**
   * What the cluster's GPUs are, for GRES without a type (`gpu:4` rather than `gpu:a100:4`): a
   * spec's accelerator is matched against it. Typed GRES name their accelerator themselves.
   */
  accelerator?: Accelerator;
  /**
   * What an hour of one node costs you, USD, for chargeback, `pool.cost()` and budgets: one rate for
   * every partition, or one per partition name. Default 0: a cluster you own is free to Skyward.
   */
  ratePerHour?: number | Readonly<Record<string, number>>;
  /** Extra `sbatch` options your site requires (`--constraint=…`, `--reservation=…`), each one word. */
  sbatchOptions?: readonly string[];
}

const slurmName = (what: string) =>
  z
    .string({ error: `expected a ${what} name` })
    .regex(/^[A-Za-z0-9_.+-]+$/, { message: `expected a ${what} name (letters, digits, _ . + -)` });

const rate = z
  .number({ error: "expected a rate in USD per node-hour, >= 0" })
  .min(0, { message: "expected a rate in USD per node-hour, >= 0" })
  .refine(Number.isFinite, { message: "expected a rate in USD per node-hour, >= 0" });

const loginSchema = z
  .strictObject({
    host: z
      .string({ error: "expected a host name or address" })
      .min(1, { message: "expected a host name or address" }),
    port: z.number().int().min(1).max(65_535, { message: "expected a port from 1 to 65535" }).default(22),
    user: z.string().min(1, { message: "expected a user name" }).default("root"),
    privateKey: z.string().min(1, { message: "expected the private key's text" }).optional(),
    identityFile: z.string().min(1, { message: "expected the private key's path" }).optional(),
    hostKeyFingerprint: z
      .string()
      .regex(/^SHA256:[A-Za-z0-9+/]{43}=?$/, {
        message: 'expected a fingerprint like "SHA256:…" as ssh-keygen -l prints it',
      })
      .optional(),
  })
  .superRefine((value, context) => {
    if (value.privateKey === undefined && value.identityFile === undefined)
      context.addIssue({
        code: "custom",
        path: ["privateKey"],
        message: "expected privateKey or identityFile",
      });
  });

const absoluteDirectory = z.string().refine((value) => value.startsWith("/") && value !== "/", {
  message: "expected an absolute directory other than /",
});

/** `--time`'s forms: minutes, `MM:SS`, `HH:MM:SS`, `D-HH`, `D-HH:MM`, `D-HH:MM:SS`. */
const TIME_PATTERN = /^(\d+-\d{1,2}(:\d{2}){0,2}|\d+(:\d{2}){0,2})$/;

export const settingsSchema = z.strictObject({
  login: loginSchema,
  partition: slurmName("partition").optional(),
  account: slurmName("account").optional(),
  qos: slurmName("QoS").optional(),
  timeLimit: z
    .union([
      z.number().int({ message: "expected whole minutes" }).positive({ message: "expected minutes > 0" }),
      z
        .string()
        .regex(TIME_PATTERN, { message: 'expected minutes or Slurm\'s time ("2:00:00", "1-12:00:00")' }),
    ])
    .optional(),
  modules: z
    .array(z.string().regex(/^[A-Za-z0-9_./+-]+$/, { message: "expected a module name such as cuda/12.4" }))
    .default([]),
  sharedDirectory: absoluteDirectory.optional(),
  nodeLocalDirectory: absoluteDirectory.optional(),
  accelerator: acceleratorSchema.optional(),
  ratePerHour: z.union([rate, z.record(z.string(), rate)]).default(0),
  sbatchOptions: z
    .array(
      z.string().regex(/^--?[A-Za-z][A-Za-z0-9-]*(=\S+)?$/, {
        message: "expected one sbatch option such as --constraint=a100",
      }),
    )
    .default([]),
});

/** The settings as validated. */
export type SlurmDeclared = z.output<typeof settingsSchema>;

/** The hourly rate of one node of `partition`. */
export function rateOf(declared: SlurmDeclared, partition: string): number {
  const rates = declared.ratePerHour;
  return typeof rates === "number" ? rates : (rates[partition] ?? 0);
}
