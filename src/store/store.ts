// The store over one driver: a repository per concern, each written once for both databases.
import { SqlPlants } from './plants.ts';
import type { Driver } from './sql.ts';
import { SqlTokens } from './tokens.ts';
import type { PlantRepository, TokenRepository, WebhookRepository } from './types.ts';
import { SqlWebhooks } from './webhooks.ts';

export class SqlStore {
  readonly plants: PlantRepository;
  readonly tokens: TokenRepository;
  readonly webhooks: WebhookRepository;
  /** Resolves when the store answers a trivial query, and never writes; a driver whose storage failed a write rejects until it can take one. */
  readonly ping: () => Promise<void>;
  readonly close: () => Promise<void>;

  constructor(driver: Driver) {
    this.plants = new SqlPlants(driver);
    this.tokens = new SqlTokens(driver);
    this.webhooks = new SqlWebhooks(driver);
    this.ping = () => driver.ping();
    this.close = () => driver.close();
  }
}
