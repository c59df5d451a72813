// The contract's rules for every request and answer: request bodies are JSON read exactly (int64
// as BigInt), validated strictly against openapi.yaml's schemas, and every failure, from any layer,
// leaves as the published Error body. Registered before any route, since routes take the error
// handler and the validator compiler in force when they are added.
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { installErrorHandling, type ErrorHandlingOptions } from './errors.ts';
import { useExactJsonBodies } from './json.ts';
import { refuseMalformedQueries } from './query.ts';
import { validatorCompiler } from './validation.ts';

async function contract(app: FastifyInstance, options: ErrorHandlingOptions): Promise<void> {
  installErrorHandling(app, options);
  app.setValidatorCompiler(validatorCompiler);
  useExactJsonBodies(app);
  refuseMalformedQueries(app);
}

export default fp(contract, { name: 'contract', fastify: '5.x' });
