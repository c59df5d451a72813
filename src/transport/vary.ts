// Vary is shared (CORS puts Origin in it, compression Accept-Encoding): setting it would drop the other's field.
import type { FastifyReply } from 'fastify';

export function addVary(reply: FastifyReply, field: string): void {
  const current = reply.getHeader('vary');
  const fields = current === undefined ? [] : String(current).split(',').map((name) => name.trim()).filter(Boolean);
  if (fields.some((name) => name.toLowerCase() === field.toLowerCase())) return;
  reply.header('vary', [...fields, field].join(', '));
}
