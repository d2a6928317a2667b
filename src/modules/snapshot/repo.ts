import { count, max, sql } from 'drizzle-orm'
import { type BinaryCopyRow, copyConnections, copyEach } from '../../db/binary-copy'
import { type Database, type Executor, liftStatementTimeout, selectRows } from '../../db/client'
import { cardPrices, cards, games, sets } from '../../db/schema'
import type { Price } from '../catalog/model'
import { CardColumns, type CardFields, PriceColumns } from './columns'

/** Everything a snapshot is built from, read in one repeatable-read snapshot (see loadSnapshotSource). */
export interface SnapshotSource {
  games: { id: number; name: string; slug: string; kind: string }[]
  sets: { id: number; name: string; slug: string }[]
  /** Every card as columns: the snapshot keeps these very arrays. */
  cards: CardColumns
  /** Every price row as columns, the spec's Price fields: the snapshot keeps these very arrays. */
  prices: PriceColumns
  fingerprint: string
}

/**
 * What changes whenever a sync writes: the number of cards and price rows and their newest update
 * times. Nodes reading the same data compute the same fingerprint, so the snapshot version (and
 * the ETags made from it) agree across nodes. Two indexed aggregates and two counts.
 */
export async function readFingerprint(db: Executor): Promise<string> {
  return (await readCounts(db)).fingerprint
}

/** The fingerprint, and the counts of cards and price rows it is made of (the columns are sized by them). */
async function readCounts(db: Executor): Promise<{ fingerprint: string; cards: number; prices: number }> {
  const [[c], [p]] = await Promise.all([
    db.select({ n: count(), newest: max(cards.updatedAt) }).from(cards),
    db.select({ n: count(), newest: max(cardPrices.lastUpdatedAt) }).from(cardPrices),
  ])
  const counts = { cards: c?.n ?? 0, prices: p?.n ?? 0 }
  return { fingerprint: [counts.cards, c?.newest?.getTime() ?? 0, counts.prices, p?.newest?.getTime() ?? 0].join('.'), ...counts }
}

// The two large reads, as binary COPY (postgres.js) and as the same SELECT (PGlite): one list of
// columns each, kept in step by a test that reads both ways and compares.
const CARDS_QUERY = 'select id, set_id, game_id, marketplace_id, name, product_type, foil_only, image_url, clean_name, number, rarity, total_listings from cards'
const PRICES_QUERY =
  'select card_id, printing, market_price, market_price_as_of, low_price, median_price, lowest_with_shipping, buylist_price, ' +
  'price_change_24h, price_change_7d, price_change_30d, last_updated_at from card_prices'

/** Rows decoded between two calls of `collectYoung` (see LoadOptions). */
const ROWS_PER_COLLECTION = 16_384

/** `visit`, calling `collectYoung` every ROWS_PER_COLLECTION rows. */
function collectingEvery<T>(collectYoung: (() => void) | undefined, visit: (row: T) => void): (row: T) => void {
  if (!collectYoung) return visit
  let rows = 0
  return (row) => {
    visit(row)
    if (++rows % ROWS_PER_COLLECTION === 0) collectYoung()
  }
}

// Each row straight into the columns: nothing kept per row but its values (see columns.ts).
const cardInto = (columns: CardColumns) => (row: BinaryCopyRow) =>
  columns.push({
    id: row.integer()!,
    setId: row.integer()!,
    gameId: row.integer()!,
    marketplaceId: row.integer()!,
    name: row.text()!,
    productType: row.text()!,
    foilOnly: row.integer()!,
    imageUrl: row.text()!,
    cleanName: row.text()!,
    number: row.text(),
    rarity: row.text()!,
    totalListings: row.integer(),
  })

const priceInto = (columns: PriceColumns) => (row: BinaryCopyRow) =>
  columns.push(
    row.integer()!,
    row.text()!,
    row.float8(),
    row.date(),
    row.float8(),
    row.float8(),
    row.float8(),
    row.float8(),
    row.float8(),
    row.float8(),
    row.float8(),
    row.timestamp()!,
  )

const READ_ONLY_SNAPSHOT = { isolationLevel: 'repeatable read', accessMode: 'read only' } as const

export interface LoadOptions {
  /** false: the SELECTs, as under PGlite (tests). */
  viaCopy?: boolean
  /**
   * Called every few thousand rows: each row's text, decoded and then dropped for the one copy kept
   * of it, is garbage at once, and a young collection then keeps the process from growing by the
   * whole read's worth of it before the collector would run on its own.
   */
  collectYoung?: () => void
}

/**
 * Four plain reads (no joins: games and sets are small and joined in memory) in one read-only
 * repeatable-read snapshot (one transaction, or two sharing it, below), so a sync committing
 * meanwhile is either wholly in the snapshot or wholly out of it, and the fingerprint describes
 * exactly the rows read.
 *
 * Cards and prices, the large reads, come through binary COPY on PostgreSQL: the server sends
 * ints and doubles as they are stored and the client reads them with a DataView, where the text
 * protocol has the server print 12 columns per row and postgres.js decode each (334k prices: about
 * 2.5× faster). The server's output of the rows is then most of the read's time, so prices come
 * through a second connection whose transaction adopts this one's snapshot (`pg_export_snapshot`),
 * and the server writes both at once (about 20% less on the large catalog, 2 cores). PGlite has no
 * COPY, and `viaCopy: false` (tests) forces the same SELECTs. Rows go straight into columns
 * (columns.ts), sized by the counts read first in the same snapshot.
 */
