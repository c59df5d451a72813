// Sends what the outbox holds, at least once, signed as Standard Webhooks. Each subscription has a sending slot of its
// own besides the shared ones (none while its receiver does not answer), so a slow receiver delays only its own deliveries.
import { setTimeout as sleep } from 'node:timers/promises';
import { Webhook } from 'standardwebhooks';
import type { FastifyBaseLogger } from 'fastify';
import type { Agent } from 'undici';
import type { AttemptResult, TraceAttempt } from '../observability/tracing.ts';
import type { AttemptOutcome, ClaimedDelivery, WebhookRepository } from '../store/types.ts';
import { guardedAgent, literalHostProblem } from './targets.ts';

export interface DispatcherOptions {
  store: WebhookRepository;
  log: Pick<FastifyBaseLogger, 'warn' | 'debug'>;
  /** Delays between attempts: the first attempt is immediate, then one attempt after each delay. */
  retryScheduleMs: readonly number[];
  allowPrivateNetworks: boolean;
  /** Bounds each attempt as a whole (one AbortSignal): connecting, waiting for the status, reading the answer. */
  timeoutMs: number;
  /** How long delivered rows stay visible before pruning; failed ones stay seven days. */
  deliveredRetentionMs: number;
  onAttempt: (result: AttemptOutcome['result']) => void;
  /** Tracing's span around each attempt; without it, a stored traceparent is still passed on. */
  traceAttempt?: TraceAttempt;
  now: () => number;
}

const POLL_MS = 500;
// Deliveries in flight at once on this instance, besides each subscription's own slot.
const SHARED_SLOTS = 32;
// Deliveries of one subscription leased at once, on every instance together (one receiver's share).
const PER_SUBSCRIPTION = 4;
const FAILED_RETENTION_MS = 7 * 86_400_000;
// A lease outlives the attempt it covers by this much; after a crash, the delivery is sent again once it is over.
const LEASE_MARGIN_MS = 5_000;
const PRUNE_EVERY_MS = 60_000;
// Leases of a subscription whose receiver has not answered its latest attempt: its own slot, no shared one.
const UNANSWERED_SHARE = 1;
const JITTER = 0.2; // each delay varies by ±10%, so retries from many events do not arrive in step

