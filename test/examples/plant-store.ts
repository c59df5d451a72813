// What test/examples/generate-types.ts writes: in this repository, the server's own types, made by the
// same transform (test/system/generated-clients.test.ts checks that the two match), so the recipe type-checks.
export type * from '../../src/generated/openapi.ts';
