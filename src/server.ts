// The process: configuration -> store -> app -> listen, and a clean stop on SIGTERM/SIGINT (started by entry.js).
import { buildApp } from './app.ts';
import { readSpecification, SpecificationError } from './spec-path.ts';
import { ConfigError, loadConfig, storeOptions, type Config } from './config.ts';
import { checkSpecificationAtStart } from './contract/specification.ts';
import { standardOutput } from './observability/logging.ts';
import { DatabaseUrlError, openStore } from './store/factory.ts';
import { checkPlantFields } from './store/plant-fields.ts';
import { LOCK_WAIT_MS } from './store/sqlite.ts';
import { ensureFirstToken } from './tokens/bootstrap.ts';

async function main(): Promise<void> {
  const config = loadConfig();
  const { SHUTDOWN_DELAY: shutdownDelayMs, SHUTDOWN_TIMEOUT: shutdownMs } = config;
  // Before the store opens: a contract that cannot be served, or kept by the store, must not migrate the database either.
  await checkSpecificationAtStart();
  checkPlantFields(readSpecification());
  const store = await openStore(config.DATABASE_URL, {
    ...storeOptions(config),
    onConnectionError: (error, retryInMs) => warn(retryInMs === undefined ? 'database connection lost' : `database unreachable; retrying in ${retryInMs} ms`, error),
    onLockWait: (error) => warn(`another process holds the SQLite write lock; writes wait for it up to ${LOCK_WAIT_MS / 1000} s, then answer 503`, error),
  });
  const app = await buildApp({ config, store });

  // `on`, not `once`: Ctrl-C on `npm start` delivers SIGINT twice, and a second one must not kill the stop.
  // SIGTERM (an orchestrator) drains for SHUTDOWN_DELAY first; SIGINT stops at once, cutting a delay short.
  let delay: NodeJS.Timeout | undefined;
  let stopping = false;
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.on(signal, () => {
      if (stopping) return app.log.info({ signal }, 'already shutting down');
      if (signal === 'SIGINT' || shutdownDelayMs === 0) return stop(signal);
      if (delay !== undefined) return app.log.info({ signal }, 'already draining');
      // Readiness fails, so balancers take the instance out at their next check, while everything is served as usual.
      app.log.info({ signal, delayMs: shutdownDelayMs }, 'draining: readiness fails, serving goes on until SHUTDOWN_DELAY is over');
      app.lifecycle.drain();
      delay = setTimeout(() => stop(signal), shutdownDelayMs);
    });
  }

  // The listener closes first, then the app drains (lifecycle.ts), then the store: closing the app still writes.
  async function stop(signal: NodeJS.Signals): Promise<void> {
    stopping = true;
    clearTimeout(delay);
    setTimeout(() => {
      app.log.error({ timeoutMs: shutdownMs }, 'shutdown timed out; exiting anyway');
      process.exit(1);
    }, shutdownMs).unref();
    try {
      await app.lifecycle.stopAccepting();
      app.log.info({ signal, timeoutMs: shutdownMs }, 'shutting down');
      await app.close();
      await store.close();
      app.log.info('stopped cleanly');
      process.exit(0);
    } catch (error) {
      app.log.error({ err: error }, 'shutdown failed');
      process.exit(1);
    }
  }

  await app.listen({ host: config.HOST, port: config.PORT }).catch((error: unknown) => {
    throw listenFailure(error, config);
  });
  // With PORT=0 the system picks the port; the example must show the real one.
  const address = app.server.address();
  const port = typeof address === 'object' && address !== null ? address.port : config.PORT;
  // Created only once listening succeeded: a token made by a start that then failed would never be shown.
  const firstToken = await ensureFirstToken(store.tokens, config.API_TOKENS);
  if (firstToken) announceFirstToken(firstToken, { ...config, PORT: port });
}

// Before the app (and its logger) exists, and after: a JSON line in the same shape as the logs, through the logger's own stdout.
function warn(msg: string, error: Error): void {
  standardOutput().write(`${JSON.stringify({ level: 40, time: Date.now(), pid: process.pid, msg, err: { message: error.message } })}\n`);
}

// Shown once, on the start that created it; only its hash is stored, so it cannot be shown again.
function announceFirstToken(token: string, config: Config): void {
  const host = config.HOST === '0.0.0.0' || config.HOST === '::' ? '127.0.0.1' : config.HOST;
  const base = `http://${host.includes(':') ? `[${host}]` : host}:${config.PORT}`;
  process.stderr.write(
    [
      '',
      'No API token existed, so this one was created. It is shown only now; the store keeps just its hash.',
      `  API token: ${token}`,
      `  Try it:    curl -H "Authorization: Bearer ${token}" -H "Content-Type: application/json" -d '{"id":1,"name":"Monstera","tag":"aroid"}' ${base}/plants`,
      `  Docs:      ${base}/docs (use the Authorize button with the token)`,
      '',
    ].join('\n') + '\n',
  );
}

main().catch((error: unknown) => {
  process.stderr.write(`plant-store failed to start: ${describeBootFailure(error)}\n`);
  process.exit(1);
});

// Why the socket could not be opened, in terms of the two variables that choose it.
function listenFailure(error: unknown, config: Config): unknown {
  const at = `PORT ${config.PORT} on HOST ${config.HOST}`;
  const advice: Record<string, string> = {
    EADDRINUSE: `${at} is already in use (EADDRINUSE): stop the process holding it, or choose another PORT (0 lets the system pick one).`,
    EACCES: `${at} needs privileges this user lacks: choose a PORT above 1023.`,
    EADDRNOTAVAIL: `HOST ${config.HOST} is not an address of this machine: use one of its addresses, 127.0.0.1, or 0.0.0.0 for all of them.`,
    ENOTFOUND: `HOST ${config.HOST} does not resolve to an address: use an IP address (127.0.0.1, 0.0.0.0) or a name this machine resolves.`,
    EAI_AGAIN: `HOST ${config.HOST} could not be resolved (the name service did not answer): use an IP address such as 127.0.0.1 or 0.0.0.0.`,
  };
  const code = (error as NodeJS.ErrnoException)?.code;
  return code !== undefined && code in advice ? new ConfigError(advice[code], { cause: error }) : error;
}

// Configuration, contract and system errors (a port in use) speak for themselves; anything else is a bug, so keep its stack.
function describeBootFailure(error: unknown): string {
  if (error instanceof ConfigError || error instanceof DatabaseUrlError || error instanceof SpecificationError) return error.message;
  if (error instanceof Error && 'syscall' in error) return error.message;
  return String((error as Error)?.stack ?? error);
}