export function createWebhookDispatcher(options: DispatcherOptions) {
  const { store, log, retryScheduleMs, allowPrivateNetworks, timeoutMs, deliveredRetentionMs, onAttempt, now } = options;
  const traceAttempt = options.traceAttempt ?? untraced;
  /** undici's agent, loaded at the first delivery: most instances boot without sending any. */
  let agent: Promise<Agent> | undefined;
  let running: Promise<void> | undefined;
  const stopping = new AbortController();
  /** The attempts under way, with their subscription; each frees its slot (and wakes the loop) when recorded. */
  const inFlight = new Map<Promise<void>, bigint>();
  /** Aborted by wake(): ends the loop's idle wait, or spares it the next one. */
  let woken = new AbortController();
  let lastPrune = 0;
  /** The earliest retry this instance scheduled, so a delay shorter than the poll is honoured. */
  let nextRetryAt = Number.POSITIVE_INFINITY;

  /** Looks for due deliveries now rather than at the next poll (after a local write). */
  const wake = (): void => woken.abort();

  async function loop(): Promise<void> {
    while (!stopping.signal.aborted) {
      let claimed = 0;
      try {
        claimed = await claim();
      } catch (error) {
        log.warn({ err: error }, 'webhook dispatch pass failed; trying again shortly');
      }
      // Nothing to take, or no free shared slot: wait for a poll, a local write or a finished attempt.
      if (claimed === 0 || sharedInUse() >= SHARED_SLOTS) await idle();
    }
    await Promise.all(inFlight.keys());
  }

  // Leases what fits in the free shared slots, plus the first due delivery of each subscription holding no lease
  // (even with every shared slot held), and starts sending each without waiting for any.
  async function claim(): Promise<number> {
    const free = Math.max(0, SHARED_SLOTS - sharedInUse());
    const due = await store.claimDueDeliveries(new Date(now()), timeoutMs + LEASE_MARGIN_MS, free, PER_SUBSCRIPTION, UNANSWERED_SHARE);
    for (const delivery of due) {
      const attempt = deliver(delivery).catch((error: unknown) => {
        // The lease runs out and the delivery is sent again, under the same webhook-id.
        log.warn({ err: error, messageId: delivery.messageId }, 'webhook attempt could not be recorded; it will be retried after its lease');
      }).finally(() => {
        inFlight.delete(attempt);
        wake();
      });
      inFlight.set(attempt, delivery.subscriptionId);
    }
    await pruneNowAndThen();
    return due.length;
  }

  // The first attempt of each subscription is in the subscription's own slot, the others in shared ones.
  function sharedInUse(): number {
    return inFlight.size - new Set(inFlight.values()).size;
  }

  async function deliver(delivery: ClaimedDelivery): Promise<void> {
    const attempt = await traceAttempt(delivery, (headers) => send(delivery, headers));
    const outcome = outcomeOf(delivery, attempt);
    if (outcome.result === 'retry') nextRetryAt = Math.min(nextRetryAt, Date.parse(outcome.nextAttemptAt));
    onAttempt(outcome.result);
    await store.recordAttempt(outcome);
  }

  async function send(delivery: ClaimedDelivery, traceHeaders: Record<string, string>): Promise<AttemptResult> {
    const url = new URL(delivery.url);
    const refused = literalHostProblem(url, allowPrivateNetworks);
    if (refused) return { error: `refused: ${refused}` };
    const signedAt = new Date(now());
    try {
      agent ??= guardedAgent(allowPrivateNetworks, timeoutMs);
      const response = await (await agent).request({
        origin: url.origin,
        path: `${url.pathname}${url.search}`,
        method: 'POST',
        signal: AbortSignal.timeout(timeoutMs),
        headers: {
          'content-type': 'application/json',
          'user-agent': 'plant-store-webhooks/1.0',
          'webhook-id': delivery.messageId,
          'webhook-timestamp': String(Math.floor(signedAt.getTime() / 1000)),
          'webhook-signature': signatures(delivery, signedAt),
          'webhook-event': delivery.event,
          ...traceHeaders,
        },
        body: delivery.payload,
      });
      await response.body.dump();
      if (response.statusCode >= 300 && response.statusCode < 400) {
        return { status: response.statusCode, error: `redirects are not followed (to ${String(response.headers.location ?? 'nowhere')})` };
      }
      return { status: response.statusCode };
    } catch (error) {
      const cause = (error as Error & { cause?: Error }).cause;
      return { error: `could not deliver: ${cause?.message ?? (error as Error).message}` };
    }
  }

  function outcomeOf(delivery: ClaimedDelivery, attempt: AttemptResult): AttemptOutcome {
    const at = new Date(now()).toISOString();
    const { status, error } = attempt;
    const base = { id: delivery.id, at, ...(status !== undefined && { responseStatus: status }) };
    if (status !== undefined && status >= 200 && status < 300 && !error) {
      return { ...base, result: 'delivered', responseStatus: status };
    }
    const reason = error ?? `the receiver answered ${status}`;
    const details = { messageId: delivery.messageId, url: delivery.url, attempt: delivery.attempts + 1, reason };
    if (status === 410) {
      log.warn(details, 'webhook receiver is gone (410); subscription disabled');
      return { ...base, result: 'failed', error: reason, disableSubscription: 'the receiver answered 410 Gone' };
    }
    const delay = retryScheduleMs[delivery.attempts];
    if (delay === undefined) {
      log.warn(details, 'webhook delivery failed for good after its last attempt');
      return { ...base, result: 'failed', error: reason };
    }
    log.debug(details, 'webhook delivery attempt failed; will retry');
    const jittered = Math.round(delay * (1 - JITTER / 2 + JITTER * Math.random()));
    return { ...base, result: 'retry', error: reason, nextAttemptAt: new Date(now() + jittered).toISOString() };
  }

  async function pruneNowAndThen(): Promise<void> {
    if (now() - lastPrune < Math.min(PRUNE_EVERY_MS, deliveredRetentionMs)) return;
    lastPrune = now();
    await store.pruneDeliveries(new Date(now() - deliveredRetentionMs), new Date(now() - FAILED_RETENTION_MS));
  }

  /** Until the next poll or retry is due, or wake(). */
  async function idle(): Promise<void> {
    if (!woken.signal.aborted) {
      const untilRetry = Math.max(0, nextRetryAt - now());
      nextRetryAt = Number.POSITIVE_INFINITY;
      await sleep(Math.min(POLL_MS, untilRetry), undefined, { signal: woken.signal }).catch(() => undefined);
    }
    woken = new AbortController();
  }

  return {
    start(): void {
      running ??= loop();
    },
    wake,
    async stop(): Promise<void> {
      stopping.abort();
      wake();
      await running;
      if (agent) await (await agent).close();
    },
  };
}

/** Standard Webhooks signatures, space-separated: the current secret's, then the previous one's during a rotation's overlap. */
function signatures(delivery: ClaimedDelivery, signedAt: Date): string {
  const secrets = delivery.previousSecret === undefined ? [delivery.secret] : [delivery.secret, delivery.previousSecret];
  return secrets.map((secret) => new Webhook(secret).sign(delivery.messageId, signedAt, delivery.payload)).join(' ');
}

// Tracing off: the trace of the change, if one was recorded, still reaches the receiver.
const untraced: TraceAttempt = (delivery, attempt) => attempt(delivery.traceparent === undefined ? {} : { traceparent: delivery.traceparent });
