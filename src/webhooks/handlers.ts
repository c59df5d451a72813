// The subscription operations, one function per operationId.
import { randomBytes } from 'node:crypto';
import type { components } from '../generated/openapi.ts';
import { HttpError } from '../contract/errors.ts';
import type { ServiceHandlers } from '../contract/operations.ts';
import { keysetPages } from '../contract/paging.ts';
import { SubscriptionLimitError, WEBHOOK_EVENTS, type Subscription, type WebhookRepository } from '../store/types.ts';
import { targetProblem } from './targets.ts';

type WebhookHandlers = Pick<
  ServiceHandlers,
  'createWebhook' | 'listWebhooks' | 'deleteWebhook' | 'rotateWebhookSecret' | 'enableWebhook' | 'listWebhookDeliveries'
>;

/** How long the replaced secret keeps signing after a rotation (documented in openapi.yaml and docs/webhooks.md). */
const SECRET_OVERLAP_MS = 24 * 3_600_000;

type WebhookHandlerOptions = { store: WebhookRepository; allowPrivateNetworks: boolean; subscriptionsMax: number };

export function createWebhookHandlers(options: WebhookHandlerOptions): WebhookHandlers {
  const { store, allowPrivateNetworks, subscriptionsMax } = options;
  const subscriptionPage = keysetPages<Subscription>('/webhooks', (subscription) => subscription.id);
  const full = new HttpError(
    409,
    `This store already holds ${subscriptionsMax} webhook subscriptions, the most WEBHOOK_SUBSCRIPTIONS_MAX allows; ` +
      'delete one, or raise WEBHOOK_SUBSCRIPTIONS_MAX, and send the request again.',
  );
  return {
    async createWebhook(request, reply) {
      const { url, events = [...WEBHOOK_EVENTS] } = request.body;
      const problem = await targetProblem(url, allowPrivateNetworks);
      if (problem) throw new HttpError(400, `The request body field "url" ${problem}.`);
      const secret = generateSecret();
      const subscription = await store.createSubscription({ url, events, secret }, subscriptionsMax).catch((error: unknown) => {
        throw error instanceof SubscriptionLimitError ? full : error;
      });
      reply.code(201);
      return { ...toWebhook(subscription), secret }; // the only time the secret is shown
    },

    async listWebhooks(request, reply) {
      return (await subscriptionPage(reply, request.query, (after, limit) => store.listSubscriptions({ after, limit }))).map(toWebhook);
    },

    async deleteWebhook(request, reply) {
      if (!(await store.deleteSubscription(request.params.webhookId))) throw notFound(request.params.webhookId);
      return reply.code(204).send();
    },

    async rotateWebhookSecret(request) {
      const secret = generateSecret();
      const subscription = await store.rotateSubscriptionSecret(request.params.webhookId, secret, new Date(Date.now() + SECRET_OVERLAP_MS));
      if (!subscription) throw notFound(request.params.webhookId);
      return { ...toWebhook(subscription), secret }; // the only time the new secret is shown
    },

    async enableWebhook(request) {
      const subscription = await store.enableSubscription(request.params.webhookId);
      if (!subscription) throw notFound(request.params.webhookId);
      return toWebhook(subscription);
    },

    async listWebhookDeliveries(request) {
      const deliveries = await store.listDeliveries(request.params.webhookId, request.query.limit!);
      if (!deliveries) throw notFound(request.params.webhookId);
      return deliveries.map(({ messageId, ...rest }) => ({ id: messageId, ...rest }));
    },
  };
}

/** Standard Webhooks secrets: `whsec_` and base64 of random bytes. */
function generateSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

function toWebhook({ disabledAt, previousSecretExpiresAt, ...subscription }: Subscription): components['schemas']['Webhook'] {
  return {
    ...subscription,
    enabled: disabledAt === undefined,
    // A rotation's overlap is shown while it lasts.
    ...(Date.parse(previousSecretExpiresAt ?? '') > Date.now() && { previousSecretExpiresAt }),
  };
}

function notFound(id: bigint): HttpError {
  return new HttpError(404, `There is no webhook subscription with id ${id}.`);
}
