/**
 * A provider's endpoints as data: each declared once — method and path template
 * (`"GET /instances/{id}"`), the answer's schema, the rate-limit bucket that paces it and what a
 * message says it was for — and bound to a client as typed functions (`calls.get({ id }, signal)`).
 * A list endpoint also says where its items are and how its pages go, so reading one page (the
 * adapter's `listPage`) or every page is data too. An answer the schema does not know is the
 * provider's error, never an empty list.
 *
 * @example
 * ```ts
 * import {
 *   answerListSchema,
 *   answerTextSchema,
 *   defineMachineApi,
 *   endpoint,
 *   listEndpoint,
 *   machineEndpoints,
 * } from "@skyward/provider-utils";
 *
 * const exampleApi = defineMachineApi({
 *   provider: "example",
 *   errorName: "ExampleApiError",
 *   label: "Example",
 *   apiKeyVariable: "EXAMPLE_API_KEY",
 *   classify: () => undefined,
 * });
 * const exampleCalls = machineEndpoints(exampleApi, {
 *   // The answer's schema (here a machine's name), or undefined for an answer not read.
 *   name: endpoint("GET /machines/{id}/name", answerTextSchema, "reading machine {id}", "get"),
 *   remove: endpoint("DELETE /machines/{id}", undefined, "deleting machine {id}", "delete"),
 *   names: listEndpoint("GET /machine-names", answerListSchema(answerTextSchema), "listing machines", {
 *     paced: "list",
 *     items: (answer) => answer,
 *     pages: { token: { param: "after", next: () => undefined } },
 *   }),
 * });
 * const calls = exampleCalls(
 *   exampleApi.jsonClient({ apiUrl: "https://api.example.com/v1", maxRetries: 4, retryDelayMs: 1000, requestTimeoutMs: 30_000 }),
 * );
 * // calls.name({ id: "m-1" }, signal): a string; calls.names.page(undefined, signal): the adapter's listPage.
 * ```
 */
import type { z } from "zod";
import type { MachinePage } from "./adapter.js";
import type { MachineApi, MachineJsonClient } from "./machine-api.js";
import { nextNumberedPage, readNumberedPages } from "./numbered-pages.js";
import type { MachineEndpoint } from "./pacing.js";

type Method = "GET" | "POST" | "PUT" | "DELETE";

/** `"METHOD /path/{param}"`. */
export type Route = `${Method} /${string}`;

/** The path parameters a route's template names (`{id}`), each a string or number. */
export type RouteParams<R extends string> = R extends `${string}{${infer Name}}${infer Rest}`
  ? { readonly [K in Name]: string | number } & RouteParams<Rest>
  : unknown;

/** What a call is given: its path parameters, a body, and query parameters beside the declared ones. */
export type EndpointInput<R extends string> = RouteParams<R> & {
  readonly body?: unknown;
  readonly query?: Readonly<Record<string, string>>;
  /** What this call is for, in messages, in place of the declared purpose (`creating instance <name>`). */
  readonly purpose?: string;
};

/** The answer of a schema, or `unknown` for an endpoint that declares none (its answer is not read). */
type Answer<Schema> = Schema extends z.ZodType ? z.output<Schema> : unknown;

/** How an endpoint is sent and described. */
export interface EndpointOptions<R extends string> {
  /** The rate-limit bucket that paces it ({@link MachineEndpoint}); default `other`. */
  readonly paced?: MachineEndpoint;
  /** What it is for, in messages: `{param}` is the call's path parameter (`"deleting instance {id}"`), or built from the input. */
  readonly purpose: string | ((input: EndpointInput<R>) => string);
  /** Query parameters every call sends. */
  readonly query?: Readonly<Record<string, string>>;
  /** Whether sending it twice does no harm (a 5xx or lost answer is then retried); default not for POST. */
  readonly idempotent?: boolean;
}

/** A declared endpoint, as {@link endpoint} makes it. */
export interface EndpointDefinition<R extends Route, Schema extends z.ZodType | undefined>
  extends EndpointOptions<R> {
  readonly kind: "call";
  readonly route: R;
  readonly schema: Schema;
}

/** How a list's pages go. */
export type ListPaging<Answer, Item> =
  /** Numbered pages (`page=1,2,…` and a size); the last is empty, reaches `total`, or (with `shortPageEnds`) falls short. */
  | {
      readonly numbered: {
        readonly pageParam: string;
        readonly sizeParam: string;
        readonly size: number;
        readonly total?: (answer: Answer) => number | null | undefined;
        /** The page size the API used, when the answer says (it may give fewer than asked). */
        readonly pageSize?: (answer: Answer) => number | null | undefined;
        readonly shortPageEnds?: boolean;
        /** An item's id: a page of items all seen before ends the list (an API ignoring the page). */
        readonly idOf: (item: Item) => string | number;
      };
    }
  /** A cursor: the answer's `next` token sent as `param`; no token, the last page. */
  | {
      readonly token: {
        readonly param: string;
        readonly next: (answer: Answer) => string | null | undefined;
      };
    };

