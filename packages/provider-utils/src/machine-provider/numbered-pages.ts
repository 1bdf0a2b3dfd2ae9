/**
 * Lists paged by number (`page=1,2,…` and a page size, as Hyperstack and Verda page theirs), read to
 * the end: a list that is only partly read makes `skyward down` and `cleanup` miss what is past its
 * first page. The last page is the empty one, the one reaching the answer's total, or — when the
 * answer gives no total and the API documents it so (`shortPageEnds`) — one shorter than the page size.
 * A page of items all seen before (an API that ignores `page`) ends the list too; one still going after
 * 1000 pages is an API fault, never complete.
 */
import type { MachineApi } from "./machine-api.js";

/** One page as the API answered it. */
export interface NumberedPage<Item> {
  readonly items: readonly Item[];
  /** The number of items in the whole list, when the answer says. */
  readonly total?: number | null | undefined;
  /** The page size the API used (it may give fewer than asked), when the answer says. */
  readonly pageSize?: number | null | undefined;
}

/** The pages read at most before a list is called endless. */
const MOST_PAGES = 1000;

/** The page after `page` (of `asked` items a page), or undefined when `answer` is the last. */
export function nextNumberedPage(
  page: number,
  asked: number,
  answer: NumberedPage<unknown>,
  shortPageEnds = false,
): number | undefined {
  const items = answer.items.length;
  const size = answer.pageSize ?? asked;
  if (items === 0) return undefined;
  if (typeof answer.total === "number")
    return (page - 1) * size + items >= answer.total ? undefined : page + 1;
  return shortPageEnds && items < size ? undefined : page + 1;
}

/** Every item of a list, `read(page)` answering page `page` (from 1) of `asked` items. */
export async function readNumberedPages<Item>(options: {
  readonly api: MachineApi;
  /** What the list is, for the error of an endless one (`/core/environments`). */
  readonly list: string;
  readonly asked: number;
  /** Whether the API documents a page shorter than asked as the last (else only an empty one is). */
  readonly shortPageEnds?: boolean;
  readonly idOf: (item: Item) => string | number;
  readonly read: (page: number) => Promise<NumberedPage<Item>>;
}): Promise<Item[]> {
  const all = new Map<string | number, Item>();
  for (let page: number | undefined = 1; page !== undefined; ) {
    if (page > MOST_PAGES)
      throw new options.api.ApiError({
        kind: "unavailable",
        message: `${options.api.label}'s ${options.list} has over ${MOST_PAGES} pages`,
      });
    const answer = await options.read(page);
    if (answer.items.length > 0 && answer.items.every((item) => all.has(options.idOf(item)))) break;
    for (const item of answer.items) all.set(options.idOf(item), item);
    page = nextNumberedPage(page, options.asked, answer, options.shortPageEnds);
  }
  return [...all.values()];
}
