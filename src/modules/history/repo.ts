import { and, asc, desc, eq, gte, inArray, lte, sql } from 'drizzle-orm'
import type { Database, Executor } from '../../db/client'
import { preparedQueries, preparedQuery } from '../../db/prepared'
import { cardPrices, cards, priceHistory } from '../../db/schema'
import type { HistoryRow } from './model'
import { historyColumns } from './queries'

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

const historyRows = preparedQueries((db, shape: ReturnType<typeof historyShape>) =>
  db
    .select(historyColumns)
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

/** A printing's newest history point with recorded sales (sales_volume not null): its day, volume and average price. */
export interface NewestSales {
  cardId: number
  printing: string
  date: string
  salesVolume: number
  avgSalesPrice: number | null
}

/**
 * Each printing's newest point with recorded sales, of these cards: one statement on the primary
 * key (the cards' history rows, a few hundred each). Read per request, not in the snapshot: over
 * every printing it is a scan of the whole history (5.5–8 s on the large catalog), docs/adr/0093-sales-in-pro-card-prices.md.
 */
export async function findNewestSales(db: Executor, cardIds: number[]): Promise<NewestSales[]> {
  if (cardIds.length === 0) return []
  return db
    .selectDistinctOn([priceHistory.cardId, priceHistory.printing], {
      cardId: priceHistory.cardId,
      printing: priceHistory.printing,
      date: priceHistory.date,
      salesVolume: sql<number>`${priceHistory.salesVolume}`,
      avgSalesPrice: priceHistory.avgSalesPrice,
    })
    .from(priceHistory)
    .where(and(inArray(priceHistory.cardId, cardIds), sql`${priceHistory.salesVolume} is not null`))
    .orderBy(priceHistory.cardId, priceHistory.printing, desc(priceHistory.date))
}