/** A declared list endpoint, as {@link listEndpoint} makes it. */
export interface ListEndpointDefinition<R extends Route, Schema extends z.ZodType, Item>
  extends EndpointOptions<R> {
  readonly kind: "list";
  readonly route: R;
  readonly schema: Schema;
  /** Where the items of an answer are. */
  readonly items: (answer: z.output<Schema>) => readonly Item[];
  /** How pages go; absent for an API documenting one page. */
  readonly pages?: ListPaging<z.output<Schema>, Item>;
}

/** How an endpoint is sent beside its purpose: its rate-limit bucket alone (`"get"`), or the options. */
export type EndpointExtras<R extends string> = MachineEndpoint | Omit<EndpointOptions<R>, "purpose">;

const optionsOf = <R extends string>(purpose: EndpointOptions<R>["purpose"], extras?: EndpointExtras<R>) =>
  typeof extras === "string" ? { purpose, paced: extras } : { ...extras, purpose };

/**
 * An endpoint: `route`, its answer parsed with `schema` (`undefined`: not read), `purpose` what
 * messages say it was for, `extras` its rate-limit bucket (default `other`) or its options.
 */
export function endpoint<R extends Route, Schema extends z.ZodType | undefined>(
  route: R,
  schema: Schema,
  purpose: EndpointOptions<R>["purpose"],
  extras?: EndpointExtras<R>,
): EndpointDefinition<R, Schema> {
  return { ...optionsOf(purpose, extras), kind: "call", route, schema };
}

/** The keys of an answer whose values are lists (its own keys: a loose object's index signature is none). */
type ListKeys<Answer> = keyof {
  [K in keyof Answer as string extends K ? never : Answer[K] extends readonly unknown[] ? K : never]: true;
} &
  string;

/** The items of the list an answer holds under `Key`. */
type ItemsAt<Answer, Key extends keyof Answer> = Answer[Key] extends readonly (infer Item)[] ? Item : never;

/** How a list endpoint is sent and read, beside its purpose: `items` the answer's key holding them, or how to find them. */
type ListOptions<R extends string, Answer, Item, Items> = Omit<EndpointOptions<R>, "purpose"> & {
  readonly items: Items;
  readonly pages?: ListPaging<Answer, Item>;
};

/** A list endpoint: as {@link endpoint}, its items under the answer's key `list.items`, its pages by `list.pages`. */
export function listEndpoint<
  R extends Route,
  Schema extends z.ZodType,
  Key extends ListKeys<z.output<Schema>>,
>(
  route: R,
  schema: Schema,
  purpose: EndpointOptions<R>["purpose"],
  list: ListOptions<R, z.output<Schema>, ItemsAt<z.output<Schema>, Key>, Key>,
): ListEndpointDefinition<R, Schema, ItemsAt<z.output<Schema>, Key>>;
/** A list endpoint: as {@link endpoint}, its items found by `list.items`, its pages by `list.pages`. */
export function listEndpoint<R extends Route, Schema extends z.ZodType, Item>(
  route: R,
  schema: Schema,
  purpose: EndpointOptions<R>["purpose"],
  list: ListOptions<R, z.output<Schema>, Item, (answer: z.output<Schema>) => readonly Item[]>,
): ListEndpointDefinition<R, Schema, Item>;
export function listEndpoint(
  route: Route,
  schema: z.ZodType,
  purpose: EndpointOptions<string>["purpose"],
  list: ListOptions<string, unknown, unknown, string | ((answer: unknown) => readonly unknown[])>,
): ListEndpointDefinition<Route, z.ZodType, unknown> {
  const { items } = list;
  const itemsOf =
    typeof items === "function"
      ? items
      : (answer: unknown) => (answer as Record<string, unknown[]>)[items] ?? [];
  return { ...list, items: itemsOf, purpose, kind: "list", route, schema };
}

/** A bound endpoint: one typed call. */
export type EndpointCall<R extends string, Schema> = (
  input: EndpointInput<R>,
  signal: AbortSignal,
) => Promise<Answer<Schema>>;

/** A bound list endpoint. */
export interface ListCall<R extends string, Item> {
  /** One page (`cursor` undefined: the first), as the adapter's `listPage` answers it. */
  page(cursor: string | undefined, signal: AbortSignal, input?: EndpointInput<R>): Promise<MachinePage<Item>>;
  /** Every item of every page. */
  all(input: EndpointInput<R>, signal: AbortSignal): Promise<Item[]>;
}

/** What {@link machineEndpoints} is declared with. */
export type EndpointDefinitions = Readonly<
  // biome-ignore lint/suspicious/noExplicitAny: the entries' own types are inferred per key.
  Record<string, EndpointDefinition<any, any> | ListEndpointDefinition<any, any, any>>
>;

