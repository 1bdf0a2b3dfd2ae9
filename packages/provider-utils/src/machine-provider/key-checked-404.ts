/**
 * For an API that answers a key it does not know with HTTP 404 on every endpoint: a 404 met before the
 * key was ever accepted is checked against the key first (a call that needs nothing but the key). Refused
 * there too (401, 403 or 404), it is the rejected key it is — an `auth` error saying so — not a gone
 * machine or "no capacity"; accepted, the 404 means what it says, and from then on without a check.
 */
import type { JsonSend } from "../http/json-calls.js";
import type { MachineApiErrorClass } from "./machine-api.js";

/** What {@link keyCheckedOn404} is given. */
export interface KeyCheckOptions {
  /** The provider's error class: its errors are the ones read. */
  readonly ApiError: MachineApiErrorClass;
  /** The URL that answers any accepted key (the account's own record). */
  readonly url: string;
  /** The message of a rejected key, for the call made `while <purpose>`. */
  readonly rejected: (purpose: string) => string;
}

/** A `send` wrapper (`MachineJsonClientOptions.send`) checking a 404 against the key; see the module comment. */
export function keyCheckedOn404(options: KeyCheckOptions): (paced: JsonSend) => JsonSend {
  const { ApiError } = options;
  let keyAccepted = false;
  return (paced) => async (request, endpoint) => {
    try {
      return await paced(request, endpoint);
    } catch (error) {
      if (keyAccepted || !ApiError.isInstance(error) || error.statusCode !== 404) throw error;
      const check = { method: "GET", url: options.url, idempotent: true, signal: request.signal } as const;
      try {
        await paced({ ...check, purpose: "checking the API key" });
      } catch (keyError) {
        if (!ApiError.isInstance(keyError) || ![401, 403, 404].includes(keyError.statusCode ?? 0))
          throw keyError;
        throw new ApiError({ kind: "auth", statusCode: 401, message: options.rejected(request.purpose) });
      }
      keyAccepted = true;
      throw error;
    }
  };
}
