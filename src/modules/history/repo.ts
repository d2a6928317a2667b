import { and, eq, gte, lte, sql } from 'drizzle-orm'
import type { Database } from '../../db/client'
import { preparedQueries } from '../../db/prepared'
import { cardPrices, cards, priceHistory } from '../../db/schema'
import type { HistoryRow } from './model'

export interface HistoryFilter {
  cardId: number
  /** Exact printing name; all printings when absent. */
  printing?: string
  /** First and last day included (YYYY-MM-DD); no bound when absent. */
  from?: string
  to?: string
}

export interface CardHistory {
  /** The card's printings (its card_prices rows), in byte order. */
  printings: string[]
  /** The points in the filter, oldest first, then by printing (byte order). */
  rows: HistoryRow[]
}

/** Which bounds a history query has: what changes its SQL. */
const historyShape = (filter: HistoryFilter) => ({
  printing: filter.printing !== undefined,
  from: filter.from !== undefined,
  to: filter.to !== undefined,
})

/** A point as the API's History row, built by Postgres (dates as YYYY-MM-DD, prices as JSON numbers). */
const historyRowJson = sql`json_build_object(
  'date', ${priceHistory.date}, 'printing', ${priceHistory.printing},
  'market_price', ${priceHistory.marketPrice}, 'low_price', ${priceHistory.lowPrice},
  'avg_sales_price', ${priceHistory.avgSalesPrice}, 'sales_volume', ${priceHistory.salesVolume})`

const cardHistory = preparedQueries((db, shape: ReturnType<typeof historyShape>) => {
  const inWindow = and(
    eq(priceHistory.cardId, cards.id),
    shape.printing ? eq(priceHistory.printing, sql.placeholder('printing')) : undefined,
    shape.from ? gte(priceHistory.date, sql.placeholder('from')) : undefined,
    shape.to ? lte(priceHistory.date, sql.placeholder('to')) : undefined,
  )
  return db
    .select({
      printings: sql<string[]>`coalesce((
        select array_agg(${cardPrices.printing} order by ${cardPrices.printing} collate "C")
        from ${cardPrices} where ${cardPrices.cardId} = ${cards.id}
      ), '{}')`,
      rows: sql<HistoryRow[]>`coalesce((
        select json_agg(${historyRowJson} order by ${priceHistory.date}, ${priceHistory.printing} collate "C")
        from ${priceHistory} where ${inWindow}
      ), '[]')`,
    })
    .from(cards)
    .where(eq(cards.id, sql.placeholder('cardId')))
    .prepare('card_history')
})

/**
 * The card's printings and its history points in the filter, in one statement: primary-key
 * lookups on cards and card_prices, and a range scan of price_history's primary key (card_id,
 * printing, date). Postgres returns the points already in the API's shape, as one JSON value: one
 * value for the driver to decode instead of six per point. Byte order for printings, so the order
 * does not depend on the database's collation. Undefined when no card has the id.
 */
export async function findCardHistory(db: Database, filter: HistoryFilter): Promise<CardHistory | undefined> {
  const [row] = await cardHistory(db, historyShape(filter)).execute({ ...filter })
  return row
}
