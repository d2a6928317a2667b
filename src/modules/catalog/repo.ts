import { and, asc, count, desc, eq, getTableColumns, inArray, type SQL, sql } from 'drizzle-orm'
import type { Database, Executor } from '../../db/client'
import { preparedQueries, preparedQuery } from '../../db/prepared'
import { cardPrices, cards, games, sets } from '../../db/schema'
import { PRINTINGS_BY_KIND } from '../ingest/source'
import type { SetCardSort } from './model'
import type { Page } from '../../shared/model'

export type GameRecord = typeof games.$inferSelect
export type SetRecord = typeof sets.$inferSelect

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

/** A game named by its slug or by its id. */
export type GameRef = { slug: string } | { id: number }

const gameIs = (game: GameRef) => ('id' in game ? eq(games.id, game.id) : eq(games.slug, game.slug))

export async function findGame(db: Executor, game: GameRef): Promise<GameRecord | undefined> {
  const [row] = await db.select().from(games).where(gameIs(game)).limit(1)
  return row
}

/**
 * A page of the game's sets with the game's id, name and slug, newest release first (id breaks
 * ties), with the game's set_count as the total (the sync keeps it in the same transaction as the
 * sets). `undefined` when no such game exists.
 */
export async function findSetsPageOfGame(
  db: Executor,
  game: GameRef,
  page: Page,
): Promise<{ rows: SetDetailRecord[]; total: number } | undefined> {
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

/**
 * A set's products in number order, the one order wherever they are listed by number (set cards,
 * set prices, the set export): cards by number, shorter first so "2" comes before "10" (numbers are
 * text such as "SV01"), then cards without a number, then sealed products, which have none; the id
 * breaks ties (docs/decisions.md "Sealed products have no number").
 */
export const setProductOrder: readonly SQL[] = [
  sql`${cards.productType} = 'Sealed Products'`,
  sql`length(${cards.number})`,
  asc(cards.number),
  asc(cards.id),
]

/** A set with its game's id, name and slug. */
const setDetailColumns = { ...getTableColumns(sets), gameName: games.name, gameSlug: games.slug }
export type SetDetailRecord = SetRecord & { gameName: string; gameSlug: string }

/** All sets, or one game's (`undefined` when no game has the slug), newest release first. */
export async function findSetsPage(
  db: Executor,
  gameSlug: string | undefined,
  page: Page,
): Promise<{ rows: SetDetailRecord[]; total: number } | undefined> {
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

const setById = preparedQuery((db) =>
  db.select(setDetailColumns).from(sets).innerJoin(games, eq(games.id, sets.gameId)).where(eq(sets.id, sql.placeholder('id'))).limit(1).prepare('set_by_id'),
)
export async function findSet(db: Database, id: number): Promise<SetDetailRecord | undefined> {
  const [row] = await setById(db).execute({ id })
  return row
}

// docs/decisions.md "Primary printing": a card's primary printing is Normal when it has one, else its first printing
// in the spec's order for its game kind, which is the order of PRINTINGS_BY_KIND (Normal leads
// wherever it exists).
const printingRank = sql`array_position(case ${games.kind} ${sql.join(
  Object.entries(PRINTINGS_BY_KIND).map(([kind, names]) => sql`when ${kind} then array[${sql.join(names.map((n) => sql`${n}`), sql`, `)}]::text[]`),
  sql` `,
)} end, ${cardPrices.printing})`

/** The card's primary printing's price: a lateral subquery of the card (and its game) in the outer query. */
export const primaryPrice = (db: Executor) =>
  db
    .select({
      printing: cardPrices.printing,
      marketPrice: cardPrices.marketPrice,
      lowPrice: cardPrices.lowPrice,
      medianPrice: cardPrices.medianPrice,
      lowestWithShipping: cardPrices.lowestWithShipping,
      priceUpdatedAt: cardPrices.lastUpdatedAt,
    })
    .from(cardPrices)
    .where(eq(cardPrices.cardId, cards.id))
    .orderBy(sql`${printingRank} nulls last`, asc(cardPrices.printing))
    .limit(1)
    .as('primary_price')

/** Columns of a card-with-price row (docs/decisions.md "Card prices and card fields"); the query must join games, sets and primaryPrice. */
export function cardWithPriceColumns(primary: ReturnType<typeof primaryPrice>) {
  return {
    id: cards.id,
    name: cards.name,
    cleanName: cards.cleanName,
    number: cards.number,
    rarity: cards.rarity,
    marketplaceId: cards.marketplaceId,
    productType: cards.productType,
    foilOnly: cards.foilOnly,
    totalListings: cards.totalListings,
    imageUrl: cards.imageUrl,
    gameName: games.name,
    gameSlug: games.slug,
    setName: sets.name,
    setSlug: sets.slug,
    printing: primary.printing,
    marketPrice: primary.marketPrice,
    lowPrice: primary.lowPrice,
    medianPrice: primary.medianPrice,
    lowestWithShipping: primary.lowestWithShipping,
    priceUpdatedAt: primary.priceUpdatedAt,
  }
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
export type PriceRecord = typeof cardPrices.$inferSelect

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

/** A set's card ids in `setProductOrder` (what an export walks through, a batch at a time). */
export async function findSetCardIds(db: Executor, setId: number): Promise<number[]> {
  const rows = await db
    .select({ id: cards.id })
    .from(cards)
    .where(eq(cards.setId, setId))
    .orderBy(...setProductOrder)
  return rows.map((row) => row.id)
}

/** A card with its set's and game's names and slugs: the spec's Card. */
export const cardColumns = { ...getTableColumns(cards), setName: sets.name, setSlug: sets.slug, gameName: games.name, gameSlug: games.slug }
export type CardRecord = typeof cards.$inferSelect & { setName: string; setSlug: string; gameName: string; gameSlug: string }

/** Cards with their set's and game's names and slugs (`cardColumns`), filtered by `where`. */
export function cardsWhere(db: Executor, where: SQL | undefined) {
  return db
    .select(cardColumns)
    .from(cards)
    .innerJoin(sets, eq(sets.id, cards.setId))
    .innerJoin(games, eq(games.id, cards.gameId))
    .where(where)
}

const cardById = preparedQuery((db) => cardsWhere(db, eq(cards.id, sql.placeholder('id'))).limit(1).prepare('card_by_id'))
export async function findCard(db: Database, id: number) {
  const [row] = await cardById(db).execute({ id })
  return row
}

const cardPriceRows = preparedQueries(
  (db, by: 'id' | 'marketplaceId') =>
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

/** Cards by id or by marketplace id, with their set's and game's names, in one statement (any order). */
export async function findCardsBy(db: Executor, by: 'id' | 'marketplaceId', values: number[]): Promise<CardRecord[]> {
  if (values.length === 0) return []
  return cardsWhere(db, inArray(by === 'id' ? cards.id : cards.marketplaceId, values))
}

/** The price rows of many cards in one statement: by card id, each card's primary printing first. */
export async function findPricesOfCards(db: Executor, cardIds: number[]): Promise<PriceRecord[]> {
  if (cardIds.length === 0) return []
  return db
    .select(getTableColumns(cardPrices))
    .from(cardPrices)
    .innerJoin(cards, eq(cards.id, cardPrices.cardId))
    .innerJoin(games, eq(games.id, cards.gameId))
    .where(inArray(cardPrices.cardId, cardIds))
    .orderBy(asc(cardPrices.cardId), sql`${printingRank} nulls last`, asc(cardPrices.printing))
}
