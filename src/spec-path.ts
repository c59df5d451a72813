// Where the contract lives; a module of its own so that small entry points need not load the app.
import { fileURLToPath } from 'node:url';

export const SPEC_PATH = fileURLToPath(new URL('../openapi.yaml', import.meta.url));
