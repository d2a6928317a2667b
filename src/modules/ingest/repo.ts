import { and, eq, inArray, sql, type SQL } from 'drizzle-orm'
import type { PgColumn, PgTable } from 'drizzle-orm/pg-core'
import { type Database, type Executor, runWithoutStatementTimeout } from '../../db/client'
import { cardPrices, cards, games, priceHistory, searchWords, sets, syncRuns } from '../../db/schema'
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
        ...upsertChanges(columnsOf(games, ['name', 'slug', 'kind', 'priority'])),
      })
  }
  const ids = await db.select({ id: games.id, categoryId: games.marketplaceCategoryId }).from(games)
  return new Map(ids.map((row) => [row.categoryId, row.id]))
}

export async function upsertSets(db: Executor, gameId: number, rows: SetRow[]): Promise<Map<number, number>> {
  for (const batch of batches(rows, 8)) {
    await db
      .insert(sets)
      .values(batch)
      .onConflictDoUpdate({
        target: sets.marketplaceGroupId,
        ...upsertChanges(columnsOf(sets, ['gameId', 'name', 'slug', 'abbreviation', 'releaseDate'])),
      })
  }
  const ids = await db
    .select({ id: sets.id, groupId: sets.marketplaceGroupId })
    .from(sets)
    .where(eq(sets.gameId, gameId))
  return new Map(ids.map((row) => [row.groupId, row.id]))
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
  const ids = await db
    .select({ id: cards.id, marketplaceId: cards.marketplaceId })
    .from(cards)
    .where(eq(cards.gameId, gameId))
  return new Map(ids.map((row) => [row.marketplaceId, row.id]))
}

/**
 * Adds the words of the game's card names to the search dictionary (search_words), in word order,
 * so concurrent syncs of two games take their row locks in the same order and cannot deadlock.
 */
export async function addSearchWords(db: Executor, gameId: number): Promise<void> {
  await db.execute(sql`
    insert into ${searchWords} (word)
    select distinct w from ${cards}, unnest(string_to_array(${cards.cleanName}, ' ')) as w
    where ${cards.gameId} = ${gameId} and w <> ''
    order by w
    on conflict do nothing`)
}

/** Current market state of every printing of the game's cards. */
export async function findMarketStates(db: Executor, gameId: number): Promise<Map<string, MarketState>> {
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
  const states = new Map<string, MarketState>()
  for (const row of rows) {
    if (row.price !== null && row.asOf !== null) states.set(printingKey(row.cardId, row.printing), { price: row.price, asOf: row.asOf })
  }
  return states
}

/** Market prices of the game's printings on the given dates: `key → date → price`. */
export async function findHistoryPoints(
  db: Executor,
  gameId: number,
  dates: string[],
): Promise<Map<string, Map<string, number>>> {
  const rows = await db
    .select({
      cardId: priceHistory.cardId,
      printing: priceHistory.printing,
      date: priceHistory.date,
      price: priceHistory.marketPrice,
    })
    .from(priceHistory)
    .innerJoin(cards, eq(cards.id, priceHistory.cardId))
    .where(and(eq(cards.gameId, gameId), inArray(priceHistory.date, dates)))
  const points = new Map<string, Map<string, number>>()
  for (const row of rows) {
    const key = printingKey(row.cardId, row.printing)
    let byDate = points.get(key)
    if (!byDate) points.set(key, (byDate = new Map()))
    byDate.set(row.date, row.price)
  }
  return points
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

export async function upsertPrices(db: Executor, rows: PriceRow[]): Promise<void> {
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

export async function upsertHistory(db: Executor, rows: HistoryRow[]): Promise<void> {
  const changes = upsertChanges(columnsOf(priceHistory, ['marketPrice', 'lowPrice', 'avgSalesPrice', 'salesVolume']),
  )
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

/** Adds sales to existing history rows; a day with no price point gets no sales row. */
export async function recordSales(db: Executor, rows: SalesRow[]): Promise<void> {
  for (const batch of batches(rows, 5)) {
    const values = sql.join(
      batch.map(
        (row) =>
          sql`(${row.cardId}::int, ${row.printing}::text, ${row.date}::date, ${row.avgSalesPrice}::double precision, ${row.salesVolume}::int)`,
      ),
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
 * the cards' GIN indexes (names, full text and trigrams) merged with their pending lists. Without
 * it the planner costs search and price joins from stale or missing statistics, and until the next
 * autovacuum (which some servers run rarely or never) every name search also scans the unsorted
 * pending list: on the medium catalog right after seeding, one search took 165 ms instead of 7 ms.
 * `price_history` is only analysed: it is appended to, and vacuuming millions of rows daily buys
 * its range scans nothing.
 */
export async function refreshStatistics(db: Database): Promise<void> {
  await runWithoutStatementTimeout(db, [sql`vacuum (analyze) ${games}, ${sets}, ${cards}, ${cardPrices}, ${searchWords}`, sql`analyze ${priceHistory}`])
}

/** Serialises syncs of one game across every node: the lock lives until the transaction ends. */
export async function lockGameForSync(db: Executor, gameId: number): Promise<void> {
  await db.execute(sql`select pg_advisory_xact_lock(7301, ${gameId})`)
}

export async function startSyncRun(db: Executor, gameId: number, priceDate: string, now: Date): Promise<number> {
  const [row] = await db
    .insert(syncRuns)
    .values({ gameId, priceDate, status: 'running', startedAt: now })
    .returning({ id: syncRuns.id })
  return row!.id
}

export async function finishSyncRun(
  db: Executor,
  id: number,
  outcome: { status: 'succeeded' | 'failed'; stats?: Record<string, number>; error?: string; now: Date },
): Promise<void> {
  await db
    .update(syncRuns)
    .set({ status: outcome.status, stats: outcome.stats, error: outcome.error, finishedAt: outcome.now })
    .where(eq(syncRuns.id, id))
}
