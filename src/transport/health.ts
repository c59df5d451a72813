// /healthz answers while the process runs; /readyz while the store answers and the instance is not draining (SIGTERM).
import type { ServiceHandlers } from '../contract/operations.ts';
import { HttpError } from '../contract/errors.ts';

type Deps = { ping: () => Promise<void>; stopping: () => boolean };

export function createHealthHandlers(deps: Deps): Pick<ServiceHandlers, 'getHealth' | 'getReadiness'> {
  return {
    async getHealth() {
      return { status: 'ok' };
    },
    async getReadiness(request) {
      if (deps.stopping()) throw new HttpError(503, 'The service is shutting down; the instance is not ready.');
      try {
        await deps.ping();
      } catch (error) {
        request.log.warn({ err: error }, 'readiness check failed: the store does not answer');
        throw new HttpError(503, 'The store does not answer; the service is not ready.');
      }
      return { status: 'ok' };
    },
  };
}
