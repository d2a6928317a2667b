import { and, count, eq, lt, type SQL, sql } from 'drizzle-orm'
import type { PgColumn, PgTable } from 'drizzle-orm/pg-core'
import { canCopy, copyIn } from '../../db/binary-copy'
import { type Database, type Executor, runWithoutStatementTimeout, selectRows } from '../../db/client'
import { cardPrices, cards, catalogSource, games, marketplaceRequests, priceHistory, sets, syncRuns } from '../../db/schema'
import { type MarketState, printingKey } from './normalize'

// Every write is batched and idempotent: upserts touch a row only when a value differs, so a
// repeated sync of the same day changes nothing (not even timestamps).

/** Postgres takes at most 65,535 bind parameters per statement. */
const MAX_PARAMS = 60_000

function batches<T>(rows: readonly T[], columnsPerRow: number): T[][] {
  const size = Math.max(1, Math.min(5_000, Math.floor(MAX_PARAMS / columnsPerRow)))
  const out: T[][] = []
  for (let i = 0; i < rows.length; i += size) out.push(rows.slice(i, i + size))
  return out
}

type Columns = Record<string, PgColumn>

/** `SET col = excluded.col …` for the given columns, and a WHERE that skips rows already equal. */
function upsertChanges(columns: Columns) {
  const set: Record<string, SQL> = {}
  const differs: SQL[] = []
  for (const [field, column] of Object.entries(columns)) {
    set[field] = sql.raw(`excluded."${column.name}"`)
    differs.push(sql`${column} is distinct from ${sql.raw(`excluded."${column.name}"`)}`)
  }
  return { set, setWhere: sql.join(differs, sql` or `) }
}

function columnsOf<T extends PgTable>(table: T, fields: (keyof T['_']['columns'] & string)[]): Columns {
  const all = table as unknown as Record<string, PgColumn>
  return Object.fromEntries(fields.map((field) => [field, all[field] as PgColumn]))
}

export type GameRow = typeof games.$inferInsert
export type SetRow = typeof sets.$inferInsert
export type CardRow = typeof cards.$inferInsert
export type PriceRow = typeof cardPrices.$inferInsert
export type HistoryRow = typeof priceHistory.$inferInsert

export async function upsertGames(db: Executor, rows: GameRow[]): Promise<Map<number, number>> {
  if (rows.length > 0) {
    await db
      .insert(games)
      .values(rows)
      .onConflictDoUpdate({
        target: games.marketplaceCategoryId,
        ...upsertChanges(columnsOf(games, ['name', 'slug', 'kind', 'priority', 'imageUrl', 'logoUrl'])),
      })
  }
  const ids = await db.select({ id: games.id, categoryId: games.marketplaceCategoryId }).from(games)
  return new Map(ids.map((row) => [row.categoryId, row.id]))
}

export async function upsertSets(db: Executor, gameId: number, rows: SetRow[]): Promise<Map<number, number>> {
  for (const batch of batches(rows, 9)) {
    await db
      .insert(sets)
      .values(batch)
      .onConflictDoUpdate({
        target: sets.marketplaceGroupId,
        ...upsertChanges(columnsOf(sets, ['gameId', 'name', 'slug', 'abbreviation', 'releaseDate', 'imageUrl', 'setIconUrl'])),
      })
  }
  const ids = await db.select({ id: sets.id, groupId: sets.marketplaceGroupId }).from(sets).where(eq(sets.gameId, gameId))
  return new Map(ids.map((row) => [row.groupId, row.id]))
}

/** A PostgreSQL array literal of texts, bound as one parameter. */
const textArray = (values: string[]) => `{${values.map((value) => `"${value.replace(/[\\"]/g, (c) => `\\${c}`)}"`).join(',')}}`

/** The marketplace's `modifiedOn` each of the game's groups had when its products were last stored. */
export async function findProductsModifiedOn(db: Executor, gameId: number): Promise<Map<number, string>> {
  const rows = await db.select({ groupId: sets.marketplaceGroupId, modifiedOn: sets.productsModifiedOn }).from(sets).where(eq(sets.gameId, gameId))
  return new Map(rows.flatMap((row) => (row.modifiedOn === null ? [] : [[row.groupId, row.modifiedOn] as const])))
}

