// The plants repository: create outcomes and conditional writes, each plant change writing its event's outbox rows in the same unit of work.
import { AsyncLocalStorage } from 'node:async_hooks';
import { randomUUID } from 'node:crypto';
import { COLUMN_KINDS, PLANT_FIELD_NAMES, PLANT_FIELDS } from './plant-fields.ts';
import { all, joined, raw, Repository, run, sql, type EventOrigin, type Spelling, type Sql, type Statement, type Steps } from './sql.ts';
import { pageStart, plantWith, samePlant, unstorableText, type ConditionalWrite, type CreateResult, type PageQuery, type PlantContent, type PlantRecord,
  type Precondition, type VersionedPlant, type WebhookEvent } from './types.ts';
import { emit } from './webhooks.ts';

// Every plant statement names the columns of PLANT_FIELDS (plant-fields.ts), in its order; a read ends with the version.
const FIELDS = raw(PLANT_FIELD_NAMES.join(', '));
const PLANTS = sql`SELECT id, ${FIELDS}, version FROM plants WHERE`;
const READERS = PLANT_FIELD_NAMES.map((field) => COLUMN_KINDS[PLANT_FIELDS[field]].read);

// A page answers no ETags: its rows leave the version unread (on PostgreSQL, an int8 parsed per row).
const LISTED = sql`SELECT id, ${FIELDS} FROM plants WHERE`;

export function plantsWhere(condition: Sql): Statement {
  return { kind: 'tuples', sql: sql`${PLANTS} ${condition}` };
}

/** The id, then each field's column in PLANT_FIELDS order, then the version (a page's rows end before it). */
type PlantRow = [bigint, ...unknown[]];

/** A plant as a record: no key for a null column. */
function toPlant(row: PlantRow): PlantRecord {
  const plant: Record<string, unknown> = { id: row[0] };
  for (let at = 0; at < READERS.length; at++) {
    const value = row[at + 1];
    if (value !== null) plant[PLANT_FIELD_NAMES[at]!] = READERS[at]!(value);
  }
  return plant as PlantRecord;
}

export function toPlants(rows: unknown): PlantRecord[] {
  return (rows as PlantRow[]).map(toPlant);
}

function toVersioned(rows: unknown): VersionedPlant | undefined {
  const row = (rows as PlantRow[])[0];
  return row && { plant: toPlant(row), version: row[READERS.length + 1] as bigint };
}

/** The outcome of a create that found `stored` at its id. */
export function judged(plant: PlantRecord, stored: PlantRecord): CreateResult {
  return { outcome: samePlant(stored, plant) ? 'unchanged' : 'conflict', stored };
}

function* createOne(plant: PlantRecord, origin: EventOrigin, spelling: Spelling): Steps<CreateResult> {
  const values = joined([sql`${plant.id}`, ...PLANT_FIELD_NAMES.map((field) => sql`${plant[field] ?? null}`), spelling.nextVersion], ', ');
  for (;;) {
    if ((yield run(sql`INSERT INTO plants (id, ${FIELDS}, version) VALUES (${values}) ON CONFLICT (id) DO NOTHING`)) === 1) {
      return { outcome: 'created', stored: plant, eventWritten: yield* emit('plant.created', plant, origin) };
    }
    // Each statement sees what is committed: if the row that won was deleted meanwhile, insert again.
    const [stored] = toPlants(yield plantsWhere(sql`id = ${plant.id}`));
    if (stored) return judged(plant, stored);
  }
}

// The traceparent a plant change hands on to its webhook deliveries, set by tracing around the store call.
const outboxTrace = new AsyncLocalStorage<string>();

export function withOutboxTrace<T>(traceparent: string, call: () => T): T {
  return outboxTrace.run(traceparent, call);
}

function newOrigin(): EventOrigin {
  return { key: randomUUID().replaceAll('-', ''), traceparent: outboxTrace.getStore() ?? null };
}

export class SqlPlants extends Repository {
  /** Inserts the plant unless its id exists; the database's uniqueness decides, never check-then-insert. */
  createPlant(plant: PlantRecord): Promise<CreateResult> {
    const refused = unstorableText(plant);
    if (refused) return Promise.reject(refused);
    const origin = newOrigin();
    const alone = () => this.driver.write(() => createOne(plant, origin, this.driver.spelling), 'plant.created');
    return this.driver.createPlant ? this.driver.createPlant(plant, origin, alone) : alone();
  }

  listPlants({ after, tag, limit }: PageQuery): Promise<PlantRecord[]> {
    // A NUL can be no stored tag; PostgreSQL would fail the query rather than find nothing.
    const refused = unstorableText({ tag });
    if (refused) return Promise.reject(refused);
    // An inclusive bound, so that "from the very first id" needs no value below int64.
    const from = pageStart(after);
    if (from === undefined) return Promise.resolve([]);
    // Every LIMIT takes an expression: SQLite re-prepares a statement whose bare LIMIT parameter is bound.
    const page = tag === undefined ? sql`id >= ${from} ORDER BY id` : sql`tag = ${tag} AND id >= ${from} ORDER BY tag, id`;
    return this.query({ kind: 'tuples', sql: sql`${LISTED} ${page} LIMIT CAST(${limit} AS INTEGER)` }, toPlants);
  }

  getPlant(id: bigint): Promise<VersionedPlant | undefined> {
    return this.query(plantsWhere(sql`id = ${id}`), toVersioned);
  }

  replacePlant(id: bigint, content: PlantContent, precondition?: Precondition): Promise<ConditionalWrite> {
    const refused = unstorableText(content);
    if (refused) return Promise.reject(refused);
    const plant = plantWith(id, content);
    const fields = PLANT_FIELD_NAMES.map((field) => sql`${raw(field)} = ${content[field] ?? null}`);
    const columns = joined([...fields, sql`version = ${this.driver.spelling.nextVersion}`], ', ');
    const update = all(sql`UPDATE plants SET ${columns} WHERE id = ${id} RETURNING version`);
    return this.#conditionally('plant.replaced', id, precondition, function* (current) {
      // A replace that finds the same plant stored keeps its version, as a create that finds it does.
      if (samePlant(current.plant, plant)) return current;
      const [written] = (yield update) as { version: bigint }[];
      return { plant, version: written!.version };
    });
  }

  deletePlant(id: bigint, precondition?: Precondition): Promise<ConditionalWrite> {
    const remove = run(sql`DELETE FROM plants WHERE id = ${id}`);
    return this.#conditionally('plant.deleted', id, precondition, function* (current) {
      yield remove;
      return current;
    });
  }

  /** A plant change whose precondition is decided against the row as the write's transaction holds it. */
  #conditionally(
    event: WebhookEvent, id: bigint, precondition: Precondition | undefined, change: (current: VersionedPlant) => Steps<VersionedPlant>,
  ): Promise<ConditionalWrite> {
    const origin = newOrigin();
    const select = plantsWhere(sql`id = ${id}${this.driver.spelling.forUpdate}`);
    return this.driver.write(function* (): Steps<ConditionalWrite> {
      const current = toVersioned(yield select);
      if (!current) return { outcome: 'missing' };
      if (precondition && !precondition(current.plant, current.version)) {
        return { outcome: 'precondition-failed', current: current.plant, version: current.version };
      }
      const written = yield* change(current);
      return { outcome: 'done', ...written, eventWritten: yield* emit(event, written.plant, origin) };
    }, event);
  }
}
