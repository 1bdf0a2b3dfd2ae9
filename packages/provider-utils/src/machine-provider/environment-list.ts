/**
 * A container's environment as the APIs that take it as a list of `{key, value}` pairs write it
 * (Novita's `envs`, RunPod's GraphQL `env`): made from a record and read back as one, so that the
 * variables (Skyward's tags among them) are handled as a record whatever the API's shape.
 */

/** One environment variable, as such an API writes it. */
export interface EnvironmentEntry {
  readonly key: string;
  readonly value: string;
}

/** `{ A: "1" }` as `[{ key: "A", value: "1" }]`, in the record's order. */
export function environmentList(variables: Readonly<Record<string, string>>): EnvironmentEntry[] {
  return Object.entries(variables).map(([key, value]) => ({ key, value }));
}

/** The list as a record, a repeated key's last value winning; none (null or absent) is empty. */
export function environmentRecord(
  entries: readonly EnvironmentEntry[] | null | undefined,
): Record<string, string> {
  return Object.fromEntries((entries ?? []).map(({ key, value }) => [key, value]));
}