/** The typed calls of declared endpoints. */
export type BoundEndpoints<Definitions extends EndpointDefinitions> = {
  readonly [K in keyof Definitions]: Definitions[K] extends ListEndpointDefinition<
    infer R,
    infer _S,
    infer Item
  >
    ? ListCall<R, Item>
    : Definitions[K] extends EndpointDefinition<infer R, infer Schema>
      ? EndpointCall<R, Schema>
      : never;
};

/** The pages read at most before a token-paged list is called endless. */
const MOST_PAGES = 1000;

/** Declares `api`'s endpoints once; bind them to a client of it to call them. See the module comment. */
export function machineEndpoints<Definitions extends EndpointDefinitions>(
  api: MachineApi,
  definitions: Definitions,
): (client: MachineJsonClient) => BoundEndpoints<Definitions> {
  return (client) => {
    const bound: Record<string, unknown> = {};
    for (const [key, definition] of Object.entries(definitions)) {
      const send = sender(client, definition);
      bound[key] = definition.kind === "call" ? send : listCall(api, definition, send);
    }
    return bound as BoundEndpoints<Definitions>;
  };
}

type Send = (input: EndpointInput<string>, signal: AbortSignal) => Promise<unknown>;

/** Sends one call of `definition`: its path filled in, its purpose written, its answer parsed. */
function sender(
  client: MachineJsonClient,
  definition: EndpointOptions<string> & { readonly route: Route; readonly schema: z.ZodType | undefined },
): Send {
  const at = definition.route.indexOf(" ");
  const method = definition.route.slice(0, at) as Method;
  const template = definition.route.slice(at + 1);
  return (input, signal) => {
    const values = input as Readonly<Record<string, unknown>>;
    const fill = (text: string, encode: (value: string) => string) =>
      text.replace(/\{(\w+)\}/g, (_, name: string) => encode(String(values[name] ?? "")));
    const purpose =
      input.purpose ??
      (typeof definition.purpose === "function"
        ? definition.purpose(input)
        : fill(definition.purpose, String));
    const query = { ...definition.query, ...input.query };
    return client.json(method, fill(template, encodeURIComponent), {
      schema: definition.schema,
      purpose,
      signal,
      endpoint: definition.paced ?? "other",
      idempotent: definition.idempotent ?? method !== "POST",
      ...(Object.keys(query).length > 0 ? { params: query } : {}),
      ...(input.body !== undefined ? { data: input.body } : {}),
    });
  };
}

/** The page and every-page reads of a list endpoint. */
function listCall(
  api: MachineApi,
  // biome-ignore lint/suspicious/noExplicitAny: any list's items, read through its own definition.
  definition: ListEndpointDefinition<Route, z.ZodType, any>,
  send: Send,
): ListCall<string, unknown> {
  const { items, pages } = definition;
  const list = definition.route.slice(definition.route.indexOf(" ") + 1);
  const numbered = pages && "numbered" in pages ? pages.numbered : undefined;
  type Numbered = NonNullable<typeof numbered>;
  const readNumbered = async (
    numbered: Numbered,
    number: number,
    signal: AbortSignal,
    input: EndpointInput<string>,
  ) => {
    const query = {
      ...input.query,
      [numbered.pageParam]: String(number),
      [numbered.sizeParam]: String(numbered.size),
    };
    const answer = await send({ ...input, query }, signal);
    return { items: items(answer), total: numbered.total?.(answer), pageSize: numbered.pageSize?.(answer) };
  };
  const page = async (cursor: string | undefined, signal: AbortSignal, input: EndpointInput<string> = {}) => {
    if (numbered) {
      const number = cursor === undefined ? 1 : Number(cursor);
      const answer = await readNumbered(numbered, number, signal, input);
      const next = nextNumberedPage(number, numbered.size, answer, numbered.shortPageEnds);
      return { machines: answer.items, ...(next === undefined ? {} : { next: String(next) }) };
    }
    const token = pages && "token" in pages ? pages.token : undefined;
    const query = { ...input.query, ...(token && cursor ? { [token.param]: cursor } : {}) };
    const answer = await send({ ...input, query }, signal);
    const next = token?.next(answer) || undefined;
    return { machines: items(answer), ...(next ? { next } : {}) };
  };
  return {
    page,
    async all(input, signal) {
      if (numbered) {
        const { size: asked, idOf, shortPageEnds } = numbered;
        const read = (number: number) => readNumbered(numbered, number, signal, input);
        return readNumberedPages({
          api,
          list,
          asked,
          idOf,
          read,
          ...(shortPageEnds ? { shortPageEnds } : {}),
        });
      }
      const all: unknown[] = [];
      for (let cursor: string | undefined, read = 0; ; read++) {
        if (read >= MOST_PAGES)
          throw new api.ApiError({
            kind: "unavailable",
            message: `${api.label}'s ${list} has over ${MOST_PAGES} pages`,
          });
        const answer = await page(cursor, signal, input);
        all.push(...answer.machines);
        cursor = answer.next;
        if (cursor === undefined) return all;
      }
    },
  };
}
