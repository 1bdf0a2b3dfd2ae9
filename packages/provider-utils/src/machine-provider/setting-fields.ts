/**
 * Builders of the setting fields several providers' zod schemas repeat, each with the message a user
 * acts on. A provider's schema is the only declaration of its settings (its public type is
 * `z.input<typeof settingsSchema>`), so these carry the checks, and the TSDoc goes on the schema's key.
 */
import { z } from "zod";

/** A whole number: `expected <what> as a whole number` for a non-number and for a fraction alike. */
export function wholeNumberField(what: string) {
  return z
    .number({ error: `expected ${what} as a whole number` })
    .int({ message: `expected ${what} as a whole number` });
}

/** A non-empty string: `expected <what>` for an empty string and for a value of another type alike. */
export function textField(what: string) {
  return z.string({ error: `expected ${what}` }).min(1, { message: `expected ${what}` });
}

/** An absolute path (`/workspace`): `expected an absolute path` otherwise. */
export function absolutePathField() {
  return z.string().refine((value) => value.startsWith("/"), { message: "expected an absolute path" });
}

/**
 * An absolute path a boot script may write unquoted (`/opt/skyward`): no quotes, spaces, `$` or
 * backslashes, apart from the `{id}` placeholder a provider replaces with the machine's id.
 */
export function shellSafePathField() {
  return z
    .string()
    .refine((value) => value.startsWith("/") && !/['"\\$`\s]/.test(value.replaceAll("{id}", "")), {
      message: "expected an absolute path without quotes, spaces or $",
    });
}

/** A list of at least one `item`: `expected at least one <what>` for an empty list. */
export function nonEmptyListField<Item extends z.ZodType>(item: Item, what: string) {
  return z.array(item).min(1, { message: `expected at least one ${what}` });
}

/** Milliseconds, zero or more: `expected milliseconds >= 0` otherwise. */
export function millisecondsField() {
  return z.number().min(0, { message: "expected milliseconds >= 0" });
}
