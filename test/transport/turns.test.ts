// The page reads' turns alone (src/transport/load-shedding.ts), on a clock the test sets: a read refused
// by a full queue is told to come back after as long as the read at the head of the queue has waited.
import { EventEmitter, once } from 'node:events';
import t from 'tap';
import { turns } from '../../src/transport/load-shedding.ts';

t.test('Retry-After is how long the head of a full queue has waited, in whole seconds, at least 1', async (t) => {
  let clock = 0;
  const queue = turns(1, 2, () => clock);
  const events = new EventEmitter();
  // The read in hand holds its turn until the test ends it.
  const inHand = queue.take(async () => {
    events.emit('started');
    await once(events, 'end');
    return 'served';
  });
  await once(events, 'started');
  t.equal(queue.retryAfter(), 1, 'no read waiting: 1 second');
  const waiting = [queue.take(async () => 'first waiting'), queue.take(async () => 'second waiting')];
  clock = 2_500;
  t.equal(await queue.take(async () => 'refused'), undefined, 'past the queue, a read is refused without running');
  t.equal(queue.retryAfter(), 3, 'the head has waited 2.5 s: come back in 3');
  events.emit('end');
  t.same(await Promise.all([inHand, ...waiting]), ['served', 'first waiting', 'second waiting'], 'the read in hand and the queue are served in order');
  t.equal(queue.retryAfter(), 1, 'the queue drained: 1 second again');
});
