// Where the repository is, for tests that read its files or run its scripts.
import { fileURLToPath } from 'node:url';

export const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));
