// A route's hook option as Fastify takes it (one function, a list of them, or none), as a list, so
// that what an onRoute hook adds goes after what the route already had.
export function hookList<T>(value: T | T[] | undefined): T[] {
  if (value === undefined) return [];
  return Array.isArray(value) ? value : [value];
}