export async function loadSnapshotSource(db: Database, options: LoadOptions = {}): Promise<SnapshotSource> {
  const connections = (options.viaCopy ?? true) ? copyConnections(db) : 0
  const collectYoung = options.collectYoung
  return db.transaction(async (tx) => {
    // The large reads: a build on a large catalog may rightly outlast a request's statement timeout.
    await liftStatementTimeout(tx)
    // First, in this snapshot: the counts size the columns exactly (growing them left copies behind).
    const counts = await readCounts(tx)
    if (connections >= 2) {
      const [snapshotId] = await selectRows<{ id: string }>(tx, sql`select pg_export_snapshot() as id`)
      const [rest, prices] = await Promise.all([readAllButPrices(tx, true, counts, collectYoung), copyPricesInSnapshot(db, snapshotId!.id, counts.prices, collectYoung)])
      return { ...rest, prices }
    }
    const rest = await readAllButPrices(tx, connections > 0, counts, collectYoung)
    return { ...rest, prices: await readPrices(tx, connections > 0, counts.prices, collectYoung) }
  }, READ_ONLY_SNAPSHOT)
}

async function readAllButPrices(
  tx: Executor,
  viaCopy: boolean,
  counts: { fingerprint: string; cards: number },
  collectYoung: (() => void) | undefined,
): Promise<Omit<SnapshotSource, 'prices'>> {
  const gameRows = await tx.select({ id: games.id, name: games.name, slug: games.slug, kind: games.kind }).from(games)
  const setRows = await tx.select({ id: sets.id, name: sets.name, slug: sets.slug }).from(sets)
  const cardColumns = new CardColumns(counts.cards)
  if (!(viaCopy && (await copyEach(tx, CARDS_QUERY, 12, collectingEvery(collectYoung, cardInto(cardColumns)))))) {
    for (const card of await selectCards(tx)) cardColumns.push(card)
  }
  return { games: gameRows, sets: setRows, cards: cardColumns.finish(), fingerprint: counts.fingerprint }
}

async function readPrices(tx: Executor, viaCopy: boolean, count: number, collectYoung: (() => void) | undefined): Promise<PriceColumns> {
  const columns = new PriceColumns(count)
  if (viaCopy && (await copyEach(tx, PRICES_QUERY, 12, collectingEvery(collectYoung, priceInto(columns))))) return columns.finish()
  for (const p of await selectPrices(tx)) columns.pushPrice(p)
  return columns.finish()
}

/** Prices through another connection, in the snapshot `snapshotId` names (that transaction must stay open meanwhile). */
function copyPricesInSnapshot(db: Database, snapshotId: string, count: number, collectYoung: (() => void) | undefined): Promise<PriceColumns> {
  if (!/^[0-9A-F]+-[0-9A-F]+(-[0-9]+)?$/i.test(snapshotId)) throw new Error(`unexpected snapshot id ${snapshotId}`)
  return db.transaction(async (beside) => {
    await beside.execute(sql.raw(`set transaction snapshot '${snapshotId}'`))
    await liftStatementTimeout(beside)
    return readPrices(beside, true, count, collectYoung)
  }, READ_ONLY_SNAPSHOT)
}

// Through the driver's own row objects (selectRows), not drizzle's mapping of each row into
// another object: 0.25–0.3 s less per build on the large catalog.
const selectCards = (tx: Executor) =>
  selectRows<CardFields>(
    tx,
    sql`select ${cards.id} as "id", ${cards.setId} as "setId", ${cards.gameId} as "gameId", ${cards.marketplaceId} as "marketplaceId",
               ${cards.name} as "name", ${cards.productType} as "productType", ${cards.foilOnly}::int as "foilOnly", ${cards.imageUrl} as "imageUrl",
               ${cards.cleanName} as "cleanName", ${cards.number} as "number", ${cards.rarity} as "rarity", ${cards.totalListings} as "totalListings"
        from ${cards}`,
  )

// Already the API's Price objects, dates as text (the instant as toISOString writes it).
const selectPrices = (tx: Executor) =>
  selectRows<Price>(
    tx,
    sql`select ${cardPrices.cardId} as card_id, ${cardPrices.printing} as printing, ${cardPrices.marketPrice} as market_price,
               ${cardPrices.marketPriceAsOf}::text as market_price_as_of, ${cardPrices.lowPrice} as low_price,
               ${cardPrices.medianPrice} as median_price, ${cardPrices.lowestWithShipping} as lowest_with_shipping,
               ${cardPrices.buylistPrice} as buylist_price, ${cardPrices.priceChange24h} as price_change_24h,
               ${cardPrices.priceChange7d} as price_change_7d, ${cardPrices.priceChange30d} as price_change_30d,
               to_char(${cardPrices.lastUpdatedAt} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as last_updated_at
        from ${cardPrices}`,
  )
