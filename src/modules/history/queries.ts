/** History's public query surface: the reads of price history other modules (bulk) build on. */
import { and, asc, eq, gte, inArray, lte, sql } from 'drizzle-orm'
import type { Executor } from '../../db/client'
import { cardPrices, priceHistory } from '../../db/schema'
import type { HistoryRow } from './model'

/** A history row's columns under the API's field names, so rows go out as the driver returns them. */
export const historyColumns = {
  date: priceHistory.date,
  printing: priceHistory.printing,
  market_price: priceHistory.marketPrice,
  low_price: priceHistory.lowPrice,
  avg_sales_price: priceHistory.avgSalesPrice,
  sales_volume: priceHistory.salesVolume,
}

/** The points of many cards in one window (of one printing, if given), by card, then oldest first, then printing: one statement on the primary key. */
export async function findHistoryOfCards(db: Executor, cardIds: number[], window: { from?: string; to: string; printing?: string }): Promise<(HistoryRow & { card_id: number })[]> {
  if (cardIds.length === 0) return []
  return db
    .select({ card_id: priceHistory.cardId, ...historyColumns })
    .from(priceHistory)
    .where(
      and(
        inArray(priceHistory.cardId, cardIds),
        window.printing === undefined ? undefined : eq(priceHistory.printing, window.printing),
        window.from === undefined ? undefined : gte(priceHistory.date, window.from),
        lte(priceHistory.date, window.to),
      ),
    )
    .orderBy(asc(priceHistory.cardId), asc(priceHistory.date), sql`${priceHistory.printing} collate "C"`)
}

/** The distinct printings the cards have (their card_prices rows), in byte order. */
export async function findPrintingsOfCards(db: Executor, cardIds: number[]): Promise<string[]> {
  if (cardIds.length === 0) return []
  const rows = await db.selectDistinct({ printing: cardPrices.printing }).from(cardPrices).where(inArray(cardPrices.cardId, cardIds))
  // Sorted here: with DISTINCT, PostgreSQL orders only by selected expressions, and a collated one is another.
  return rows.map((row) => row.printing).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
}
