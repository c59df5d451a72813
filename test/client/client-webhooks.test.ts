// The client pages webhook subscriptions as it pages plants: one page and the query of the next
// (`page`), every one through the Link header (`all`), and `list` keeping its answer, an array of the
// first page. Against the service listening on a real socket.
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { createPlantStoreClient } from '@plant-store/client';
import { build, TOKEN } from '../harness/helper.ts';

t.test('webhooks.page, webhooks.all and webhooks.list page through every subscription', async (t) => {
  const { app } = await build(t, { webhooks: { allowPrivateNetworks: true } });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const store = createPlantStoreClient({ baseUrl: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`, token: TOKEN });
  const ids: bigint[] = [];
  for (let i = 0; i < 5; i++) ids.push((await store.webhooks.create({ url: `http://127.0.0.1:9/hooks/${i}`, events: ['plant.created'] })).id);

  const first = await store.webhooks.page({ limit: 2 });
  t.same(first.webhooks.map((webhook) => webhook.id), ids.slice(0, 2), 'the first two');
  t.match(first.next, { limit: 2, cursor: /^[A-Za-z0-9_-]+$/ }, 'and the query of the next page');
  const second = await store.webhooks.page(first.next);
  t.same(second.webhooks.map((webhook) => webhook.id), ids.slice(2, 4), 'the next two');
  const last = await store.webhooks.page(second.next);
  t.same(last.webhooks.map((webhook) => webhook.id), ids.slice(4), 'the last one');
  t.equal(last.next, undefined, 'and no next page');

  const walked: bigint[] = [];
  for await (const webhook of store.webhooks.all({ limit: 2 })) walked.push(webhook.id);
  t.same(walked, ids, 'all() walks every page');
  t.same((await store.webhooks.list()).map((webhook) => webhook.id), ids, 'list() answers the first page as before: all five');
  t.same((await store.webhooks.list({ limit: 3 })).map((webhook) => webhook.id), ids.slice(0, 3), 'list(query) the page asked for');
});
