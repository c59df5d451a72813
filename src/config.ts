// Environment -> typed, validated configuration. Fails at boot with a message naming the variable.
import { envSchema } from 'env-schema';

export interface Config {
  host: string;
  port: number;
  databaseUrl: string;
  apiTokens: string[];
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
}

interface RawEnv {
  HOST: string;
  PORT: number;
  DATABASE_URL: string;
  API_TOKENS: string;
  LOG_LEVEL: Config['logLevel'];
}

const schema = {
  type: 'object',
  properties: {
    HOST: { type: 'string', minLength: 1, default: '127.0.0.1' },
    PORT: { type: 'integer', minimum: 0, maximum: 65535, default: 3000 },
    DATABASE_URL: { type: 'string', minLength: 1, default: 'sqlite:./data/plants.db' },
    API_TOKENS: { type: 'string', default: '' },
    LOG_LEVEL: {
      type: 'string',
      enum: ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'],
      default: 'info',
    },
  },
} as const;

export class ConfigError extends Error {}

/** Reads and validates the environment; throws ConfigError whose message names what is wrong. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  let raw: RawEnv;
  try {
    raw = envSchema<RawEnv>({ schema, data: { ...env }, env: false, dotenv: false });
  } catch (error) {
    throw new ConfigError(`Invalid configuration: ${explain((error as Error).message)}`);
  }
  return {
    host: raw.HOST,
    port: raw.PORT,
    databaseUrl: raw.DATABASE_URL,
    apiTokens: parseTokenList(raw.API_TOKENS),
    logLevel: raw.LOG_LEVEL,
  };
}

// Short or space-laden tokens are almost always a paste mistake; refuse them at boot.
const STATIC_TOKEN = /^[\x21-\x7e]{16,}$/;

function parseTokenList(list: string): string[] {
  const tokens = list.split(',').map((token) => token.trim()).filter(Boolean);
  if (!tokens.every((token) => STATIC_TOKEN.test(token))) {
    throw new ConfigError(
      'Invalid configuration: API_TOKENS must be comma-separated tokens of at least 16 printable characters without spaces',
    );
  }
  return tokens;
}

// env-schema reports "env/PORT must be <= 65535"; the variable name is what an operator needs.
function explain(message: string): string {
  return message.replace(/env\//g, '');
}
