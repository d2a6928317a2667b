import { foilOnly } from '../catalog/printings'
import { addDays } from '../../shared/clock'
import { cleanName } from '../../shared/text'
import type { SourcePrice, SourceProduct } from './source'

/** The first day the marketplace's history has data for (spec: "Data starts in March 2025"). */
export const HISTORY_START = '2025-03-02'

/** How far back a seed fills history: weekly points for a year, daily points for the recent weeks. */
export interface BackfillPlan {
  weeklyDays: number
  dailyDays: number
}

export const DEFAULT_BACKFILL: BackfillPlan = { weeklyDays: 365, dailyDays: 60 }

/**
 * The history dates a seed fills before `today`, oldest first: one point a week (on the weekday of
 * `today − dailyDays`) back to `weeklyDays` ago, then every day, never before HISTORY_START.
 */
export function backfillDates(today: string, plan: BackfillPlan): string[] {
  const dates: string[] = []
  const dailyStart = addDays(today, -plan.dailyDays)
  for (let back = plan.weeklyDays - ((plan.weeklyDays - plan.dailyDays) % 7); back > plan.dailyDays; back -= 7) {
    dates.push(addDays(today, -back))
  }
  for (let day = dailyStart; day < today; day = addDays(day, 1)) dates.push(day)
  return dates.filter((date) => date >= HISTORY_START)
}

export function toCardRow(product: SourceProduct, ids: { setId: number; gameId: number }, now: Date) {
  return {
    setId: ids.setId,
    gameId: ids.gameId,
    marketplaceId: product.productId,
    name: product.name,
    cleanName: cleanName(product.name),
    number: product.number,
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
 * reported none (spec: market_price_as_of). A printing that never had one starts from its median
 * listing price, so market_price is always a number.
 */
export function nextMarketState(price: SourcePrice, previous: MarketState | undefined, date: string): MarketState {
  if (price.marketPrice !== null) return { price: price.marketPrice, asOf: date }
  return previous ?? { price: price.midPrice, asOf: date }
}

/** Percent change from `past` to `current`, 2 decimals; null when there is no usable past point. */
export function percentChange(current: number, past: number | undefined): number | null {
  if (past === undefined || past <= 0) return null
  return Math.round(((current - past) / past) * 10_000) / 100
}

export const printingKey = (cardId: number, printing: string) => `${cardId}\u0000${printing}`
