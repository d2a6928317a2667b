import { count, max, sql } from 'drizzle-orm'
import type { Database, Executor } from '../../db/client'
import { cardPrices, cards, games, sets } from '../../db/schema'
import type { Price } from '../catalog/model'

/** Everything a snapshot is built from, read in one repeatable-read transaction. */
export interface SnapshotSource {
  games: { id: number; name: string; slug: string; kind: string }[]
  sets: { id: number; name: string }[]
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

/**
 * Four plain reads (no joins: games and sets are small and joined in memory) inside one
 * read-only repeatable-read transaction, so a sync committing meanwhile is either wholly in the
 * snapshot or wholly out of it, and the fingerprint describes exactly the rows read.
 */
export async function loadSnapshotSource(db: Database): Promise<SnapshotSource> {
  return db.transaction(
    async (tx) => {
      const fingerprint = await readFingerprint(tx)
      const gameRows = await tx.select({ id: games.id, name: games.name, slug: games.slug, kind: games.kind }).from(games)
      const setRows = await tx.select({ id: sets.id, name: sets.name }).from(sets)
      const cardRows = await tx
        .select({
          id: cards.id,
          setId: cards.setId,
          gameId: cards.gameId,
          marketplaceId: cards.marketplaceId,
          name: cards.name,
          productType: cards.productType,
          foilOnly: cards.foilOnly,
          imageUrl: cards.imageUrl,
        })
        .from(cards)
      // Read as the API's Price objects (the instant formatted by Postgres as toISOString would),
      // so the snapshot keeps the objects the driver returns instead of a mapped copy of each.
      const priceRows = await tx
        .select({
          card_id: cardPrices.cardId,
          printing: cardPrices.printing,
          market_price: cardPrices.marketPrice,
          market_price_as_of: cardPrices.marketPriceAsOf,
          low_price: cardPrices.lowPrice,
          median_price: cardPrices.medianPrice,
          lowest_with_shipping: cardPrices.lowestWithShipping,
          buylist_price: cardPrices.buylistPrice,
          price_change_24h: cardPrices.priceChange24h,
          price_change_7d: cardPrices.priceChange7d,
          price_change_30d: cardPrices.priceChange30d,
          last_updated_at: sql<string>`to_char(${cardPrices.lastUpdatedAt} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`,
        })
        .from(cardPrices)
      return { games: gameRows, sets: setRows, cards: cardRows, prices: priceRows, fingerprint }
    },
    { isolationLevel: 'repeatable read', accessMode: 'read only' },
  )
}
