// The contract's rules for every request: bodies read exactly and validated strictly, every failure an Error body.
// Registered before any route, which takes the error handler and validator compiler in force when it is added.
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { installErrorHandling } from './errors.ts';
import { useExactJsonBodies } from './json.ts';
import { refuseMalformedQueries } from './query.ts';
import { validatorCompiler } from './validation.ts';

async function contract(app: FastifyInstance): Promise<void> {
  installErrorHandling(app);
  app.setValidatorCompiler(validatorCompiler);
  useExactJsonBodies(app);
  refuseMalformedQueries(app);
}

export default fp(contract, { name: 'contract', fastify: '5.x' });
