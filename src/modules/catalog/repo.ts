import { and, asc, count, desc, eq, getTableColumns, inArray, type SQL, sql } from 'drizzle-orm'
import type { Database, Executor } from '../../db/client'
import { preparedQueries, preparedQuery } from '../../db/prepared'
import { cardPrices, cards, games, sets } from '../../db/schema'
import type { Page } from '../../shared/model'
import type { SetCardSort } from './model'
import {
  cardColumns,
  cardsWhere,
  cardWithPriceColumns,
  findGame,
  type GameRecord,
  type GameRef,
  gameIs,
  primaryPrice,
  printingRank,
  type SetDetailRecord,
  setDetailColumns,
  setProductOrder,
} from './queries'

// List queries are one statement each: the page and, through a window count, its total. Only a
// page past the end (no rows, so no total) costs a second, cheap count.

const totalOver = sql<number>`(count(*) over ())::int`
const offsetOf = (page: Page) => (page.page - 1) * page.perPage

/** Major (higher-priority) games first, then by name; the id breaks ties so pages never overlap. */
export async function findGamesPage(db: Executor, page: Page): Promise<{ rows: GameRecord[]; total: number }> {
  const rows = await db
    .select({ ...getTableColumns(games), total: totalOver })
    .from(games)
    .orderBy(desc(games.priority), asc(games.name), asc(games.id))
    .limit(page.perPage)
    .offset(offsetOf(page))
  if (rows.length > 0) return { rows, total: rows[0]!.total }
  const [row] = await db.select({ n: count() }).from(games)
  return { rows: [], total: row?.n ?? 0 }
}

/**
 * A page of the game's sets with the game's id, name and slug, newest release first (id breaks
 * ties), with the game's set_count as the total (the sync keeps it in the same transaction as the
 * sets). `undefined` when no such game exists.
 */
export async function findSetsPageOfGame(db: Executor, game: GameRef, page: Page): Promise<{ rows: SetDetailRecord[]; total: number } | undefined> {
  const rows = await db
    .select({ ...setDetailColumns, total: games.setCount })
    .from(sets)
    .innerJoin(games, eq(games.id, sets.gameId))
    .where(gameIs(game))
    .orderBy(desc(sets.releaseDate), asc(sets.id))
    .limit(page.perPage)
    .offset(offsetOf(page))
  if (rows.length > 0) return { rows, total: rows[0]!.total }
  const found = await findGame(db, game)
  return found && { rows: [], total: found.setCount }
}

/** All sets, or one game's (`undefined` when no game has the slug), newest release first. */
export async function findSetsPage(db: Executor, gameSlug: string | undefined, page: Page): Promise<{ rows: SetDetailRecord[]; total: number } | undefined> {
  const rows = await db
    .select({ ...setDetailColumns, total: totalOver })
    .from(sets)
    .innerJoin(games, eq(games.id, sets.gameId))
    .where(gameSlug === undefined ? undefined : eq(games.slug, gameSlug))
    .orderBy(desc(sets.releaseDate), asc(sets.id))
    .limit(page.perPage)
    .offset(offsetOf(page))
  if (rows.length > 0) return { rows, total: rows[0]!.total }
  if (gameSlug === undefined) {
    const [row] = await db.select({ n: count() }).from(sets)
    return { rows: [], total: row?.n ?? 0 }
  }
  const game = await findGame(db, { slug: gameSlug })
  return game && { rows: [], total: game.setCount }
}

export type CardWithPriceRecord = Awaited<ReturnType<typeof findSetCardsPage>>['rows'][number]

/**
 * A page of a set's cards with their primary price, in one statement. Every order ends with the
 * card id, so pages never repeat or skip a row; cards without a price sort after priced ones.
 * `total` is undefined when the page is empty (past the end, or no such set).
 */
