// The contract as written (YAML, byte for byte) and as JSON: each built once, plain and compressed, on first request.
import { exactJson } from '../int64.ts';
import { readSpecification, readSpecificationText } from '../spec-path.ts';
import type { ServiceHandlers } from '../contract/operations.ts';
import { sendStored, storeAnswer, type StoredAnswer } from '../transport/compression.ts';

export function createDocsHandlers(): Pick<ServiceHandlers, 'getOpenApiJson' | 'getOpenApiYaml'> {
  let json: Promise<StoredAnswer> | undefined;
  let yaml: Promise<StoredAnswer> | undefined;
  return {
    async getOpenApiJson(request, reply) {
      json ??= storeAnswer('application/json; charset=utf-8', exactJson(readSpecification()));
      return sendStored(request, reply, await json);
    },
    async getOpenApiYaml(request, reply) {
      yaml ??= storeAnswer('application/yaml', readSpecificationText());
      return sendStored(request, reply, await yaml);
    },
  };
}
