// The traceparent a plant change hands on to its webhook deliveries, read as the store call begins, before batching moves it.
import { AsyncLocalStorage } from 'node:async_hooks';

const current = new AsyncLocalStorage<string>();

export function withOutboxTrace<T>(traceparent: string, call: () => T): T {
  return current.run(traceparent, call);
}

/** The traceparent of the call under way; null when tracing is off. */
export function outboxTrace(): string | null {
  return current.getStore() ?? null;
}