/** Records that these groups' products were stored as of their `modifiedOn`. */
export async function markProductsStored(db: Executor, groups: { groupId: number; modifiedOn: string }[]): Promise<void> {
  if (groups.length === 0) return
  await db.execute(sql`
    update ${sets} s set products_modified_on = g.modified_on
    from unnest(${`{${groups.map((g) => g.groupId).join(',')}}`}::int[], ${textArray(groups.map((g) => g.modifiedOn))}::text[]) as g(group_id, modified_on)
    where s.marketplace_group_id = g.group_id and s.products_modified_on is distinct from g.modified_on`)
}

const CARD_FIELDS = [
  'setId',
  'gameId',
  'name',
  'cleanName',
  'number',
  'rarity',
  'imageUrl',
  'marketplaceUrl',
  'productType',
  'foilOnly',
  'totalListings',
  'shippingCategoryId',
  'productStatusId',
  'hp',
  'customAttributes',
] as const

export async function upsertCards(db: Executor, gameId: number, rows: CardRow[]): Promise<Map<number, number>> {
  const { set, setWhere } = upsertChanges(columnsOf(cards, [...CARD_FIELDS]))
  for (const batch of batches(rows, 18)) {
    await db
      .insert(cards)
      .values(batch)
      .onConflictDoUpdate({ target: cards.marketplaceId, set: { ...set, updatedAt: sql`excluded.updated_at` }, setWhere })
  }
  const ids = await db.select({ id: cards.id, marketplaceId: cards.marketplaceId }).from(cards).where(eq(cards.gameId, gameId))
  return new Map(ids.map((row) => [row.marketplaceId, row.id]))
}

/** A printing's current market price and when the marketplace reported it (card_prices). */
export interface CurrentPrice {
  price: number | null
  asOf: string | null
}

/** Current market price of every printing of the game's cards, by `printingKey`. */
export async function findCurrentPrices(db: Executor, gameId: number): Promise<Map<string, CurrentPrice>> {
  const rows = await db
    .select({
      cardId: cardPrices.cardId,
      printing: cardPrices.printing,
      price: cardPrices.marketPrice,
      asOf: cardPrices.marketPriceAsOf,
    })
    .from(cardPrices)
    .innerJoin(cards, eq(cards.id, cardPrices.cardId))
    .where(eq(cards.gameId, gameId))
  return new Map(rows.map((row) => [printingKey(row.cardId, row.printing), { price: row.price, asOf: row.asOf }]))
}

/** The states `nextMarketState` continues from: printings with a market price and its date. */
export function marketStates(current: Map<string, CurrentPrice>): Map<string, MarketState> {
  const states = new Map<string, MarketState>()
  for (const [key, row] of current) if (row.price !== null && row.asOf !== null) states.set(key, { price: row.price, asOf: row.asOf })
  return states
}

/**
 * Market prices of these printings on the given dates: `key → date → price`. Probes the history
 * key (card, printing, date) of each printing, so the cost is a few index lookups per printing
 * however long its history is.
 */
export async function findHistoryPoints(db: Executor, printings: { cardId: number; printing: string }[], dates: string[]): Promise<Map<string, Map<string, number>>> {
  const points = new Map<string, Map<string, number>>()
  if (printings.length === 0) return points
  const rows = await selectRows<{ card_id: number; printing: string; date: string; market_price: number }>(
    db,
    sql`select h.card_id, h.printing, h.date::text as date, h.market_price
      from unnest(${`{${printings.map((p) => p.cardId).join(',')}}`}::int[], ${textArray(printings.map((p) => p.printing))}::text[]) as k(card_id, printing)
      join ${priceHistory} h on h.card_id = k.card_id and h.printing = k.printing and h.date = any(${textArray(dates)}::date[])`,
  )
  for (const row of rows) {
    const key = printingKey(row.card_id, row.printing)
    let byDate = points.get(key)
    if (!byDate) points.set(key, (byDate = new Map()))
    byDate.set(row.date, row.market_price)
  }
  return points
}

