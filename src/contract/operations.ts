// Handler types from the generated `operations` type, by operationId: a spec change a handler does not follow fails the type check.
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { operations, paths } from '../generated/openapi.ts';

type Method = 'get' | 'put' | 'post' | 'delete' | 'patch' | 'head' | 'options' | 'trace';
type ServedOperation = { [P in keyof paths]: { [M in Method]: paths[P][M] }[Method] }[keyof paths];

/** The operations the service serves: those under `paths`, not the `webhooks` it sends. */
type OperationId = { [Op in keyof operations]: operations[Op] extends ServedOperation ? Op : never }[keyof operations];

type JsonContent<T> = T extends { content: { 'application/json': infer Body } } ? Body : never;
type Part<T, K extends string> = T extends { [P in K]?: infer V } ? ([V] extends [never] ? unknown : NonNullable<V>) : unknown;

type OperationRequest<Op extends OperationId> = FastifyRequest<{
  Body: operations[Op] extends { requestBody: infer R } ? JsonContent<R> : unknown;
  Params: Part<operations[Op]['parameters'], 'path'>;
  Querystring: Part<operations[Op]['parameters'], 'query'>;
}>;

/** The JSON body of a 2xx response the operation declares. */
type SuccessBody<Op extends OperationId> = {
  [Status in keyof operations[Op]['responses']]: Status extends 200 | 201 ? JsonContent<operations[Op]['responses'][Status]> : never;
}[keyof operations[Op]['responses']];

export type OperationHandler<Op extends OperationId> = (
  request: OperationRequest<Op>,
  reply: FastifyReply,
) => Promise<SuccessBody<Op> | FastifyReply>;

export type ServiceHandlers = { [Op in OperationId]: OperationHandler<Op> };
