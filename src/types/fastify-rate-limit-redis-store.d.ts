// @fastify/rate-limit's Redis store (its Lua script: INCR, PEXPIRE on the first hit, PTTL), which the
// package ships without a declaration of its own.
declare module '@fastify/rate-limit/store/RedisStore.js' {
  import type { Redis } from 'ioredis';

  export default class RedisStore {
    constructor(continueExceeding: boolean, exponentialBackoff: boolean, redis: Redis, key?: string);
    incr(key: string, callback: (error: Error | null, result: { current: number; ttl: number } | null) => void, timeWindow: number, max: number): void;
  }
}
