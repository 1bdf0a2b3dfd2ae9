/**
 * A list answer's items parsed one by one, so that one machine in a shape not foreseen does not end the
 * list: it is kept as a smaller schema reads it (enough to find and delete it). An item even that
 * cannot read fails the whole answer, loudly: it could be a pool's machine that nothing would then find
 * or delete, and a list read as "none" would leave it billing.
 */
import { z } from "zod";
import { answerListSchema } from "../http/provider-http.js";

/**
 * The items of a list answer, each as `item` reads it, else as `fallback` does; an item neither reads
 * is an issue at `[index, field]` saying `message` (`"an instance without a numeric id"`).
 */
export function lenientItemsSchema<Item>(
  item: z.ZodType<Item>,
  fallback: z.ZodType<Item>,
  field: string,
  message: string,
) {
  return answerListSchema(z.unknown()).transform((items, context) =>
    items.flatMap((value, index): Item[] => {
      const parsed = item.safeParse(value);
      if (parsed.success) return [parsed.data];
      const kept = fallback.safeParse(value);
      if (kept.success) return [kept.data];
      context.addIssue({ code: "custom", path: [index, field], message });
      return [];
    }),
  );
}
