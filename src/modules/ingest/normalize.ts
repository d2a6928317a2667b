import { addDays } from '../../shared/clock'
import { cleanName } from '../../shared/text'
import { foilOnly } from '../catalog/printings'
import type { SourcePrice, SourceProduct } from './source'

/** The first day the marketplace's history has data for (spec: "Data starts in March 2025"). */
export const HISTORY_START = '2025-03-02'

/**
 * How far back a seed fills history (docs/adr/0055-prices-changes-and-history.md): one point a week from `weeklyFrom`, then
 * every day for the last `dailyDays` days.
 */
export interface BackfillPlan {
  /** YYYY-MM-DD: the first weekly point; later ones fall on the same weekday. */
  weeklyFrom: string
  dailyDays: number
}

export const DEFAULT_BACKFILL: BackfillPlan = { weeklyFrom: HISTORY_START, dailyDays: 60 }

/**
 * The history dates a seed fills before `today`, oldest first: every 7th day from `weeklyFrom`,
 * then every day from the last weekly date at or before `today − dailyDays` (so the daily stretch
 * covers at least `dailyDays` days and the weekly and daily points meet without an odd gap). Seeds
 * made on different days share their weekly dates. Never before HISTORY_START.
 */
export function backfillDates(today: string, plan: BackfillPlan): string[] {
  const dates: string[] = []
  const dailyFrom = addDays(today, -plan.dailyDays)
  let day = plan.weeklyFrom
  while (addDays(day, 7) <= dailyFrom) {
    dates.push(day)
    day = addDays(day, 7)
  }
  // biome-ignore lint/complexity/useMathMinMax: ISO dates compared as text, which Math.min cannot do
  for (day = day < dailyFrom ? day : dailyFrom; day < today; day = addDays(day, 1)) dates.push(day)
  return dates.filter((date) => date >= HISTORY_START)
}

export function toCardRow(product: SourceProduct, ids: { setId: number; gameId: number }, now: Date) {
  return {
    setId: ids.setId,
    gameId: ids.gameId,
    marketplaceId: product.productId,
    name: product.name,
    cleanName: cleanName(product.name),
    // A blank number is no number: null, as for sealed products (docs/adr/0092-sealed-products-have-no-number.md).
    number: product.number === null || product.number.trim() === '' ? null : product.number,
    rarity: product.rarity,
    imageUrl: product.imageUrl,
    marketplaceUrl: product.url,
    productType: product.productType,
    foilOnly: foilOnly(product.printings),
    totalListings: product.totalListings,
    shippingCategoryId: product.shippingCategoryId,
    productStatusId: product.productStatusId,
    hp: product.hp,
    customAttributes: product.customAttributes,
    updatedAt: now,
  }
}

/** The last market price the marketplace reported for a printing, and when. */
export interface MarketState {
  price: number
  asOf: string
}

/**
 * Today's market price: the reported one, or the last one kept and dated when the marketplace
 * reported none (spec: market_price_as_of). A printing that never had one has none: its
 * market_price is null, not borrowed from another price (docs/adr/0055-prices-changes-and-history.md).
 */
export function nextMarketState(price: SourcePrice, previous: MarketState | undefined, date: string): MarketState | undefined {
  if (price.marketPrice !== null) return { price: price.marketPrice, asOf: date }
  return previous
}

/** Percent change from `past` to `current`, 2 decimals; null when there is no usable past point. */
export function percentChange(current: number, past: number | undefined): number | null {
  if (past === undefined || past <= 0) return null
  return Math.round(((current - past) / past) * 10_000) / 100
}

export const printingKey = (cardId: number, printing: string) => `${cardId}\u0000${printing}`