export async function findSetCardsPage(db: Executor, setId: number, filter: { type?: string; sort: SetCardSort }, page: Page) {
  const primary = primaryPrice(db)
  const orderBy: Record<SetCardSort, readonly SQL[]> = {
    number: setProductOrder,
    name: [asc(cards.name), asc(cards.id)],
    price_asc: [sql`${primary.marketPrice} asc nulls last`, asc(cards.id)],
    price_desc: [sql`${primary.marketPrice} desc nulls last`, asc(cards.id)],
  }
  const rows = await db
    .select({ ...cardWithPriceColumns(primary), total: totalOver })
    .from(cards)
    .innerJoin(sets, eq(sets.id, cards.setId))
    .innerJoin(games, eq(games.id, cards.gameId))
    .leftJoinLateral(primary, sql`true`)
    .where(and(eq(cards.setId, setId), filter.type === undefined ? undefined : eq(cards.productType, filter.type)))
    .orderBy(...orderBy[filter.sort])
    .limit(page.perPage)
    .offset(offsetOf(page))
  return { rows, total: rows[0]?.total }
}

export async function countSetCards(db: Executor, setId: number, type: string | undefined): Promise<number> {
  const [row] = await db
    .select({ n: count() })
    .from(cards)
    .where(and(eq(cards.setId, setId), type === undefined ? undefined : eq(cards.productType, type)))
  return row?.n ?? 0
}

const priceColumns = {
  cardId: cardPrices.cardId,
  printing: cardPrices.printing,
  marketPrice: cardPrices.marketPrice,
  marketPriceAsOf: cardPrices.marketPriceAsOf,
  lowPrice: cardPrices.lowPrice,
  medianPrice: cardPrices.medianPrice,
  lowestWithShipping: cardPrices.lowestWithShipping,
  buylistPrice: cardPrices.buylistPrice,
  priceChange24h: cardPrices.priceChange24h,
  priceChange7d: cardPrices.priceChange7d,
  priceChange30d: cardPrices.priceChange30d,
  lastUpdatedAt: cardPrices.lastUpdatedAt,
}

/** Price rows (card × printing) with their card's fields, in `setProductOrder`, primary printing first. */
function priceRowsWhere(db: Executor, where: SQL | undefined) {
  return db
    .select({
      ...priceColumns,
      name: cards.name,
      marketplaceId: cards.marketplaceId,
      productType: cards.productType,
      foilOnly: cards.foilOnly,
      imageUrl: cards.imageUrl,
    })
    .from(cardPrices)
    .innerJoin(cards, eq(cards.id, cardPrices.cardId))
    .innerJoin(games, eq(games.id, cards.gameId))
    .where(where)
    .orderBy(...setProductOrder, sql`${printingRank} nulls last`, asc(cardPrices.printing))
}
export type PriceRowRecord = Awaited<ReturnType<typeof priceRowsWhere>>[number]

/** Every price row of a set's cards, optionally of one product type. */
export async function findSetPriceRows(db: Executor, setId: number, type: string | undefined) {
  return priceRowsWhere(db, and(eq(cards.setId, setId), type === undefined ? undefined : eq(cards.productType, type)))
}

/** The price rows of some cards, in the same order. */
export async function findPriceRowsOfCards(db: Executor, cardIds: number[]) {
  return cardIds.length === 0 ? [] : priceRowsWhere(db, inArray(cards.id, cardIds))
}

const cardById = preparedQuery((db) =>
  cardsWhere(db, eq(cards.id, sql.placeholder('id')))
    .limit(1)
    .prepare('card_by_id'),
)
export async function findCard(db: Database, id: number) {
  const [row] = await cardById(db).execute({ id })
  return row
}

const cardPriceRows = preparedQueries((db, by: 'id' | 'marketplaceId') =>
  db
    .select({ ...priceColumns, card: cardColumns })
    .from(cards)
    .innerJoin(sets, eq(sets.id, cards.setId))
    .innerJoin(games, eq(games.id, cards.gameId))
    .leftJoin(cardPrices, eq(cardPrices.cardId, cards.id))
    .where(eq(by === 'id' ? cards.id : cards.marketplaceId, sql.placeholder('value')))
    .orderBy(sql`${printingRank} nulls last`, asc(cardPrices.printing))
    .prepare('card_price_rows'),
)

/** A card (the spec's Card) and its price rows, primary printing first, in one statement; `card` is undefined when it does not exist. */
export async function findCardPrices(db: Database, where: { id: number } | { marketplaceId: number }) {
  const [by, value] = 'id' in where ? (['id', where.id] as const) : (['marketplaceId', where.marketplaceId] as const)
  const rows = await cardPriceRows(db, by).execute({ value })
  return { card: rows[0]?.card, prices: rows.filter((row) => row.printing !== null) }
}
