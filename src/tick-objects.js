// process.nextTick makes each tick object with an object literal whose first keys are computed
// (symbols): `{ [async_id_symbol], [trigger_async_id_symbol], [async_context_frame], callback, args }`
// in node:internal/process/task_queues. V8 adds those keys one at a time, each step a transition to
// the next hidden class (map), and each step's inline cache remembers the one map it saw, weakly.
// Those maps are kept alive only by live tick objects (and by optimized code that inlines nextTick).
// A full GC that runs while no tick object is alive frees them (at startup, module loading runs
// several; later, V8's memory reducer runs one once the process goes quiet); the next tick builds
// new maps, and each step, having now seen a second map, turns megamorphic for good: V8 has no
// polymorphic state for these steps. From then on every nextTick looks its transitions up in V8's
// runtime, and a request makes about seven. Measured with %DebugPrint(process.nextTick): the bare
// Fastify route of scripts/bench-targets.ts was megamorphic in 8 of 10 starts, and that cost about
// 3-4 µs per request (see the commit that added this file).
// Holding one tick object for the life of the process keeps its maps, so the caches stay monomorphic.
// It cannot help against the other way to the same end: a field widened from small integer to double
// (V8 then replaces the maps). Started plainly, the first tick objects already carry their async ids
// as doubles, so that never happens; started under tap's coverage preload, whose ticks come first,
// they carry small integers, and nextTick goes megamorphic at once whatever this module does.
// It has to happen before anything else, since a flip cannot be undone: so importing this module does
// it, and entry.js (and scripts/bench-targets.ts) import it first, before the modules whose loading
// runs full GCs. Plain JavaScript so that entry.js loads it before Node's TypeScript stripper.
import { createHook } from 'node:async_hooks';

let kept;
// The only way to reach a tick object: an async hook sees it being made. Enabled for one tick only.
const hook = createHook({
  init(_asyncId, type, _triggerAsyncId, resource) {
    if (type === 'TickObject') kept ??= resource;
  },
}).enable();
process.nextTick(() => undefined);
hook.disable();
