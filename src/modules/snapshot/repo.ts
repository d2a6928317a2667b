import { count, max, sql } from 'drizzle-orm'
import { type BinaryCopyRow, copyConnections, copyRows } from '../../db/binary-copy'
import { type Database, type Executor, liftStatementTimeout, selectRows } from '../../db/client'
import { cardPrices, cards, games, sets } from '../../db/schema'
import type { Price } from '../catalog/model'

/** Everything a snapshot is built from, read in one repeatable-read snapshot (see loadSnapshotSource). */
export interface SnapshotSource {
  games: { id: number; name: string; slug: string; kind: string }[]
  sets: { id: number; name: string; slug: string }[]
  cards: { id: number; setId: number; gameId: number; marketplaceId: number; name: string; productType: string; foilOnly: number; imageUrl: string }[]
  /** The spec's Price objects, as read: the snapshot keeps these very objects. */
  prices: Price[]
  fingerprint: string
}

/**
 * What changes whenever a sync writes: the number of cards and price rows and their newest update
 * times. Nodes reading the same data compute the same fingerprint, so the snapshot version (and
 * the ETags made from it) agree across nodes. Two indexed aggregates and two counts.
 */
export async function readFingerprint(db: Executor): Promise<string> {
  const [[c], [p]] = await Promise.all([
    db.select({ n: count(), newest: max(cards.updatedAt) }).from(cards),
    db.select({ n: count(), newest: max(cardPrices.lastUpdatedAt) }).from(cardPrices),
  ])
  return [c?.n ?? 0, c?.newest?.getTime() ?? 0, p?.n ?? 0, p?.newest?.getTime() ?? 0].join('.')
}

/** A card as the snapshot reads it. */
type SourceCard = SnapshotSource['cards'][number]

// The two large reads, as binary COPY (postgres.js) and as the same SELECT (PGlite): one list of
// columns each, kept in step by a test that reads both ways and compares.
const CARDS_QUERY = 'select id, set_id, game_id, marketplace_id, name, product_type, foil_only, image_url from cards'
const PRICES_QUERY =
  'select card_id, printing, market_price, market_price_as_of, low_price, median_price, lowest_with_shipping, buylist_price, ' +
  'price_change_24h, price_change_7d, price_change_30d, last_updated_at from card_prices'

const cardOf = (row: BinaryCopyRow): SourceCard => ({
  id: row.integer()!,
  setId: row.integer()!,
  gameId: row.integer()!,
  marketplaceId: row.integer()!,
  name: row.text()!,
  productType: row.text()!,
  foilOnly: row.integer()!,
  imageUrl: row.text()!,
})

/** The spec's Price object, keys in its order. */
const priceOf = (row: BinaryCopyRow): Price => ({
  card_id: row.integer()!,
  printing: row.text()!,
  market_price: row.float8(),
  market_price_as_of: row.date(),
  low_price: row.float8(),
  median_price: row.float8(),
  lowest_with_shipping: row.float8(),
  buylist_price: row.float8(),
  price_change_24h: row.float8(),
  price_change_7d: row.float8(),
  price_change_30d: row.float8(),
  last_updated_at: row.timestamp()!,
})

const READ_ONLY_SNAPSHOT = { isolationLevel: 'repeatable read', accessMode: 'read only' } as const

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
 * COPY, and `viaCopy: false` (tests) forces the same SELECTs.
 */
export async function loadSnapshotSource(db: Database, options: { viaCopy?: boolean } = {}): Promise<SnapshotSource> {
  const connections = (options.viaCopy ?? true) ? copyConnections(db) : 0
  return db.transaction(async (tx) => {
    // The large reads: a build on a large catalog may rightly outlast a request's statement timeout.
    await liftStatementTimeout(tx)
    if (connections >= 2) {
      const [snapshotId] = await selectRows<{ id: string }>(tx, sql`select pg_export_snapshot() as id`)
      const [rest, prices] = await Promise.all([readAllButPrices(tx, true), copyPricesInSnapshot(db, snapshotId!.id)])
      return { ...rest, prices }
    }
    const rest = await readAllButPrices(tx, connections > 0)
    return { ...rest, prices: (connections > 0 ? await copyRows(tx, PRICES_QUERY, 12, priceOf) : undefined) ?? (await selectPrices(tx)) }
  }, READ_ONLY_SNAPSHOT)
}

async function readAllButPrices(tx: Executor, viaCopy: boolean): Promise<Omit<SnapshotSource, 'prices'>> {
  const fingerprint = await readFingerprint(tx)
  const gameRows = await tx.select({ id: games.id, name: games.name, slug: games.slug, kind: games.kind }).from(games)
  const setRows = await tx.select({ id: sets.id, name: sets.name, slug: sets.slug }).from(sets)
  const cardRows = (viaCopy ? await copyRows(tx, CARDS_QUERY, 8, cardOf) : undefined) ?? (await selectCards(tx))
  return { games: gameRows, sets: setRows, cards: cardRows, fingerprint }
}

/** Prices through another connection, in the snapshot `snapshotId` names (that transaction must stay open meanwhile). */
function copyPricesInSnapshot(db: Database, snapshotId: string): Promise<Price[]> {
  if (!/^[0-9A-F]+-[0-9A-F]+(-[0-9]+)?$/i.test(snapshotId)) throw new Error(`unexpected snapshot id ${snapshotId}`)
  return db.transaction(async (beside) => {
    await beside.execute(sql.raw(`set transaction snapshot '${snapshotId}'`))
    await liftStatementTimeout(beside)
    return (await copyRows(beside, PRICES_QUERY, 12, priceOf))!
  }, READ_ONLY_SNAPSHOT)
}

// Through the driver's own row objects (selectRows), not drizzle's mapping of each row into
// another object: 0.25–0.3 s less per build on the large catalog.
const selectCards = (tx: Executor) =>
  selectRows<SourceCard>(
    tx,
    sql`select ${cards.id} as "id", ${cards.setId} as "setId", ${cards.gameId} as "gameId", ${cards.marketplaceId} as "marketplaceId",
               ${cards.name} as "name", ${cards.productType} as "productType", ${cards.foilOnly}::int as "foilOnly", ${cards.imageUrl} as "imageUrl"
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
