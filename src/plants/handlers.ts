// The plant operations, one function per operationId, with their store passed in.
import { ifMatchCondition, ifNoneMatchHits } from '../contract/conditional.ts';
import { HttpError } from '../contract/errors.ts';
import type { OperationHandler } from '../contract/operations.ts';
import { type ConditionalWrite, type PlantRecord, type PlantStore, type Precondition } from '../store/types.ts';
import { decodeCursor, encodeCursor, plantEtag } from './representation.ts';

export interface PlantHandlers {
  createPlant: OperationHandler<'createPlant'>;
  listPlants: OperationHandler<'listPlants'>;
  getPlant: OperationHandler<'getPlant'>;
  replacePlant: OperationHandler<'replacePlant'>;
  deletePlant: OperationHandler<'deletePlant'>;
}

/** Mirrors the spec's default for `limit`, which Ajv fills in before the handler runs. */
const DEFAULT_PAGE_SIZE = 100;

/** `afterChange` is called after a write that added webhook deliveries, or may have: the store did not say it added none. */
export function createPlantHandlers({ store, afterChange }: { store: PlantStore; afterChange?: () => void }): PlantHandlers {
  return {
    async createPlant(request) {
      const { id } = request.body;
      // The validated body is the record itself (only the schema's fields, none undefined): no copy needed.
      const result = await store.createPlant(request.body);
      if (result.outcome === 'conflict') {
        throw new HttpError(409, `A different plant with id ${id} already exists; the stored plant was not changed.`);
      }
      if (result.outcome === 'created' && result.eventWritten !== false) afterChange?.();
      // The Plant response schema writes every field but the id, as for the records of get and list.
      return result.stored;
    },

    async listPlants(request, reply) {
      const { limit = DEFAULT_PAGE_SIZE, tag, cursor } = request.query;
      const after = cursor === undefined ? undefined : decodeCursor(cursor);
      // One row more than asked tells whether a next page exists without a count query.
      const page = await store.listPlants({ after, tag, limit: limit + 1, compactIds: true });
      if (page.length > limit) {
        page.length = limit;
        // Written out rather than through URLSearchParams: cursors are URL-safe and the tag is encoded.
        const tagParameter = tag === undefined ? '' : `&tag=${encodeURIComponent(tag)}`;
        reply.header('link', `</plants?limit=${limit}${tagParameter}&cursor=${encodeCursor(page.at(-1)!.id)}>; rel="next"`);
      }
      // Records already have the StoredPlant shape; the response schema serializes just its fields.
      // A compact id (a number within ±(2^53 - 1), exact there) is written as the same JSON integer as
      // its bigint, for less: hence the cast to the generated type, whose int64 is a bigint.
      // Emptied once sent: on PostgreSQL a request waits for a connection long enough for its promises
      // and contexts to reach V8's old generation, and an old object pointing at the young page keeps
      // it through every scavenge until the next full GC, so each page was promoted whole.
      reply.raw.once('finish', () => {
        page.length = 0;
      });
      return page as unknown as PlantRecord[];
    },

    async getPlant(request, reply) {
      const plant = await store.getPlant(request.params.id);
      if (!plant) throw notFound(request.params.id);
      const etag = plantEtag(plant);
      // Read the condition before setting the ETag: a malformed one is a 400, which carries none.
      const fresh = ifNoneMatchHits(request.headers['if-none-match'], etag);
      reply.header('etag', etag);
      // The record has the StoredPlant shape, as in listPlants: the response schema writes its fields.
      return fresh ? reply.code(304).send() : plant;
    },

    async replacePlant(request, reply) {
      const { id } = request.params;
      const result = await store.replacePlant(id, request.body, ifMatch(request.headers['if-match']));
      const plant = writtenPlant(result, id);
      if (wroteEvent(result)) afterChange?.();
      reply.header('etag', plantEtag(plant));
      return plant;
    },

    async deletePlant(request, reply) {
      const { id } = request.params;
      const result = await store.deletePlant(id, ifMatch(request.headers['if-match']));
      writtenPlant(result, id);
      if (wroteEvent(result)) afterChange?.();
      return reply.code(204).send();
    },
  };
}

/** The If-Match header as a store precondition, checked against the plant inside the write. */
function ifMatch(header: string | undefined): Precondition | undefined {
  const condition = ifMatchCondition(header);
  return condition && ((current) => condition(plantEtag(current)));
}

function writtenPlant(result: ConditionalWrite, id: bigint): PlantRecord {
  if (result.outcome === 'missing') throw notFound(id);
  if (result.outcome === 'precondition-failed') {
    throw new HttpError(412, `The plant with id ${id} no longer matches If-Match; nothing was changed.`, {
      etag: plantEtag(result.current),
    });
  }
  return result.plant;
}

function wroteEvent(result: ConditionalWrite): boolean {
  return result.outcome === 'done' && result.eventWritten !== false;
}

function notFound(id: bigint): HttpError {
  return new HttpError(404, `There is no plant with id ${id}.`);
}
