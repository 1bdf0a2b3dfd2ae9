/**
 * What the benches' test-bed workers take from the client's environment: Local workers inherit it,
 * SSH workers start from their own login, so a setting compared across runs goes in the image.
 */

/** The client's `SKYWARD_COLLECTIONS_SPIN_US` (the collections' spin before blocking), when set. */
export function collectionsSpinEnv(): Record<string, string> {
  const value = process.env.SKYWARD_COLLECTIONS_SPIN_US;
  return value === undefined ? {} : { SKYWARD_COLLECTIONS_SPIN_US: value };
}
