// The plant operations, one function per operationId, with their store passed in.
import { ifMatchCondition, ifNoneMatchHits } from '../contract/conditional.ts';
import { HttpError } from '../contract/errors.ts';
import type { ServiceHandlers } from '../contract/operations.ts';
import { keysetPages } from '../contract/paging.ts';
import { type ConditionalWrite, type PlantRecord, type PlantRepository, type Precondition } from '../store/types.ts';

export type PlantHandlers = Pick<ServiceHandlers, 'createPlant' | 'listPlants' | 'getPlant' | 'replacePlant' | 'deletePlant'>;

/** A plant's strong ETag: new with every change, the same on every instance and after a store move. */
export const plantEtag = (version: bigint): string => `"${version}"`;

/** `afterChange` is called after a write that added webhook deliveries, or may have: the store did not say it added none. */
export function createPlantHandlers({ store, afterChange }: { store: PlantRepository; afterChange?: () => void }): PlantHandlers {
  const plantPage = keysetPages<PlantRecord>('/plants', (plant) => plant.id);
  // The plant a replace or delete wrote; a missing or changed plant is refused.
  const written = (result: ConditionalWrite, id: bigint) => {
    if (result.outcome === 'missing') throw notFound(id);
    if (result.outcome === 'precondition-failed') {
      throw new HttpError(412, `The plant with id ${id} no longer matches If-Match; nothing was changed.`, {
        etag: plantEtag(result.version),
      });
    }
    if (result.eventWritten !== false) afterChange?.();
    return result;
  };
  return {
    async createPlant(request) {
      const { id } = request.body;
      // The validated body is the record itself (only the schema's fields): no copy needed.
      const result = await store.createPlant(request.body);
      if (result.outcome === 'conflict') {
        throw new HttpError(409, `A different plant with id ${id} already exists; the stored plant was not changed.`);
      }
      if (result.outcome === 'created' && result.eventWritten !== false) afterChange?.();
      // Records are returned as stored: the response schemas write their fields.
      return result.stored;
    },

    async listPlants(request, reply) {
      const { tag } = request.query;
      return plantPage(reply, request.query, (after, limit) => store.listPlants({ after, tag, limit }), { tag });
    },

    async getPlant(request, reply) {
      const stored = await store.getPlant(request.params.id);
      if (!stored) throw notFound(request.params.id);
      const etag = plantEtag(stored.version);
      // Read the condition before setting the ETag: a malformed one is a 400, which carries none.
      const fresh = ifNoneMatchHits(request.headers['if-none-match'], etag);
      reply.header('etag', etag);
      return fresh ? reply.code(304).send() : stored.plant;
    },

    async replacePlant(request, reply) {
      const { id } = request.params;
      const result = await store.replacePlant(id, request.body, ifMatch(request.headers['if-match']));
      const { plant, version } = written(result, id);
      reply.header('etag', plantEtag(version));
      return plant;
    },

    async deletePlant(request, reply) {
      const { id } = request.params;
      written(await store.deletePlant(id, ifMatch(request.headers['if-match'])), id);
      return reply.code(204).send();
    },
  };
}

/** The If-Match header as a store precondition, checked against the plant inside the write. */
function ifMatch(header: string | undefined): Precondition | undefined {
  const condition = ifMatchCondition(header);
  return condition && ((_current, version) => condition(plantEtag(version)));
}

function notFound(id: bigint): HttpError {
  return new HttpError(404, `There is no plant with id ${id}.`);
}
