/**
 * Fields of an API's answer that a schema lists by the dozen, declared by name: numbers the API may
 * send as numbers or numeric strings (or leave out), and texts it may leave out or send as null —
 * kept optional, or read with a default (`""` for a text, `null` for a number). A provider's schema
 * then names each field once instead of repeating its zod chain per line.
 */
import { z } from "zod";
import { answerNumberSchema, answerTextSchema } from "../http/provider-http.js";

const optionalNumber = answerNumberSchema.optional();
const optionalText = z.string().nullish();

/** The keys given, each read by `schema`. */
function fieldsOf<Schema>(schema: Schema) {
  return <const Keys extends readonly string[]>(...keys: Keys): { [Key in Keys[number]]: Schema } =>
    Object.fromEntries(keys.map((key) => [key, schema])) as { [Key in Keys[number]]: Schema };
}

/** Each key an optional number ({@link answerNumberSchema}: the finite number, else null). */
export const answerNumbers = fieldsOf(optionalNumber);

/** Each key an optional text: a string, or null or absent. */
export const answerTexts = fieldsOf(optionalText);

/** Each key a text: absent or null is `""` ({@link answerTextSchema}). */
export const answerTextFields = fieldsOf(answerTextSchema);

/** Each key a number (or a numeric string): absent, null or not a finite number is `null`. */
export const answerNumberFields = fieldsOf(answerNumberSchema);
