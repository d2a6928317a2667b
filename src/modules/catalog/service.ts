import type { Database } from '../../db/client'
import { AppError, notFound } from '../../shared/errors'
import { MAX_ID, type Page, pageMeta } from '../../shared/model'
import type { Card, CardWithPrice, Game, MarketplacePrice, Price, PriceRow, SetCardSort, SetDetail, SetSummary } from './model'
import * as queries from './queries'
import * as repo from './repo'

const iso = (instant: Date | null) => instant?.toISOString() ?? null

function toGame(row: queries.GameRecord): Game {
  return {
    id: row.id,
    name: row.name,
    slug: row.slug,
    priority: row.priority,
    set_count: row.setCount,
    card_count: row.cardCount,
    last_synced_at: iso(row.lastSyncedAt),
    marketplace_id: row.marketplaceCategoryId,
    image_url: row.imageUrl,
    logo_url: row.logoUrl,
  }
}

function toSetSummary(row: queries.SetRecord): SetSummary {
  return {
    id: row.id,
    name: row.name,
    slug: row.slug,
    abbreviation: row.abbreviation,
    release_date: row.releaseDate,
    card_count: row.cardCount,
    last_synced_at: iso(row.lastSyncedAt),
    marketplace_id: row.marketplaceGroupId,
    image_url: row.imageUrl,
    set_icon_url: row.setIconUrl,
  }
}

export async function listGames(db: Database, page: Page) {
  const { rows, total } = await repo.findGamesPage(db, page)
  return { data: rows.map(toGame), meta: pageMeta(page, total) }
}

/**
 * What `:slug` in `/v1/games/:slug` names: an all-digit value is the game's id (the public
 * service's clients ask `/v1/games/3`; docs/adr/0025-compatibility-superset.md), anything else its slug. Undefined for
 * an id no game can have (beyond the column's range), which is simply not found.
 */
export function gameRefOf(slugOrId: string): queries.GameRef | undefined {
  if (!/^[0-9]+$/.test(slugOrId)) return { slug: slugOrId }
  const id = Number(slugOrId)
  return id <= MAX_ID ? { id } : undefined
}

export async function getGame(db: Database, slugOrId: string) {
  const ref = gameRefOf(slugOrId)
  const game = ref && (await queries.findGame(db, ref))
  if (!game) throw notFound(`Game '${slugOrId}'`)
  return { data: toGame(game) }
}

/** The game's sets, each with the game's id, name and slug (docs/adr/0025-compatibility-superset.md) beside the spec's list fields. */
export async function listGameSets(db: Database, slugOrId: string, page: Page) {
  const ref = gameRefOf(slugOrId)
  const found = ref && (await repo.findSetsPageOfGame(db, ref, page))
  if (!found) throw notFound(`Game '${slugOrId}'`)
  return { data: found.rows.map(toSetDetail), meta: pageMeta(page, found.total) }
}

function toSetDetail(row: queries.SetDetailRecord): SetDetail {
  return { ...toSetSummary(row), game_id: row.gameId, game_name: row.gameName, game_slug: row.gameSlug }
}

export async function listSets(db: Database, gameSlug: string | undefined, page: Page) {
  const found = await repo.findSetsPage(db, gameSlug, page)
  if (!found) throw notFound(`Game '${gameSlug}'`)
  return { data: found.rows.map(toSetDetail), meta: pageMeta(page, found.total) }
}

export async function getSet(db: Database, id: number) {
  const set = await queries.findSet(db, id)
  if (!set) throw notFound(`Set ${id}`)
  return { data: toSetDetail(set) }
}

/** A card-with-price row's fields: the SQL record's, or a snapshot card's with its primary price (its update time already ISO text). */
type CardWithPriceFields = Omit<repo.CardWithPriceRecord, 'priceUpdatedAt' | 'total'> & { priceUpdatedAt: Date | string | null }
type PrimaryPriceFields = 'printing' | 'marketPrice' | 'lowPrice' | 'medianPrice' | 'lowestWithShipping' | 'priceUpdatedAt'

export function toCardWithPrice(row: CardWithPriceFields): CardWithPrice {
  return {
    id: row.id,
    name: row.name,
    clean_name: row.cleanName,
    number: row.number,
    rarity: row.rarity,
    marketplace_id: row.marketplaceId,
    product_type: row.productType as CardWithPrice['product_type'],
    foil_only: row.foilOnly,
    total_listings: row.totalListings,
    image_url: row.imageUrl,
    game_name: row.gameName,
    game_slug: row.gameSlug,
    set_name: row.setName,
    set_slug: row.setSlug,
    printing: row.printing,
    market_price: row.marketPrice,
    low_price: row.lowPrice,
    median_price: row.medianPrice,
    lowest_with_shipping: row.lowestWithShipping,
    price_updated_at: typeof row.priceUpdatedAt === 'string' ? row.priceUpdatedAt : iso(row.priceUpdatedAt),
  }
}

/** The same row for a card the price snapshot holds: its prices are the spec's Price objects, the primary first; none, all null. */
export function snapshotCardWithPrice(card: Omit<CardWithPriceFields, PrimaryPriceFields> & { prices: readonly Price[] }): CardWithPrice {
  const primary = card.prices[0]
  return toCardWithPrice({
    ...card,
    printing: primary?.printing ?? null,
    marketPrice: primary?.market_price ?? null,
    lowPrice: primary?.low_price ?? null,
    medianPrice: primary?.median_price ?? null,
    lowestWithShipping: primary?.lowest_with_shipping ?? null,
    priceUpdatedAt: primary?.last_updated_at ?? null,
  })
}

