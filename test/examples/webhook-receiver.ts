import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { parsePlantJson } from '@plant-store/client';

const wh = new Webhook(process.env.PLANT_STORE_WEBHOOK_SECRET!); // the whsec_… secret

const server = createServer(async (req, res) => {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk);
  const body = Buffer.concat(chunks).toString('utf8');
  try {
    wh.verify(body, req.headers as Record<string, string>); // the signature and timestamp, on the raw body
  } catch {
    res.writeHead(401).end();
    return;
  }
  // Not verify's result: it comes from JSON.parse, which rounds ids above 2^53.
  const plant = parsePlantJson(body); // { id: 9007199254740993n, name, tag }
  console.log(req.headers['webhook-event'], plant.id, plant.name);
  // … remember req.headers['webhook-id'] to ignore a retry of the same event
  res.writeHead(204).end();
});
server.listen(Number(process.env.PORT ?? 8080), () => {
  console.log(`receiving plant events on port ${(server.address() as AddressInfo).port}`);
});
