/**
 * Skyward's tags carried in a machine's name, for an API that keeps nothing else of ours (TensorDock):
 * `<cluster id>-<index>`, then `--<pool id>` when there is one (`skyward-1a2b3c4d-0--train`). One
 * codec writes the name, reads it back and is the adapter's {@link MachineTagCodec}.
 */
import type { Cluster } from "@skyward/core/contract";
import { skywardTags } from "../tags.js";
import type { MachineTagCodec } from "./adapter.js";

/** What a machine's name says, as {@link NameTagCodec.parse} reads it. */
export interface NameTags {
  readonly cluster: string;
  readonly index: number;
  /** The pool id as the name keeps it (see {@link poolNamePart}); undefined when the name has none. */
  readonly pool: string | undefined;
}

/** The pool id as a name may carry it: letters, digits, `_` and `-`, at most 24 of them. */
export function poolNamePart(poolId: string): string {
  return poolId.replace(/[^A-Za-z0-9_-]/g, "").slice(0, 24);
}

/** What {@link nameTagCodec} is given. */
export interface NameTagCodecOptions<Machine> {
  /** The cluster id prefix (`"skyward"`); default `"skyward"`. */
  readonly prefix?: string;
  /** The machine's name as the API shows it. */
  readonly nameOf: (machine: Machine) => string | null | undefined;
  /** Tags beside those of the name (the offer the machine's resources say), for a machine the name marks as ours. */
  readonly extra?: (machine: Machine, parsed: NameTags) => Readonly<Record<string, string>>;
}

/** The tag codec of names, with the parser of a name. */
export interface NameTagCodec<Machine> extends MachineTagCodec<Machine> {
  /** What `name` says; undefined for a name not written by {@link MachineTagCodec.name}. */
  parse(name: string | null | undefined): NameTags | undefined;
}

/** A tag codec keeping the cluster, index and pool in the machine's name; see the module comment. */
export function nameTagCodec<Machine>(options: NameTagCodecOptions<Machine>): NameTagCodec<Machine> {
  const pattern = new RegExp(`^(${options.prefix ?? "skyward"}-[0-9a-f]{8})-(\\d+)(?:--([A-Za-z0-9_-]+))?$`);
  const parse = (name: string | null | undefined): NameTags | undefined => {
    const match = pattern.exec(name ?? "");
    return match?.[1] ? { cluster: match[1], index: Number(match[2]), pool: match[3] } : undefined;
  };
  return {
    parse,
    name(cluster: Pick<Cluster, "id" | "poolId">, index: number) {
      const pool = poolNamePart(cluster.poolId);
      return `${cluster.id}-${index}${pool ? `--${pool}` : ""}`;
    },
    nameOf: (machine) => options.nameOf(machine) || undefined,
    read(machine) {
      const parsed = parse(options.nameOf(machine));
      if (!parsed) return {};
      return {
        ...skywardTags({ cluster: parsed.cluster, pool: parsed.pool }),
        ...options.extra?.(machine, parsed),
      };
    },
  };
}
