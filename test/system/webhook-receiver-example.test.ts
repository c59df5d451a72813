// The webhook receiver of docs/webhooks.md (test/examples/webhook-receiver.ts, shown verbatim) run as a real
// HTTP receiver in its own process, fed a real delivery by a real server: the plant it reads
// keeps the id 2^53+1 exact, and a delivery with a forged signature is refused.
import { spawn } from 'node:child_process';
import { createServer, type AddressInfo } from 'node:net';
import t, { type Test } from 'tap';
import { createPlantStoreClient } from '@plant-store/client';
import { REPO_ROOT } from '../harness/paths.ts';
import { serverEnv, startServer } from '../harness/process.ts';
import { docBlock, example } from '../harness/readme-blocks.ts';

const TOKEN = 'webhook-example-token-0123456789';

/** A loopback port nothing listens on (bound, noted and released): the receiver's URL is needed before it starts. */
async function unusedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Runs the example receiver; `printed(pattern)` resolves when its stdout shows the pattern. */
function startReceiver(t: Test, env: Record<string, string>) {
  const child = spawn(process.execPath, ['test/examples/webhook-receiver.ts'], {
    cwd: REPO_ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  let exited = false;
  const waiters = new Set<() => void>();
  const notify = () => [...waiters].forEach((waiter) => waiter());
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk;
    notify();
  });
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
    notify();
  });
  const closed = new Promise<void>((resolve) => child.once('close', () => {
    exited = true;
    notify();
    resolve();
  }));
  t.teardown(async () => {
    if (!exited) child.kill('SIGKILL');
    await closed;
  });
  const printed = (pattern: RegExp) =>
    new Promise<string>((resolve, reject) => {
      const check = () => {
        const match = pattern.exec(stdout);
        if (match) resolve((waiters.delete(check), match[0]));
        else if (exited) reject((waiters.delete(check), new Error(`the receiver exited; stderr:\n${stderr}`)));
      };
      waiters.add(check);
      check();
    });
  return { printed, stdout: () => stdout, stderr: () => stderr };
}

t.test('docs/webhooks.md shows test/examples/webhook-receiver.ts verbatim', async (t) => {
  t.equal(docBlock('docs/webhooks.md', 'Verify a delivery with any Standard Webhooks library', 'ts'), example('webhook-receiver.ts'));
});

t.test('the example receives a real delivery of plant 9007199254740993 with its id exact', async (t) => {
  const server = await startServer(
    t,
    serverEnv(t.testdir(), { API_TOKENS: TOKEN, WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', WEBHOOK_RETRY_SCHEDULE: '100ms,100ms,100ms' }),
  );
  const store = createPlantStoreClient({ baseUrl: server.url, token: TOKEN });
  const port = await unusedPort();
  const url = `http://127.0.0.1:${port}/hooks/plants`;
  const { secret } = await store.webhooks.create({ url, events: ['plant.created'] });

  const receiver = startReceiver(t, { PORT: String(port), PLANT_STORE_WEBHOOK_SECRET: secret });
  await receiver.printed(/receiving plant events on port \d+\n/);

  const forged = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'webhook-id': 'msg_forged', 'webhook-timestamp': String(Math.floor(Date.now() / 1000)), 'webhook-signature': 'v1,Zm9yZ2Vk' },
    body: '{"id":1,"name":"Forged"}',
  });
  t.equal(forged.status, 401, 'a delivery with a forged signature is refused');

  await store.plants.create({ id: 9007199254740993n, name: 'Monstera', tag: 'aroid' });
  const line = await receiver.printed(/^plant\.created .*\n/m);
  t.equal(line, 'plant.created 9007199254740993n Monstera\n', 'the receiver read the id digit for digit');
  t.notMatch(receiver.stdout(), /Forged/, 'the forged payload was never read');
  t.equal(receiver.stderr(), '', 'nothing on its stderr');
});
