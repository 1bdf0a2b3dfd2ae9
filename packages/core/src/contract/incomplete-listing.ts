/**
 * What a provider's `listInstances` throws when it could ask only some of the places it looks in
 * (one region of several refused, or could not be reached): the instances it did find, with why the
 * rest is missing. The CLI acts on what was found — `skyward down` terminates it — and still reports
 * the provider as failed, rather than leaving every region's instances billing because one region
 * could not be asked.
 */
import { ProvisionError } from "../errors/errors.js";
import type { Instance } from "./provider-shapes.js";

const incompleteListingMarker = Symbol.for("skyward.error.incomplete-listing");

/** A listing of a provider's instances that misses some of the places it looks in. */
export class IncompleteListingError extends ProvisionError {
  /** The instances found where the provider could look. */
  readonly found: readonly Instance[];

  constructor(options: { provider: string; found: readonly Instance[]; message: string; cause?: unknown }) {
    super({ ...options, isRetryable: true });
    this.name = "IncompleteListingError";
    Object.defineProperty(this, incompleteListingMarker, { value: true });
    this.found = options.found;
  }

  /** True for this error from any copy of `@skyward/core`, unlike `instanceof`. */
  static override isInstance(error: unknown): error is IncompleteListingError {
    return (
      typeof error === "object" &&
      error !== null &&
      (error as Record<symbol, unknown>)[incompleteListingMarker] === true
    );
  }
}
