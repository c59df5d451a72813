// The official Plant Store client, the package @plant-store/client.
// Plain fetch, typed by the types generated from openapi.yaml, int64 ids as exact bigints both ways.
// It imports nothing of the server, so it runs wherever fetch does: Node 20 and later, browsers.
import type { components, operations } from './openapi.ts';
import { parseExactJson, stringifyJson } from './json.ts';

export { INT64_KEYS, parseExactJson, parsePlantJson, stringifyJson } from './json.ts';

export type Plant = components['schemas']['Plant'];
export type NewPlant = components['schemas']['NewPlant'];
export type StoredPlant = components['schemas']['StoredPlant'];
export type ErrorBody = components['schemas']['Error'];
export type NewWebhook = components['schemas']['NewWebhook'];
export type Webhook = components['schemas']['Webhook'];
export type WebhookWithSecret = components['schemas']['WebhookWithSecret'];
export type WebhookDelivery = components['schemas']['WebhookDelivery'];

/** The JSON body an operation answers with a given status, as openapi.yaml declares it. */
type Answer<Operation extends keyof operations, Status extends keyof operations[Operation]['responses']> =
  operations[Operation]['responses'][Status] extends { content: { 'application/json': infer Body } } ? Body : never;
/** The JSON body an operation takes. */
type Sent<Operation extends keyof operations> =
  operations[Operation] extends { requestBody: { content: { 'application/json': infer Body } } } ? Body : never;

export type PlantQuery = NonNullable<operations['listPlants']['parameters']['query']>;
export type WebhookQuery = NonNullable<operations['listWebhooks']['parameters']['query']>;

export interface PlantStoreClientOptions {
  /** Where the API is served, e.g. `http://127.0.0.1:3000` or `https://example.com/plant-store`. */
  baseUrl: string;
  /** An API token, sent as `Authorization: Bearer <token>`. */
  token?: string | undefined;
  /** Headers sent with every request. */
  headers?: Record<string, string>;
  /** The fetch to use; the global one by default. */
  fetch?: typeof fetch;
}

/** One or more ETags a write is conditional on, sent as `If-Match`. */
export interface Conditional {
  ifMatch?: string | readonly string[];
}

/** A plant with the strong ETag that identifies this version of it. */
export interface PlantWithEtag {
  plant: StoredPlant;
  etag: string;
}

export interface PlantPage {
  plants: StoredPlant[];
  /** The query of the next page (from the `Link` header), absent on the last page. */
  next?: PlantQuery;
}

export interface WebhookPage {
  webhooks: Webhook[];
  /** The query of the next page (from the `Link` header), absent on the last page. */
  next?: WebhookQuery;
}

/** Any answer that is not a success: the status and the API's `Error` body. */
export class PlantStoreError extends Error {
  override name = 'PlantStoreError';
  /** The HTTP status. */
  readonly status: number;
  /** The `error` field of the body: the HTTP status, as the contract defines it. */
  readonly error: number;
  readonly headers: Headers;
  /** The plant's current ETag, which a 412 carries: retry with it after re-reading the plant. */
  readonly etag: string | undefined;

  constructor(status: number, body: ErrorBody, headers: Headers) {
    super(body.message);
    this.status = status;
    this.error = body.error;
    this.headers = headers;
    this.etag = headers.get('etag') ?? undefined;
  }

  get body(): ErrorBody {
    return { error: this.error, message: this.message };
  }

  static async from(response: Response): Promise<PlantStoreError> {
    const text = await response.text();
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      body = undefined;
    }
    return new PlantStoreError(response.status, isErrorBody(body) ? body : foreignError(response, text), response.headers);
  }
}

function isErrorBody(value: unknown): value is ErrorBody {
  const { error, message } = (value ?? {}) as Record<string, unknown>;
  return Number.isInteger(error) && typeof message === 'string';
}

