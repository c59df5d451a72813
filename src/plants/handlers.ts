// The plant operations, one function per operationId, with their store passed in.
import { HttpError } from '../http/errors.ts';
import type { OperationHandler } from '../http/operations.ts';
import type { PlantRecord, PlantStore } from '../store/types.ts';
import type { components } from '../generated/openapi.ts';

type Plant = components['schemas']['Plant'];

export interface PlantHandlers {
  createPlant: OperationHandler<'createPlant'>;
}

export function createPlantHandlers({ store }: { store: PlantStore }): PlantHandlers {
  return {
    async createPlant(request) {
      const { id, name, tag } = request.body;
      const result = await store.createPlant(tag === undefined ? { id, name } : { id, name, tag });
      if (result.outcome === 'conflict') {
        throw new HttpError(409, `A different plant with id ${id} already exists; the stored plant was not changed.`);
      }
      return toPlant(result.stored);
    },
  };
}

/** The published Plant shape: name, and tag only when the plant has one. */
function toPlant(plant: PlantRecord): Plant {
  return plant.tag === undefined ? { name: plant.name } : { name: plant.name, tag: plant.tag };
}
