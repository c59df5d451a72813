// Overload is answered, not queued without end: page reads (facts of openapi.yaml) take turns, and
// @fastify/under-pressure answers 503 while the loop lags or the heap fills, but not to `x-answered-under-pressure`.
import { getHeapStatistics } from 'node:v8';
import underPressure, { TYPE_EVENT_LOOP_DELAY } from '@fastify/under-pressure';
import type { FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from 'fastify';
import type { Config } from '../config.ts';
import { HttpError, refuse } from '../contract/errors.ts';
import type { OperationFacts } from '../contract/operation-facts.ts';

type SheddingLimits = Pick<Config['limits'], 'pageReadsAtOnce' | 'pageReadsQueued' | 'maxEventLoopDelayMs' | 'maxHeapUsedPercent'>;

const RETRY_AFTER = { 'retry-after': '1' };
const QUEUE_FULL = new HttpError(503, 'Too many page reads are waiting; retry after Retry-After seconds.', RETRY_AFTER);
const OVERLOADED = new HttpError(503, 'The service is overloaded; retry after Retry-After seconds.', RETRY_AFTER);

/** Page reads in order, at most `atOnce` at a time and one started per event-loop turn, so other sockets are read between two. */
export class Turns {
  readonly #atOnce: number;
  readonly #queueLimit: number;
  readonly #waiting: (() => void)[] = [];
  #running = 0;
  #startScheduled = false;

  constructor(atOnce: number, queueLimit: number) {
    this.#atOnce = atOnce;
    this.#queueLimit = queueLimit;
  }

  /** The work's result, or undefined without running it when the queue is full. */
  async take<T>(work: () => Promise<T>): Promise<T | undefined> {
    if (this.#waiting.length >= this.#queueLimit) return undefined;
    const turn = new Promise<void>((resolve) => this.#waiting.push(resolve));
    this.#scheduleStart();
    await turn;
    try {
      return await work();
    } finally {
      this.#running--;
      this.#scheduleStart();
    }
  }

  #scheduleStart(): void {
    if (this.#startScheduled || this.#waiting.length === 0 || this.#running >= this.#atOnce) return;
    this.#startScheduled = true;
    setImmediate(this.#startNext);
  }

  // Runs in the check phase; the read it starts runs right after, and the next start waits a loop.
  readonly #startNext = (): void => {
    this.#startScheduled = false;
    const next = this.#running < this.#atOnce ? this.#waiting.shift() : undefined;
    if (next === undefined) return;
    this.#running++;
    next();
    this.#scheduleStart();
  };
}

// under-pressure reads `pressureHandler` from the route config; its types do not declare it there.
export interface ShedRouteOptions {
  handler: RouteOptions['handler'];
  config?: { pressureHandler: () => undefined };
}

/** What shedding adds to an operation's route: its turn when it reads pages, its exemption when answered under pressure. */
export function sheddingFor(limits: SheddingLimits): (facts: OperationFacts, handler: RouteOptions['handler']) => ShedRouteOptions {
  const turns = limits.pageReadsAtOnce > 0 ? new Turns(limits.pageReadsAtOnce, limits.pageReadsQueued) : undefined;
  return ({ pageRead, answeredUnderPressure }, handler) => {
    const inTurn: RouteOptions['handler'] =
      turns === undefined || !pageRead
        ? handler
        : async (request, reply) => (await turns.take(async () => handler.call(request.server, request, reply))) ?? refuse(request, reply, QUEUE_FULL);
    return answeredUnderPressure ? { handler: inTurn, config: { pressureHandler: admit } } : { handler: inTurn };
  };
}

// under-pressure's documented per-route handler: one that sends nothing lets the request through.
const admit = (): undefined => undefined;

/** under-pressure samples once a second; the first samples after the start cover the boot's own work. */
const BOOT_SAMPLES_MS = 2000;

export async function registerPressureChecks(app: FastifyInstance, limits: SheddingLimits): Promise<void> {
  if (limits.maxEventLoopDelayMs === 0 && limits.maxHeapUsedPercent === 0) return;
  let bootSampled = Infinity;
  app.addHook('onReady', async () => {
    bootSampled = performance.now() + BOOT_SAMPLES_MS;
  });
  await app.register(underPressure, {
    maxEventLoopDelay: limits.maxEventLoopDelayMs,
    maxHeapUsedBytes: Math.round((getHeapStatistics().heap_size_limit * limits.maxHeapUsedPercent) / 100),
    // Sent here, as a refusal (logged at info, not as a failure), rather than thrown to the error handler.
    pressureHandler: (request: FastifyRequest, reply: FastifyReply, type: string): undefined => {
      // Compiling the routes blocks the loop for a second or more on a busy host: that is no overload.
      if (type === TYPE_EVENT_LOOP_DELAY && performance.now() < bootSampled) return undefined;
      refuse(request, reply, OVERLOADED);
      return undefined;
    },
  });
}
