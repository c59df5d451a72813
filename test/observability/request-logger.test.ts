// A request's logger on its own (src/observability/logging.ts's lazyChildLogger): the pino child is made on the
// first line written at an enabled level, never for a request that logs nothing; its lines are the child's.
import { Writable } from 'node:stream';
import Fastify, { type FastifyBaseLogger } from 'fastify';
import t from 'tap';
import { lazyChildLogger } from '../../src/observability/logging.ts';

function logger(level: string) {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
      done();
    },
  });
  const pino = Fastify({ logger: { level, stream } }).log;
  let children = 0;
  // The logger as it is, counting the children made of it (theirs are not counted).
  const parent: FastifyBaseLogger = Object.create(pino);
  parent.child = (bindings, options) => {
    children++;
    return pino.child(bindings, options);
  };
  return { parent, lines, children: () => children };
}

t.test('a request that logs nothing at an enabled level makes no child', async (t) => {
  const { parent, lines, children } = logger('warn');
  const log = lazyChildLogger(parent, { reqId: 'quiet' }, {});
  log.info('not written');
  log.debug('not written');
  log.trace('not written');
  log.silent('never written');
  t.equal(children(), 0, 'no child made');
  t.same(lines, [], 'and no line');
});

t.test('the first line makes the child, once; every line carries its bindings', async (t) => {
  const { parent, lines, children } = logger('info');
  const log = lazyChildLogger(parent, { reqId: 'talkative' }, {});
  log.info({ step: 1 }, 'first');
  log.warn('second');
  log.error(new Error('third'));
  log.fatal('fourth');
  t.equal(children(), 1, 'one child');
  t.match(lines, [
    { reqId: 'talkative', step: 1, msg: 'first' },
    { reqId: 'talkative', msg: 'second' },
    { reqId: 'talkative', err: { message: 'third' } },
    { reqId: 'talkative', msg: 'fourth' },
  ]);
  t.equal(log.level, 'info', 'its level is the parent’s');
  log.level = 'error';
  log.warn('below its own level now');
  t.equal(lines.length, 4, 'and can be set on it alone');
  t.equal(parent.level, 'info', 'not on the parent');
});

t.test('a child of the request logger carries both bindings', async (t) => {
  const { parent, lines } = logger('info');
  lazyChildLogger(parent, { reqId: 'traced' }, {}).child({ trace_id: 'abc' }).info('inside');
  t.match(lines, [{ reqId: 'traced', trace_id: 'abc', msg: 'inside' }]);
});