/** Whether any price history exists for the game's cards (a seed can then COPY without conflicts). */
export async function hasHistory(db: Executor, gameId: number): Promise<boolean> {
  const [row] = await selectRows<{ found: boolean }>(
    db,
    // One index probe per card (the lateral LIMIT keeps the planner from scanning all of history,
    // which it did with a plain join while the statistics predate the seed).
    sql`select exists (select 1 from ${cards} c cross join lateral (select 1 from ${priceHistory} h where h.card_id = c.id limit 1) h
                       where c.game_id = ${gameId}) as found`,
  )
  return row?.found === true
}

// Bulk writes: under PostgreSQL the rows go through a binary COPY into a temporary staging table
// (dropped at commit) and reach the real table in one statement that touches only rows whose
// values differ; under PGlite, which has no COPY from a client, through multi-row statements.

/**
 * Makes an empty staging table with these columns of `table` (types only, no constraints), dropped
 * when the caller's transaction ends. False under PGlite, where the caller writes with statements.
 */
async function stagingTable(db: Executor, name: string, table: string, columns: string): Promise<boolean> {
  if (!canCopy(db)) return false
  await db.execute(sql.raw(`create temp table if not exists ${name} on commit drop as select ${columns} from ${table} with no data`))
  await db.execute(sql.raw(`truncate ${name}`))
  return true
}

const PRICE_COLUMNS =
  'card_id, printing, market_price, market_price_as_of, low_price, median_price, lowest_with_shipping, buylist_price, price_change_24h, price_change_7d, price_change_30d, last_updated_at'

export async function upsertPrices(db: Executor, rows: PriceRow[]): Promise<void> {
  if (rows.length === 0) return
  const staged = await stagingTable(db, 'card_prices_stage', 'card_prices', PRICE_COLUMNS)
  const copied =
    staged &&
    (await copyIn(db, `card_prices_stage (${PRICE_COLUMNS})`, async ({ rows: out, flush }) => {
      for (const row of rows) {
        out
          .row(12)
          .integer(row.cardId)
          .text(row.printing)
          .float8(row.marketPrice)
          .date(row.marketPriceAsOf)
          .float8(row.lowPrice)
          .float8(row.medianPrice)
          .float8(row.lowestWithShipping)
          .float8(row.buylistPrice)
          .float8(row.priceChange24h)
          .float8(row.priceChange7d)
          .float8(row.priceChange30d)
          .timestamp(row.lastUpdatedAt)
        if (out.ready.length > 0) await flush()
      }
    }))
  if (copied !== undefined && copied !== false) {
    const changes = PRICE_FIELD_COLUMNS.map((column) => `${column} = excluded.${column}`).join(', ')
    const differs = PRICE_FIELD_COLUMNS.map((column) => `p.${column} is distinct from excluded.${column}`).join(' or ')
    await db.execute(
      sql.raw(`insert into card_prices as p (${PRICE_COLUMNS}) select ${PRICE_COLUMNS} from card_prices_stage
        on conflict (card_id, printing) do update set ${changes}, last_updated_at = excluded.last_updated_at where ${differs}`),
    )
    return
  }
  const { set, setWhere } = upsertChanges(columnsOf(cardPrices, [...PRICE_FIELDS]))
  for (const batch of batches(rows, 12)) {
    await db
      .insert(cardPrices)
      .values(batch)
      .onConflictDoUpdate({
        target: [cardPrices.cardId, cardPrices.printing],
        set: { ...set, lastUpdatedAt: sql`excluded.last_updated_at` },
        setWhere,
      })
  }
}

const PRICE_FIELDS = [
  'marketPrice',
  'marketPriceAsOf',
  'lowPrice',
  'medianPrice',
  'lowestWithShipping',
  'buylistPrice',
  'priceChange24h',
  'priceChange7d',
  'priceChange30d',
] as const

/** The same fields as PostgreSQL column names, for the statements written as raw SQL. */
const PRICE_FIELD_COLUMNS = PRICE_FIELDS.map((field) => cardPrices[field].name)

