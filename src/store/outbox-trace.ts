// The W3C traceparent a plant change hands on to its webhook deliveries: kept with each outbox row,
// sent with each attempt, so that a subscriber's trace continues the one that changed the plant.
// Whoever traces store calls (src/observability/tracing.ts) runs them inside withOutboxTrace; the drivers read it
// as the call begins, before any batching moves the write to another request's turn.
import { AsyncLocalStorage } from 'node:async_hooks';

const current = new AsyncLocalStorage<string>();

export function withOutboxTrace<T>(traceparent: string, call: () => T): T {
  return current.run(traceparent, call);
}

/** The traceparent of the call under way; null when tracing is off. */
export function outboxTrace(): string | null {
  return current.getStore() ?? null;
}