export async function listSetCards(db: Database, setId: number, filter: { type?: string; sort: SetCardSort }, page: Page) {
  const found = await repo.findSetCardsPage(db, setId, filter, page)
  let total = found.total
  if (total === undefined) {
    // Past the last page, or no such set: tell them apart.
    if (!(await queries.findSet(db, setId))) throw notFound(`Set ${setId}`)
    total = await repo.countSetCards(db, setId, filter.type)
  }
  return { data: found.rows.map(toCardWithPrice), meta: pageMeta(page, total) }
}

/** A price row as selected, where a left join may leave the card's fields null. */
type PriceFields = Omit<queries.PriceRecord, 'cardId' | 'printing' | 'lastUpdatedAt'> & {
  cardId: number | null
  printing: string | null
  lastUpdatedAt: Date | null
}

export function toPrice(row: PriceFields): Price {
  return {
    card_id: row.cardId!,
    printing: row.printing!,
    market_price: row.marketPrice,
    market_price_as_of: row.marketPriceAsOf,
    low_price: row.lowPrice,
    median_price: row.medianPrice,
    lowest_with_shipping: row.lowestWithShipping,
    buylist_price: row.buylistPrice,
    price_change_24h: row.priceChange24h,
    price_change_7d: row.priceChange7d,
    price_change_30d: row.priceChange30d,
    last_updated_at: row.lastUpdatedAt!.toISOString(),
  }
}

/** docs/adr/0041-card-prices-and-card-fields.md's price row: a printing's Price within its card's identity. */
export function priceRowOf(card: { name: string; marketplaceId: number; productType: string; foilOnly: number; imageUrl: string }, { card_id, ...price }: Price): PriceRow {
  return {
    card_id,
    name: card.name,
    marketplace_id: card.marketplaceId,
    product_type: card.productType as PriceRow['product_type'],
    foil_only: card.foilOnly,
    ...price,
    image_url: card.imageUrl,
  }
}

export const toPriceRow = (row: repo.PriceRowRecord): PriceRow => priceRowOf(row, toPrice(row))

export async function listSetPrices(db: Database, setId: number, type: string | undefined) {
  const rows = await repo.findSetPriceRows(db, setId, type)
  if (rows.length === 0 && !(await queries.findSet(db, setId))) throw notFound(`Set ${setId}`)
  const data = rows.map(toPriceRow)
  return { data, meta: { total: data.length } }
}

/** The spec's Card from a card row with its set and game names. */
export function toCard(row: queries.CardRecord): Card {
  return {
    id: row.id,
    name: row.name,
    clean_name: row.cleanName,
    number: row.number,
    rarity: row.rarity,
    image_url: row.imageUrl,
    marketplace_id: row.marketplaceId,
    marketplace_url: row.marketplaceUrl,
    product_type: row.productType as Card['product_type'],
    foil_only: row.foilOnly,
    total_listings: row.totalListings,
    shipping_category_id: row.shippingCategoryId,
    product_status_id: row.productStatusId,
    // Spec: `hp` is present for games that have it, so elsewhere it is left out, not null.
    ...(row.hp === null ? {} : { hp: row.hp }),
    custom_attributes: row.customAttributes,
    set_id: row.setId,
    set_name: row.setName,
    set_slug: row.setSlug,
    game_id: row.gameId,
    game_name: row.gameName,
    game_slug: row.gameSlug,
  }
}

export async function getCard(db: Database, id: number) {
  const row = await repo.findCard(db, id)
  if (!row) throw notFound(`Card ${id}`)
  return { data: toCard(row) }
}

export async function getCardByMarketplaceId(db: Database, marketplaceId: number) {
  const { card, prices } = await repo.findCardPrices(db, { marketplaceId })
  if (!card) throw notFound(`Card with marketplace id ${marketplaceId}`)
  const data = prices.map((row): MarketplacePrice => {
    const { card_id: _id, price_change_7d: _7d, price_change_30d: _30d, ...price } = toPrice(row as PriceFields)
    return price
  })
  return { data: { ...toCard(card), prices: data } }
}

/** What getCardPrices reads of the price snapshot (which is built from this module, so it is not imported). */
export interface CardPricesLookup {
  card(id: number): { prices: Price[] } | undefined
}

/**
 * A card's prices from the price snapshot, optionally one exact printing. Spec: when the card has
 * exactly one printing, `data` is that object rather than a one-element array (a printing filter
 * that matches one row keeps the array: the shape follows the card, not the filter).
 */
export function getCardPrices(snapshot: CardPricesLookup, id: number, printing: string | undefined) {
  const card = snapshot.card(id)
  if (!card) throw notFound(`Card ${id}`)
  const all = card.prices
  if (printing === undefined) return { data: all.length === 1 ? all[0]! : all }
  const matching = all.filter((price) => price.printing === printing)
  if (matching.length === 0) {
    const known = all.map((price) => price.printing)
    throw new AppError('INVALID_PARAMETER', `Card ${id} has no printing '${printing}'; its printings: ${known.length > 0 ? known.join(', ') : 'none yet'}`, [
      { field: 'printing', message: `one of: ${known.join(', ')}` },
    ])
  }
  return { data: all.length === 1 ? matching[0]! : matching }
}