/** An answer from something in front of the API (a proxy's 502 page): still a typed error. */
function foreignError(response: Response, text: string): ErrorBody {
  const excerpt = text.trim().slice(0, 200);
  return {
    error: response.status,
    message: `The server answered ${response.status} ${response.statusText} without the API's Error body${excerpt && `: ${excerpt}`}`,
  };
}

export type PlantStoreClient = ReturnType<typeof createPlantStoreClient>;

export function createPlantStoreClient(options: PlantStoreClientOptions) {
  const base = options.baseUrl.replace(/\/+$/, '');
  const fetchImpl = options.fetch ?? globalThis.fetch;
  const common: Record<string, string> = { ...options.headers };
  if (options.token !== undefined) common.authorization = `Bearer ${options.token}`;

  /** Sends one request; resolves with a success, throws PlantStoreError for any other status. */
  async function send(method: string, path: string, init: { body?: unknown; headers?: Record<string, string> } = {}) {
    const headers: Record<string, string> = { accept: 'application/json', ...common, ...init.headers };
    if (init.body !== undefined) headers['content-type'] = 'application/json';
    const response = await fetchImpl(base + path, {
      method,
      headers,
      ...(init.body !== undefined && { body: stringifyJson(init.body) }),
    });
    if (!response.ok) throw await PlantStoreError.from(response);
    return response;
  }

  async function json<Body>(response: Response): Promise<Body> {
    return parseExactJson(await response.text()) as Body;
  }

  /** One page of the list at `path`, and the query of the next one from the `Link` header. */
  async function listPage<Item, Query>(path: string, query: Query & PageQuery): Promise<{ items: Item[]; next?: Query }> {
    const response = await send('GET', `${path}${searchOf(query)}`);
    const items = await json<Item[]>(response);
    const next = nextQuery(response.headers.get('link')) as Query | undefined;
    return next ? { items, next } : { items };
  }

  /** Every item of the list at `path`, page after page through the `Link` header. */
  async function* allPages<Item, Query>(path: string, query: Query & PageQuery): AsyncGenerator<Item, void, undefined> {
    let next: (Query & PageQuery) | undefined = query;
    while (next) {
      const page: { items: Item[]; next?: Query } = await listPage<Item, Query>(path, next);
      yield* page.items;
      next = page.next as (Query & PageQuery) | undefined;
    }
  }

  async function plantPage(query: PlantQuery): Promise<PlantPage> {
    const { items: plants, next } = await listPage<StoredPlant, PlantQuery>('/plants', query);
    return next ? { plants, next } : { plants };
  }

  const plants = {
    /** Creates a plant; answers the published `Plant` (no id). Throws 409 for another plant with a used id. */
    async create(plant: Sent<'createPlant'>): Promise<Answer<'createPlant', 200>> {
      return json(await send('POST', '/plants', { body: plant }));
    },

    /** The plant and its ETag; throws 404 when there is none. */
    async get(id: bigint): Promise<PlantWithEtag> {
      const response = await send('GET', `/plants/${idPath(id)}`);
      return { plant: await json<Answer<'getPlant', 200>>(response), etag: response.headers.get('etag')! };
    },

    /** Replaces name and tag; with `ifMatch`, only while the plant still has that ETag (else 412). */
    async replace(id: bigint, plant: Sent<'replacePlant'>, condition: Conditional = {}): Promise<PlantWithEtag> {
      const response = await send('PUT', `/plants/${idPath(id)}`, { body: plant, headers: ifMatchHeader(condition) });
      return { plant: await json<Answer<'replacePlant', 200>>(response), etag: response.headers.get('etag')! };
    },

    /** Deletes the plant; with `ifMatch`, only while it still has that ETag (else 412). */
    async delete(id: bigint, condition: Conditional = {}): Promise<void> {
      await send('DELETE', `/plants/${idPath(id)}`, { headers: ifMatchHeader(condition) });
    },

    /** One page, ordered by id; `next` is the query of the following page. */
    list(query: PlantQuery = {}): Promise<PlantPage> {
      return plantPage(query);
    },

    /** Every plant (matching `tag`), page after page through the `Link` header. */
    all(query: Omit<PlantQuery, 'cursor'> = {}): AsyncGenerator<StoredPlant, void, undefined> {
      return allPages<StoredPlant, PlantQuery>('/plants', query);
    },
  };

  const webhooks = {
    /** Subscribes a URL; the answer carries the signing secret, shown only here. */
    async create(webhook: Sent<'createWebhook'>): Promise<Answer<'createWebhook', 201>> {
      return json(await send('POST', '/webhooks', { body: webhook }));
    },

    /** One page of subscriptions (the first, of up to 100, without a query), ordered by id. */
    async list(query: WebhookQuery = {}): Promise<Answer<'listWebhooks', 200>> {
      return (await listPage<Webhook, WebhookQuery>('/webhooks', query)).items;
    },

    /** One page of subscriptions, ordered by id; `next` is the query of the following page. */
    async page(query: WebhookQuery = {}): Promise<WebhookPage> {
      const { items: webhooks, next } = await listPage<Webhook, WebhookQuery>('/webhooks', query);
      return next ? { webhooks, next } : { webhooks };
    },

    /** Every subscription, page after page through the `Link` header. */
    all(query: Omit<WebhookQuery, 'cursor'> = {}): AsyncGenerator<Webhook, void, undefined> {
      return allPages<Webhook, WebhookQuery>('/webhooks', query);
    },

    async delete(id: bigint): Promise<void> {
      await send('DELETE', `/webhooks/${idPath(id)}`);
    },

    async deliveries(id: bigint, query: NonNullable<operations['listWebhookDeliveries']['parameters']['query']> = {}): Promise<Answer<'listWebhookDeliveries', 200>> {
      return json(await send('GET', `/webhooks/${idPath(id)}/deliveries${searchOf(query)}`));
    },
  };

  return { plants, webhooks };
}

