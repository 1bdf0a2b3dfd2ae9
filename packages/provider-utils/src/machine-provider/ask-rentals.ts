/**
 * Renting on a marketplace whose asks (one host's offer each) rent once: a node rents the cluster's own
 * ask first, then those a search for the same spec finds, each at its own price checked against the
 * cap, never one its cluster rented or was refused before. A refusal (capacity, gone, price) moves on
 * to the next ask. A rent whose answer was lost (unavailable, unknown answer) is looked for by the
 * machine's name; not listed yet, its error goes to the base, which retries — and while such a rent is
 * unsettled, a later refusal is thrown too rather than moving on: the lost rent may be what took the
 * ask, and renting another would make a second machine billing unseen.
 */
import { type MachineErrorKind, machineErrorKind } from "./errors.js";

/** An ask as {@link askRentals} sees it: its id and its price in the market asked. */
export interface RentableAsk {
  readonly id: number;
  readonly price: number | null;
}

/** One rent: the machine's name, its market, the cap, where the asks come from, and how one is rented. */
export interface AskRent<Ask extends RentableAsk> {
  readonly cluster: string;
  readonly name: string;
  /** The market, for the refusals' lines (`"bid"`, `"on-demand"`). */
  readonly market: string;
  readonly maxHourlyCost: number | undefined;
  /** The asks in order of preference, each list asked for only when those before it are spent. */
  readonly asks: readonly (() => Promise<readonly Ask[]>)[];
  /** Rents `ask`; the machine's id. */
  readonly rent: (ask: Ask) => Promise<number>;
  /** The id of the machine named `name` if listed (a rent whose answer was lost). */
  readonly findLost: () => Promise<number | undefined>;
  /** Removes what a refusal left (a machine created stopped): the note to its line; undefined when it left nothing. */
  readonly cleanUp?: (error: unknown, kind: MachineErrorKind) => Promise<string | undefined>;
  /** The error when no ask rented, its message the refusals met. */
  readonly noAsk: (message: string) => Error;
  readonly label: string;
  readonly signal: AbortSignal;
}

/** The asks each cluster rented, and the names of rents whose answer was lost; see the module comment. */
export function askRentals() {
  const rentedAsks = new Map<string, Set<number>>();
  /** Names of rents whose answer was lost and that no list showed yet, with their cluster. */
  const unsettled = new Map<string, string>();

  async function rent<Ask extends RentableAsk>(options: AskRent<Ask>) {
    const { name, market, maxHourlyCost: cap, signal } = options;
    const rented = rentedAsks.get(options.cluster) ?? new Set<number>();
    rentedAsks.set(options.cluster, rented);
    const refusals: string[] = [];
    const tried = new Set<number>();
    for (const asks of options.asks)
      for (const ask of await asks()) {
        const { price } = ask;
        if (rented.has(ask.id) || tried.has(ask.id) || price === null) continue;
        tried.add(ask.id);
        if (cap !== undefined && price > cap) {
          refusals.push(`${market} on offer ${ask.id}: $${price}/h is over maxHourlyCost $${cap}/h`);
          continue;
        }
        let id: number | undefined;
        try {
          id = await options.rent(ask);
        } catch (error) {
          if (signal.aborted) throw signal.reason;
          const kind = machineErrorKind(error);
          if (kind === "unavailable" || kind === "unknown-answer") {
            id = await options.findLost();
            if (id === undefined) {
              unsettled.set(name, options.cluster);
              throw error;
            }
          } else if (kind === "capacity" || kind === "gone" || kind === "price") {
            const note = await options.cleanUp?.(error, kind);
            if (note === undefined) rented.add(ask.id); // Taken by someone else, or gone: not asked again.
            if (unsettled.delete(name)) throw error;
            refusals.push(`${market} on offer ${ask.id}: ${(error as Error).message}${note ?? ""}`);
            continue;
          } else throw error;
        }
        rented.add(ask.id);
        unsettled.delete(name);
        return { id, ask, price };
      }
    throw options.noAsk(
      refusals.length > 0 ? refusals.join("; ") : `${options.label} has no other ask of this kind to rent`,
    );
  }

  return {
    rent,
    /** Forgets a cluster torn down. */
    forget(cluster: string) {
      rentedAsks.delete(cluster);
      for (const [name, owner] of unsettled) if (owner === cluster) unsettled.delete(name);
    },
  };
}