/** Appends one history row; `avgSalesPrice` and `salesVolume` are null where not recorded. */
export type EmitHistory = (
  cardId: number,
  printing: string,
  date: string,
  marketPrice: number,
  lowPrice: number | null,
  avgSalesPrice: number | null,
  salesVolume: number | null,
) => void

export interface HistoryWrite {
  /**
   * 'append': no row of these exists yet (a game's first seed), so they are copied straight into
   * price_history. 'upsert': rows may exist; an existing row is rewritten only where it differs.
   */
  mode: 'append' | 'upsert'
  /** Whether the rows carry sales; without them an existing row's sales are left as they are. */
  withSales: boolean
}

const HISTORY_COLUMNS = 'card_id, printing, date, market_price, low_price, avg_sales_price, sales_volume'
/** Rows the statement fallback (PGlite) holds before it writes them. */
const HISTORY_FLUSH_ROWS = 20_000

/**
 * Writes the history rows `produce` emits, streaming: `produce` calls `flush` between batches (a
 * set) so memory holds about one batch. Rows sorted by (card, printing, date) keep the key index's
 * inserts on a few hot pages instead of all over it. Returns the number of rows written.
 */
export async function writeHistory(db: Executor, write: HistoryWrite, produce: (emit: EmitHistory, flush: () => Promise<void>) => Promise<void>): Promise<number> {
  const target = write.mode === 'append' ? 'price_history' : 'price_history_stage'
  const staged = write.mode === 'append' ? canCopy(db) : await stagingTable(db, 'price_history_stage', 'price_history', HISTORY_COLUMNS)
  const copied =
    staged &&
    (await copyIn(db, `${target} (${HISTORY_COLUMNS})`, async ({ rows: out, flush }) => {
      const emit: EmitHistory = (cardId, printing, date, marketPrice, lowPrice, avgSalesPrice, salesVolume) => {
        out.row(7).integer(cardId).text(printing).date(date).float8(marketPrice).float8(lowPrice).float8(avgSalesPrice).integer(salesVolume)
      }
      await produce(emit, flush)
    }))
  if (copied !== undefined && copied !== false) {
    if (write.mode === 'upsert') {
      const columns = write.withSales ? ['market_price', 'low_price', 'avg_sales_price', 'sales_volume'] : ['market_price', 'low_price']
      await db.execute(
        sql.raw(`insert into price_history as h (${HISTORY_COLUMNS}) select ${HISTORY_COLUMNS} from price_history_stage
          on conflict (card_id, printing, date) do update set ${columns.map((c) => `${c} = excluded.${c}`).join(', ')}
          where ${columns.map((c) => `h.${c} is distinct from excluded.${c}`).join(' or ')}`),
      )
    }
    return copied
  }
  let pending: HistoryRow[] = []
  let written = 0
  const flush = async () => {
    await upsertHistoryRows(db, pending, write.withSales)
    written += pending.length
    pending = []
  }
  await produce(
    (cardId, printing, date, marketPrice, lowPrice, avgSalesPrice, salesVolume) => {
      pending.push(write.withSales ? { cardId, printing, date, marketPrice, lowPrice, avgSalesPrice, salesVolume } : { cardId, printing, date, marketPrice, lowPrice })
    },
    async () => {
      if (pending.length >= HISTORY_FLUSH_ROWS) await flush()
    },
  )
  await flush()
  return written
}

async function upsertHistoryRows(db: Executor, rows: HistoryRow[], withSales: boolean): Promise<void> {
  const changes = upsertChanges(columnsOf(priceHistory, withSales ? ['marketPrice', 'lowPrice', 'avgSalesPrice', 'salesVolume'] : ['marketPrice', 'lowPrice']))
  for (const batch of batches(rows, 7)) {
    await db
      .insert(priceHistory)
      .values(batch)
      .onConflictDoUpdate({ target: [priceHistory.cardId, priceHistory.printing, priceHistory.date], ...changes })
  }
}

export interface SalesRow {
  cardId: number
  printing: string
  date: string
  avgSalesPrice: number | null
  salesVolume: number
}

const SALES_COLUMNS = 'card_id, printing, date, avg_sales_price, sales_volume'

