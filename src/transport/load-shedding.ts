// Overload is answered, not queued: page reads take turns, and under-pressure answers 503 while the loop lags or the heap fills.
import { getHeapStatistics } from 'node:v8';
import underPressure, { TYPE_EVENT_LOOP_DELAY } from '@fastify/under-pressure';
import type { FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from 'fastify';
import type { Config } from '../config.ts';
import { HttpError, refuse } from '../contract/errors.ts';
import type { OperationFacts } from '../contract/operation-facts.ts';

export type SheddingLimits = Pick<Config, 'PAGE_READS_AT_ONCE' | 'PAGE_READS_QUEUED' | 'MAX_CONNECTIONS' | 'MAX_EVENT_LOOP_DELAY' | 'MAX_HEAP_USED_PERCENT'>;

const QUEUE_FULL = new HttpError(503, 'Too many page reads are waiting; retry after Retry-After seconds.');
const OVERLOADED = new HttpError(503, 'The service is overloaded; retry after Retry-After seconds.', { 'retry-after': '1' });

/** Page reads in order, at most `atOnce` at a time and one started per event-loop turn, so other sockets are read between two. */
export function turns(atOnce: number, queueLimit: number, now = () => performance.now()) {
  const waiting: { start: () => void; since: number }[] = [];
  let running = 0;
  let startScheduled = false;
  const scheduleStart = (): void => {
    if (startScheduled || waiting.length === 0 || running >= atOnce) return;
    startScheduled = true;
    setImmediate(startNext);
  };
  // Runs in the check phase; the read it starts runs right after, and the next start waits a loop. Until it runs,
  // reads only join the queue and end: there is still one waiting, and room for it.
  const startNext = (): void => {
    startScheduled = false;
    running++;
    waiting.shift()!.start();
    scheduleStart();
  };
  return {
    /** The work's result, or undefined without running it when the queue is full. */
    take: async <T>(work: () => Promise<T>): Promise<T | undefined> => {
      if (waiting.length >= queueLimit) return undefined;
      const turn = new Promise<void>((resolve) => waiting.push({ start: resolve, since: now() }));
      scheduleStart();
      await turn;
      try {
        return await work();
      } finally {
        running--;
        scheduleStart();
      }
    },
    /** Whole seconds until a refused read may find room: as long as the read at the head of the queue has waited, at least 1. */
    retryAfter: (): number => Math.max(1, Math.ceil((now() - (waiting[0]?.since ?? now())) / 1000)),
  };
}

// under-pressure's documented per-route handler, read from the route config: one that sends nothing lets the request through.
const admit = (): undefined => undefined;

/** under-pressure samples once a second; the first samples after the start cover the boot's own work. */
const BOOT_SAMPLES_MS = 2000;

/** Registers under-pressure; returns what shedding adds to a route: its turn when it reads pages, its exemption under pressure. */
export async function registerShedding(app: FastifyInstance, limits: SheddingLimits) {
  await registerPressureChecks(app, limits);
  const queued = limits.PAGE_READS_QUEUED ?? limits.MAX_CONNECTIONS;
  const queue = limits.PAGE_READS_AT_ONCE > 0 ? turns(limits.PAGE_READS_AT_ONCE, queued) : undefined;
  return ({ pageRead, answeredUnderPressure }: OperationFacts, handler: RouteOptions['handler']) => {
    const inTurn: RouteOptions['handler'] =
      queue === undefined || !pageRead
        ? handler
        : async (request, reply) =>
            (await queue.take(async () => handler.call(request.server, request, reply))) ?? refuse(reply.header('retry-after', queue.retryAfter()), QUEUE_FULL);
    return answeredUnderPressure ? { handler: inTurn, config: { pressureHandler: admit } } : { handler: inTurn };
  };
}

async function registerPressureChecks(app: FastifyInstance, limits: SheddingLimits): Promise<void> {
  if (limits.MAX_EVENT_LOOP_DELAY === 0 && limits.MAX_HEAP_USED_PERCENT === 0) return;
  let bootSampled = Infinity;
  app.addHook('onReady', async () => {
    bootSampled = performance.now() + BOOT_SAMPLES_MS;
  });
  await app.register(underPressure, {
    maxEventLoopDelay: limits.MAX_EVENT_LOOP_DELAY,
    maxHeapUsedBytes: Math.round((getHeapStatistics().heap_size_limit * limits.MAX_HEAP_USED_PERCENT) / 100),
    // Sent here, as a refusal (logged at info, not as a failure), rather than thrown to the error handler.
    pressureHandler: (request: FastifyRequest, reply: FastifyReply, type: string): undefined => {
      // Compiling the routes blocks the loop on a busy host: that is no overload.
      if (type !== TYPE_EVENT_LOOP_DELAY || performance.now() >= bootSampled) refuse(reply, OVERLOADED);
      return undefined;
    },
  });
}
