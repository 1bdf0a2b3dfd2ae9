/**
 * The refusals marketplace GPU APIs word alike, as {@link errorTable} rules: no capacity for the machine
 * asked, a quota reached, an account that cannot pay. A provider's table lists what only its API says
 * first (a machine still being created, a bad image), then these.
 */
import type { MachineErrorRule } from "./error-table.js";

/** Capacity, quota and account refusals by their words: the union of what marketplace APIs answer. */
export const MARKET_REFUSALS: readonly MachineErrorRule[] = Object.freeze([
  {
    kind: "capacity",
    words:
      /stock|sold out|capacity|not.enough|(un|not |no )available|insufficient (gpu|resources)|no (gpus?|hosts?|resources?|inventory)/i,
  },
  { kind: "quota", words: /quota|limit (reached|exceeded)/i },
  { kind: "account", words: /balance|insufficient funds|payment/i },
]);