/** Adds sales to existing history rows; a day with no price point gets no sales row. */
export async function recordSales(db: Executor, rows: SalesRow[]): Promise<void> {
  if (rows.length === 0) return
  const staged = await stagingTable(db, 'sales_stage', 'price_history', SALES_COLUMNS)
  const copied =
    staged &&
    (await copyIn(db, `sales_stage (${SALES_COLUMNS})`, async ({ rows: out, flush }) => {
      for (const row of rows) {
        out.row(5).integer(row.cardId).text(row.printing).date(row.date).float8(row.avgSalesPrice).integer(row.salesVolume)
        if (out.ready.length > 0) await flush()
      }
    }))
  if (copied !== undefined && copied !== false) {
    await db.execute(sql`
      update ${priceHistory} as h
      set avg_sales_price = v.avg_sales_price, sales_volume = v.sales_volume
      from sales_stage as v
      where h.card_id = v.card_id and h.printing = v.printing and h.date = v.date
        and (h.avg_sales_price is distinct from v.avg_sales_price or h.sales_volume is distinct from v.sales_volume)`)
    return
  }
  for (const batch of batches(rows, 5)) {
    const values = sql.join(
      batch.map((row) => sql`(${row.cardId}::int, ${row.printing}::text, ${row.date}::date, ${row.avgSalesPrice}::double precision, ${row.salesVolume}::int)`),
      sql`, `,
    )
    await db.execute(sql`
      update ${priceHistory} as h
      set avg_sales_price = v.avg, sales_volume = v.volume
      from (values ${values}) as v(card_id, printing, date, avg, volume)
      where h.card_id = v.card_id and h.printing = v.printing and h.date = v.date
        and (h.avg_sales_price is distinct from v.avg or h.sales_volume is distinct from v.volume)`)
  }
}

/** Recounts the game's and its sets' cards and stamps them synced. */
export async function finishGameSync(db: Executor, gameId: number, now: Date): Promise<void> {
  // Raw statements take the instant as text: postgres.js binds no Date outside drizzle's columns.
  const at = now.toISOString()
  await db.execute(sql`
    update ${sets} s set card_count = coalesce(c.n, 0), last_synced_at = ${at}::timestamptz
    from (select s2.id, (select count(*) from ${cards} where set_id = s2.id)::int as n
          from ${sets} s2 where s2.game_id = ${gameId}) c
    where s.id = c.id`)
  await db.execute(sql`
    update ${games} set
      set_count = (select count(*) from ${sets} where game_id = ${gameId}),
      card_count = (select count(*) from ${cards} where game_id = ${gameId}),
      last_synced_at = ${at}::timestamptz
    where id = ${gameId}`)
}

/**
 * After a sync, outside its transactions: fresh planner statistics for the tables it rewrote, and
 * the cards' trigram GIN index merged with its pending list. Without it the planner costs price
 * joins and name lookups from stale or missing statistics, and until the next autovacuum (which
 * some servers run rarely or never) every trigram name lookup (bulk resolve by name) also scans the
 * unsorted pending list: on the medium catalog right after seeding, one such lookup took 165 ms instead of 7 ms.
 * `price_history` is only analysed: it is appended to, and vacuuming millions of rows daily buys
 * its range scans nothing.
 */
export async function refreshStatistics(db: Database): Promise<void> {
  await runWithoutStatementTimeout(db, [sql`vacuum (analyze) ${games}, ${sets}, ${cards}, ${cardPrices}`, sql`analyze ${priceHistory}`])
}

/** The advisory lock class of a game's sync, `(7301, game id)`. */
const GAME_SYNC_LOCK = 7301

/** Serialises syncs of one game across every node: the lock lives until the transaction ends. */
export async function lockGameForSync(db: Executor, gameId: number): Promise<void> {
  await db.execute(sql`select pg_advisory_xact_lock(${GAME_SYNC_LOCK}, ${gameId})`)
}

export async function startSyncRun(db: Executor, gameId: number, priceDate: string, now: Date): Promise<number> {
  const [row] = await db.insert(syncRuns).values({ gameId, priceDate, status: 'running', startedAt: now }).returning({ id: syncRuns.id })
  return row!.id
}

