// The readers of npm run bench:load, in a worker thread of their own so that reading 100+ MB/s
// does not delay the bench's /healthz probe on its event loop. Reader i reads paths[i % paths.length]
// again as soon as the answer ends; on the message "stop", the worker posts the count of answers
// per status (0: a failed connection) and exits. A reader given `bytesPerSecond` reads its answers
// no faster than that (pausing after each chunk), and on "stop" drops the answer it is reading.
import { Agent, request } from 'node:http';
import { parentPort, workerData } from 'node:worker_threads';

const { port, paths, encoding, readers, token, bytesPerSecond } = workerData as {
  port: number;
  paths: string[];
  encoding: string;
  readers: number;
  token?: string;
  bytesPerSecond?: number;
};
const agent = new Agent({ keepAlive: true, maxSockets: readers });
const statuses = new Map<number, number>();
const state = { reading: true };

parentPort!.on('message', (message) => {
  if (message === 'reset') statuses.clear();
  if (message === 'stop') {
    state.reading = false;
    if (bytesPerSecond !== undefined) agent.destroy(); // a slow reader's answer would take seconds more
  }
});

await Promise.all(
  Array.from({ length: readers }, async (_, reader) => {
    while (state.reading) {
      const status = await get(paths[reader % paths.length]!).catch(() => 0);
      if (state.reading) statuses.set(status, (statuses.get(status) ?? 0) + 1);
    }
  }),
);
agent.destroy();
parentPort!.postMessage(statuses);

function get(path: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const headers = { 'accept-encoding': encoding, ...(token !== undefined && { authorization: `Bearer ${token}` }) };
    const outgoing = request({ port, host: '127.0.0.1', path, headers, agent }, (incoming) => {
      if (bytesPerSecond !== undefined) {
        incoming.on('data', (chunk: Buffer) => {
          incoming.pause();
          setTimeout(() => incoming.resume(), (chunk.length / bytesPerSecond) * 1000);
        });
      }
      incoming.resume();
      incoming.on('end', () => resolve(incoming.statusCode ?? 0));
      incoming.on('error', reject);
    });
    outgoing.on('error', reject);
    outgoing.end();
  });
}
