// The store over one driver: a repository per concern, each written once for both databases.
import { SqlPlants } from './plants.ts';
import type { Driver } from './sql.ts';
import { SqlTokens } from './tokens.ts';
import type { PlantStore } from './types.ts';
import { SqlWebhooks } from './webhooks.ts';

export class SqlStore implements PlantStore {
  readonly plants: SqlPlants;
  readonly tokens: SqlTokens;
  readonly webhooks: SqlWebhooks;
  readonly #driver: Driver;

  constructor(driver: Driver) {
    this.#driver = driver;
    this.plants = new SqlPlants(driver);
    this.tokens = new SqlTokens(driver);
    this.webhooks = new SqlWebhooks(driver);
  }

  ping(): Promise<void> {
    return this.#driver.ping();
  }

  close(): Promise<void> {
    return this.#driver.close();
  }
}
