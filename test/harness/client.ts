// A client generated from the contract: openapi-fetch typed by src/generated/openapi.ts, so a
// spec change that would break clients breaks the type check. Requests go to the app through
// app.inject, from helper.ts's TEST_ORIGIN, and every response is checked against openapi.yaml on the way back.
import type { FastifyInstance } from 'fastify';
import createClient from 'openapi-fetch';
import type { Test } from 'tap';
import type { paths } from '../../src/generated/openapi.ts';
import { parseJson } from '../../src/contract/json.ts';
import { contractProblems } from './contract.ts';
import { fromTestOrigin, TOKEN } from './helper.ts';

/** Responses whose json() keeps int64 exact, as a bigint-aware client would parse them. */
class ExactJsonResponse extends Response {
  override json = async (): Promise<unknown> => parseJson(await this.text());
}

const NO_BODY = new Set([204, 304]);

export function typedClient(t: Test, app: FastifyInstance, token: string = TOKEN) {
  return createClient<paths>({
    baseUrl: 'http://plants.test',
    headers: { authorization: `Bearer ${token}` },
    bodySerializer: (body: unknown) =>
      JSON.stringify(body, (_key, value: unknown) => (typeof value === 'bigint' ? JSON.rawJSON(String(value)) : value)),
    fetch: async (request: Request) => {
      const { pathname, search } = new URL(request.url);
      const payload = request.body ? Buffer.from(await request.arrayBuffer()) : undefined;
      const response = await app.inject({
        method: request.method as 'GET',
        url: pathname + search,
        headers: fromTestOrigin(Object.fromEntries(request.headers)),
        ...(payload && { payload }),
      });
      const label = `${request.method} ${pathname}${search} ${response.statusCode}`;
      t.same(contractProblems(request.method, pathname, response), [], `${label} matches openapi.yaml`);
      const headers = new Headers();
      for (const [name, value] of Object.entries(response.headers)) {
        if (value !== undefined) headers.set(name, String(value));
      }
      return new ExactJsonResponse(NO_BODY.has(response.statusCode) ? null : response.body, {
        status: response.statusCode,
        headers,
      });
    },
  });
}

export type TypedClient = ReturnType<typeof typedClient>;
