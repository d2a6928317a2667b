/**
 * Catalog's public query surface: the SQL fragments (primary printing, card columns, product order)
 * and the reads of catalog tables that other modules' repos and services build on. Everything else
 * catalog queries is private to ./repo.
 */
import { asc, eq, getTableColumns, inArray, type SQL, sql } from 'drizzle-orm'
import type { Database, Executor } from '../../db/client'
import { preparedQuery } from '../../db/prepared'
import { cardPrices, cards, games, sets } from '../../db/schema'
import { PRINTINGS_BY_KIND } from './printings'

export type GameRecord = typeof games.$inferSelect
export type SetRecord = typeof sets.$inferSelect

/** A game named by its slug or by its id. */
export type GameRef = { slug: string } | { id: number }

export const gameIs = (game: GameRef) => ('id' in game ? eq(games.id, game.id) : eq(games.slug, game.slug))

export async function findGame(db: Executor, game: GameRef): Promise<GameRecord | undefined> {
  const [row] = await db.select().from(games).where(gameIs(game)).limit(1)
  return row
}

/**
 * A set's products in number order, the one order wherever they are listed by number (set cards,
 * set prices, the set export): cards by number, shorter first so "2" comes before "10" (numbers are
 * text such as "SV01"), then cards without a number, then sealed products, which have none; the id
 * breaks ties (docs/adr/0092-sealed-products-have-no-number.md).
 */
export const setProductOrder: readonly SQL[] = [sql`${cards.productType} = 'Sealed Products'`, sql`length(${cards.number})`, asc(cards.number), asc(cards.id)]

/** A set with its game's id, name and slug. */
export const setDetailColumns = { ...getTableColumns(sets), gameName: games.name, gameSlug: games.slug }
export type SetDetailRecord = SetRecord & { gameName: string; gameSlug: string }

const setById = preparedQuery((db) =>
  db
    .select(setDetailColumns)
    .from(sets)
    .innerJoin(games, eq(games.id, sets.gameId))
    .where(eq(sets.id, sql.placeholder('id')))
    .limit(1)
    .prepare('set_by_id'),
)
export async function findSet(db: Database, id: number): Promise<SetDetailRecord | undefined> {
  const [row] = await setById(db).execute({ id })
  return row
}

// docs/adr/0011-primary-printing.md: a card's primary printing is Normal when it has one, else its first printing
// in the spec's order for its game kind, which is the order of PRINTINGS_BY_KIND (Normal leads
// wherever it exists).
export const printingRank = sql`array_position(case ${games.kind} ${sql.join(
  Object.entries(PRINTINGS_BY_KIND).map(
    ([kind, names]) =>
      sql`when ${kind} then array[${sql.join(
        names.map((n) => sql`${n}`),
        sql`, `,
      )}]::text[]`,
  ),
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

/** Columns of a card-with-price row (docs/adr/0041-card-prices-and-card-fields.md); the query must join games, sets and primaryPrice. */
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
export type PriceRecord = typeof cardPrices.$inferSelect

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
  return db.select(cardColumns).from(cards).innerJoin(sets, eq(sets.id, cards.setId)).innerJoin(games, eq(games.id, cards.gameId)).where(where)
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