/** An id for a path: a bigint, or a number only while it is still exact. */
function idPath(id: bigint): string {
  const value: unknown = id;
  if (typeof value === 'bigint' || (typeof value === 'number' && Number.isSafeInteger(value))) return String(value);
  throw new TypeError(`The id ${String(value)} is not an exact integer; pass ids as bigint (e.g. 9007199254740993n).`);
}

function ifMatchHeader({ ifMatch }: Conditional): Record<string, string> {
  if (ifMatch === undefined) return {};
  return { 'if-match': typeof ifMatch === 'string' ? ifMatch : ifMatch.join(', ') };
}

function searchOf(query: Record<string, string | number | undefined>): string {
  const entries = Object.entries(query).filter((entry): entry is [string, string | number] => entry[1] !== undefined);
  return entries.length === 0 ? '' : `?${new URLSearchParams(entries.map(([name, value]): [string, string] => [name, String(value)]))}`;
}

/** What every list's query holds: the page's size and where it starts (a type, not an interface: searchOf indexes it). */
type PageQuery = { limit?: number; cursor?: string };

/** The query of the `rel="next"` target of a Link header (its path is the list's, under the base URL); `limit` as a number. */
function nextQuery(link: string | null): (PageQuery & Record<string, string | number>) | undefined {
  const target = link === null ? undefined : nextTarget(link);
  if (target === undefined) return undefined;
  const query: Record<string, string | number> = {};
  for (const [name, value] of new URL(target, 'http://link.invalid').searchParams) query[name] = name === 'limit' ? Number(value) : value;
  return query;
}

/** The target of the link whose `rel` (a space-separated list, RFC 8288) includes `next`. */
function nextTarget(link: string): string | undefined {
  for (const [, target, params] of link.matchAll(/<([^>]*)>([^<]*)/g)) {
    const rel = /;\s*rel\s*=\s*(?:"([^"]*)"|([^;,\s]+))/i.exec(params!);
    if ((rel?.[1] ?? rel?.[2] ?? '').toLowerCase().split(/\s+/).includes('next')) return target;
  }
  return undefined;
}
