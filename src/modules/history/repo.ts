import { and, asc, eq, gte, lte, sql } from 'drizzle-orm'
import type { Database } from '../../db/client'
import { preparedQueries, preparedQuery } from '../../db/prepared'
import { cardPrices, cards, priceHistory } from '../../db/schema'
import type { HistoryRow } from './model'

export interface CardPrintings {
  id: number
  /** The card's printings (its card_prices rows), in byte order. */
  printings: string[]
}

/**
 * The card and its printings in one statement (primary-key lookups on cards and card_prices);
 * undefined when no card has the id.
 */
const cardPrintings = preparedQuery((db) =>
  db
    .select({
      id: cards.id,
      printings: sql<string[]>`coalesce((
        select array_agg(${cardPrices.printing} order by ${cardPrices.printing} collate "C")
        from ${cardPrices} where ${cardPrices.cardId} = ${cards.id}
      ), '{}')`,
    })
    .from(cards)
    .where(eq(cards.id, sql.placeholder('cardId')))
    .prepare('card_printings'),
)
export async function findCardPrintings(db: Database, cardId: number): Promise<CardPrintings | undefined> {
  const [row] = await cardPrintings(db).execute({ cardId })
  return row
}

export interface HistoryFilter {
  cardId: number
  /** Exact printing name; all printings when absent. */
  printing?: string
  /** First and last day included (YYYY-MM-DD); no bound when absent. */
  from?: string
  to?: string
}

/** Which bounds a history query has: what changes its SQL. */
const historyShape = (filter: HistoryFilter) => ({
  printing: filter.printing !== undefined,
  from: filter.from !== undefined,
  to: filter.to !== undefined,
})

const historyRows = preparedQueries(
  (db, shape: ReturnType<typeof historyShape>) =>
    db
      // Selected under the API's field names, so the rows go out as the driver returns them.
      .select({
        date: priceHistory.date,
        printing: priceHistory.printing,
        market_price: priceHistory.marketPrice,
        low_price: priceHistory.lowPrice,
        avg_sales_price: priceHistory.avgSalesPrice,
        sales_volume: priceHistory.salesVolume,
      })
      .from(priceHistory)
      .where(
        and(
          eq(priceHistory.cardId, sql.placeholder('cardId')),
          shape.printing ? eq(priceHistory.printing, sql.placeholder('printing')) : undefined,
          shape.from ? gte(priceHistory.date, sql.placeholder('from')) : undefined,
          shape.to ? lte(priceHistory.date, sql.placeholder('to')) : undefined,
        ),
      )
      .orderBy(asc(priceHistory.date), sql`${priceHistory.printing} collate "C"`)
      .prepare('history_rows'),
)

/**
 * The card's history points, oldest first, then by printing (byte order, so the order does not
 * depend on the database's collation). One statement on the primary key (card_id, printing, date):
 * a range scan of the card's rows, narrowed to one printing's date range when a printing is given.
 */
export async function findHistory(db: Database, filter: HistoryFilter): Promise<HistoryRow[]> {
  return historyRows(db, historyShape(filter)).execute({ ...filter })
}
