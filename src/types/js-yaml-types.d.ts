// js-yaml exports its built-in types, for a schema that overrides one (its own tests override `int`
// for BigInt this way); @types/js-yaml does not declare them.
import type { Type, TypeConstructorOptions } from 'js-yaml';

declare module 'js-yaml' {
  export const types: { int: Type & { options: TypeConstructorOptions } };
}
