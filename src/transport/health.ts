// Liveness and readiness: /healthz answers while the process runs, /readyz while the store answers.
import type { OperationHandler } from '../contract/operations.ts';
import { HttpError } from '../contract/errors.ts';

export function createHealthHandlers(deps: { ping: () => Promise<void> }): {
  getHealth: OperationHandler<'getHealth'>;
  getReadiness: OperationHandler<'getReadiness'>;
} {
  return {
    async getHealth() {
      return { status: 'ok' };
    },
    async getReadiness(request) {
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
