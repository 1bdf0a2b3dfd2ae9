/**
 * Fields of an API's answer declared by name with a default when the API leaves them out: texts read
 * as `""` ({@link answerTextSchema}) and numbers as `null` ({@link answerNumberSchema}), so a schema
 * names each field once instead of repeating the schema per line.
 */
import { answerNumberSchema, answerTextSchema } from "../http/provider-http.js";

/** Each key a text: absent or null is `""`. */
export function answerTextFields<const Keys extends readonly string[]>(
  ...keys: Keys
): { [Key in Keys[number]]: typeof answerTextSchema } {
  return Object.fromEntries(keys.map((key) => [key, answerTextSchema])) as {
    [Key in Keys[number]]: typeof answerTextSchema;
  };
}

/** Each key a number (or a numeric string): absent, null or not a finite number is `null`. */
export function answerNumberFields<const Keys extends readonly string[]>(
  ...keys: Keys
): { [Key in Keys[number]]: typeof answerNumberSchema } {
  return Object.fromEntries(keys.map((key) => [key, answerNumberSchema])) as {
    [Key in Keys[number]]: typeof answerNumberSchema;
  };
}