export async function finishSyncRun(
  db: Executor,
  id: number,
  outcome: { status: 'succeeded' | 'partial' | 'failed'; stats?: Record<string, number>; error?: string; now: Date },
): Promise<void> {
  await db.update(syncRuns).set({ status: outcome.status, stats: outcome.stats, error: outcome.error, finishedAt: outcome.now }).where(eq(syncRuns.id, id))
}

/**
 * Game syncs a process left `running` when it died mid-way (docs/adr/0065-missed-and-interrupted-runs.md) are marked `interrupted`: those started before `startedBefore` (the caller
 * names the instant before which no live run started) whose game's sync lock no session holds or
 * waits for. The game's transaction died with its process, so its previous data stands.
 */
export async function interruptAbandonedSyncRuns(db: Executor, options: { startedBefore: Date; now: Date }): Promise<number> {
  const rows = await db
    .update(syncRuns)
    .set({ status: 'interrupted', error: 'the process syncing it ended before the game was committed; its previous data stands', finishedAt: options.now })
    .where(
      and(
        eq(syncRuns.status, 'running'),
        lt(syncRuns.startedAt, options.startedBefore),
        sql`not exists (
          select 1 from pg_locks l
          where l.locktype = 'advisory' and l.database = (select oid from pg_database where datname = current_database())
            and l.classid = ${GAME_SYNC_LOCK} and l.objid = ${syncRuns.gameId}::oid and l.objsubid = 2)`,
      ),
    )
    .returning({ id: syncRuns.id })
  return rows.length
}

/** Adds `requests` to the day's count of marketplace requests (one statement: nodes add theirs concurrently). */
export async function addMarketplaceRequests(db: Executor, day: string, requests: number): Promise<void> {
  await db
    .insert(marketplaceRequests)
    .values({ day, requests })
    .onConflictDoUpdate({ target: marketplaceRequests.day, set: { requests: sql`${marketplaceRequests.requests} + ${requests}` } })
}

/** Requests counted against the day's budget so far. */
export async function marketplaceRequestsOn(db: Executor, day: string): Promise<number> {
  const [row] = await db.select({ requests: marketplaceRequests.requests }).from(marketplaceRequests).where(eq(marketplaceRequests.day, day))
  return row?.requests ?? 0
}

export async function countGames(db: Executor): Promise<number> {
  const [row] = await db.select({ n: count() }).from(games)
  return row?.n ?? 0
}

/** Empties the catalog, prices and history (and the webhooks watching cards); accounts and keys stay. */
export async function truncateCatalog(db: Database): Promise<void> {
  await db.execute(
    sql`truncate price_history, condition_prices, condition_refreshes, card_prices, webhook_attempts, webhook_deliveries, webhooks, cards, sets, sync_runs, job_runs, games restart identity`,
  )
}

/** The catalog's one catalog_source row (id 1), if recorded. */
export async function findCatalogSourceRow(db: Executor): Promise<{ source: string; recordedAt: Date } | undefined> {
  const [row] = await db.select({ source: catalogSource.source, recordedAt: catalogSource.recordedAt }).from(catalogSource).where(eq(catalogSource.id, 1))
  return row
}

export async function upsertCatalogSource(db: Executor, source: string, at: Date): Promise<void> {
  await db
    .insert(catalogSource)
    .values({ id: 1, source, recordedAt: at })
    .onConflictDoUpdate({ target: catalogSource.id, set: { source, recordedAt: at } })
}

/** Each game's last successful sync (null when never synced), by slug. */
export async function findLastSyncedBySlug(db: Executor): Promise<Map<string, Date | null>> {
  const rows = await db.select({ slug: games.slug, lastSyncedAt: games.lastSyncedAt }).from(games)
  return new Map(rows.map((row) => [row.slug, row.lastSyncedAt]))
}

/** Per priority tier that has games, its least recently synced game's `last_synced_at`; null when one never was. */
export function findOldestSyncPerTier(db: Executor) {
  return selectRows<{ priority: number; oldest: Date | string | null }>(
    db,
    sql`select priority, case when bool_or(last_synced_at is null) then null else min(last_synced_at) end as oldest
        from ${games} group by priority`,
  )
}
