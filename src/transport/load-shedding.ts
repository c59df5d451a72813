// Overload is answered, not queued without end. Two mechanisms:
// - Page reads take turns (Turns below): a page of 1,000 plants is one block of synchronous work
//   (the query on SQLite, the JSON always), and 64 of them read in one poll ran back to back while
//   a /healthz probe waited seconds to be accepted. Past `pageReadsQueued` waiting, 503.
// - @fastify/under-pressure answers 503 to other requests while the event loop lags or the heap is
//   nearly full, except the operations openapi.yaml marks `x-answered-under-pressure` (the health
//   checks, /metrics and the contract), which must answer most then.
// Which operations are page reads, and which are marked, are facts of openapi.yaml (operation-facts.ts).
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

/**
 * Page reads in order, at most `atOnce` in progress, and at most one started per turn of the event
 * loop: between two starts Node reads the other sockets (a health probe among them) and writes the
 * answers made. Starting a read the moment a turn is free would not do: its synchronous work ends
 * before the next socket is read, so every read arriving in one poll would run back to back.
 */
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

/**
 * What shedding adds to an operation's route: its turn when it reads pages, its exemption when it
 * is answered under pressure (a probe or a scrape that fails then would make things worse).
 */
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
function admit(): undefined {
  return undefined;
}

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
