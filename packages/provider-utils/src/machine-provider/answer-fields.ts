/**
 * Fields of an API's answer that a schema lists by the dozen, declared by name: numbers the API may
 * send as numbers or numeric strings (or leave out), and texts it may leave out or send as null. A
 * provider's schema then names each field once instead of repeating its zod chain per line.
 */
import { z } from "zod";
import { answerNumberSchema } from "../http/provider-http.js";

const optionalNumber = answerNumberSchema.optional();
const optionalText = z.string().nullish();

/** Each key an optional number ({@link answerNumberSchema}: the finite number, else null). */
export function answerNumbers<const Keys extends readonly string[]>(
  ...keys: Keys
): { [Key in Keys[number]]: typeof optionalNumber } {
  return Object.fromEntries(keys.map((key) => [key, optionalNumber])) as {
    [Key in Keys[number]]: typeof optionalNumber;
  };
}

/** Each key an optional text: a string, or null or absent. */
export function answerTexts<const Keys extends readonly string[]>(
  ...keys: Keys
): { [Key in Keys[number]]: typeof optionalText } {
  return Object.fromEntries(keys.map((key) => [key, optionalText])) as {
    [Key in Keys[number]]: typeof optionalText;
  };
}
