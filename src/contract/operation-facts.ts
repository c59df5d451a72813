// What openapi.yaml says of each operation, read once at start; where OpenAPI has no word, one `x-` extension.
import { SpecificationError } from '../spec-path.ts';

export type OperationFacts = Readonly<ReturnType<typeof factsOf>>;

/** The one extension: OpenAPI cannot say that an operation must answer while the instance is overloaded. */
const ANSWERED_UNDER_PRESSURE = 'x-answered-under-pressure';

/** openapi.yaml states things that cannot all hold; the message, one line, names where and what to change. */
export class ContradictoryContractError extends SpecificationError {}

type Node = Record<string, unknown>;

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

/** The facts of every operation under `paths` (the `webhooks` are sent, not served), by operationId, which names its handler. */
export function deriveOperationFacts(specification: object): Map<string, OperationFacts> {
  const document = specification as Node;
  const facts = new Map<string, OperationFacts>();
  const declaredAt = new Map<string, string>();
  for (const [path, pathItem] of Object.entries(objectAt(document, 'paths'))) {
    for (const method of METHODS.filter((name) => name in objectAt(pathItem))) {
      const operation = objectAt(pathItem, method);
      const where = `${method.toUpperCase()} ${path}`;
      const { operationId } = operation;
      if (typeof operationId !== 'string') {
        throw new SpecificationError(`openapi.yaml's ${where} has no operationId: give it one, the name of the handler that serves it.`);
      }
      if (declaredAt.has(operationId)) {
        throw new SpecificationError(
          `openapi.yaml names both ${declaredAt.get(operationId)} and ${where} "${operationId}": give each its own operationId, the name of the handler that serves it.`,
        );
      }
      declaredAt.set(operationId, where);
      facts.set(operationId, factsOf(document, objectAt(pathItem), operation));
    }
  }
  return facts;
}

function factsOf(document: Node, pathItem: Node, operation: Node) {
  const operationId = operation.operationId as string;
  const refuse = (what: string) => new ContradictoryContractError(`openapi.yaml: operation "${operationId}" ${what}`);
  const responses = Object.entries(objectAt(operation, 'responses')).map(([status, response]) => [status, resolve(document, response)] as const);
  const pageAnswer = arrayAnswer(document, responses.find(([status]) => status === '200')?.[1]);
  const limit = queryParameter(document, [pathItem, operation], 'limit');
  if (limit !== undefined && pageAnswer === undefined) {
    throw refuse('takes a `limit` query parameter, which makes it a page read, but its 200 answer is not an array: answer an array (a page), or remove `limit`.');
  }
  if (pageAnswer !== undefined) checkPageBound(pageAnswer, limit, refuse);
  // Header names are case-insensitive.
  const encoded = responses.filter(([, response]) =>
    Object.keys(objectAt(response, 'headers')).some((name) => name.toLowerCase() === 'content-encoding'),
  );
  const bodiless = encoded.find(([, response]) => Object.keys(objectAt(response, 'content')).length === 0);
  if (bodiless !== undefined) {
    throw refuse(`declares \`Content-Encoding\` on its ${bodiless[0]} response, which has no content to compress: remove the header from that response.`);
  }
  const mark = operation[ANSWERED_UNDER_PRESSURE];
  if (mark !== undefined && typeof mark !== 'boolean') {
    throw refuse(`has \`${ANSWERED_UNDER_PRESSURE}: ${JSON.stringify(mark)}\`; write true or false, or leave it out.`);
  }
  return {
    operationId,
    // Empty (`security: []`): it needs no token.
    security: (operation.security ?? document.security ?? []) as readonly Record<string, string[]>[],
    compressed: encoded.length > 0,
    pageRead: limit !== undefined,
    answeredUnderPressure: mark === true,
    requestMediaTypes: Object.keys(objectAt(resolve(document, operation.requestBody), 'content')),
    responseMediaTypes: [...new Set(responses.flatMap(([, response]) => Object.keys(objectAt(response, 'content'))))],
  };
}

// A page answer holds no more than `maxItems`, which must allow the largest `limit`: no unbounded list.
function checkPageBound(schema: Node, limit: Node | undefined, refuse: (what: string) => Error): void {
  const largest = objectAt(limit, 'schema').maximum;
  if (typeof schema.maxItems !== 'number') {
    const bound = typeof largest === 'number' ? `, ${largest}, the largest \`limit\`` : '';
    throw refuse(`answers 200 with an array without \`maxItems\`: give that array \`maxItems\`${bound}, so that no answer is an unbounded list.`);
  }
  if (typeof largest === 'number' && schema.maxItems < largest) {
    throw refuse(`answers 200 with at most ${schema.maxItems} items (\`maxItems\`) but takes a \`limit\` up to ${largest}: make them equal.`);
  }
}

function arrayAnswer(document: Node, response: Node | undefined): Node | undefined {
  const media = Object.values(objectAt(response, 'content'));
  return media.map((type) => resolve(document, objectAt(type).schema)).find((schema) => schema.type === 'array');
}

/** The query parameter of that name, from the operation or its path (which OpenAPI lets it override). */
function queryParameter(document: Node, owners: Node[], name: string): Node | undefined {
  const parameters = owners.flatMap((owner) => (Array.isArray(owner.parameters) ? owner.parameters : []).map((parameter) => resolve(document, parameter)));
  return parameters.findLast((parameter) => parameter.in === 'query' && parameter.name === name);
}

/** The object a local `$ref` (`#/components/...`) names, following chains; anything else as it is. */
export function resolve(document: Node, node: unknown, seen = new Set<string>()): Node {
  const reference = objectAt(node).$ref;
  if (typeof reference !== 'string' || !reference.startsWith('#/') || seen.has(reference)) return objectAt(node);
  seen.add(reference);
  const target = reference.slice(2).split('/').map(unescapePointer).reduce<unknown>((at, key) => objectAt(at)[key], document);
  return resolve(document, target, seen);
}

// JSON Pointer's escapes (RFC 6901): ~1 is /, ~0 is ~.
export function unescapePointer(token: string): string {
  return token.replaceAll('~1', '/').replaceAll('~0', '~');
}

/** `node[key]` (or the node) when it is an object; an empty one otherwise, so that absent parts read as empty. */
function objectAt(node: unknown, key?: string): Node {
  const value = key === undefined ? node : typeof node === 'object' && node !== null ? (node as Node)[key] : undefined;
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Node) : {};
}
