import { and, asc, eq, gte, lte, type SQL, sql } from 'drizzle-orm'
import type { Executor } from '../../db/client'
import { cardPrices, cards, priceHistory } from '../../db/schema'

export interface CardPrintings {
  id: number
  /** The card's printings (its card_prices rows), in byte order. */
  printings: string[]
}

/**
 * The card and its printings in one statement (primary-key lookups on cards and card_prices);
 * undefined when no card has the id.
 */
export async function findCardPrintings(db: Executor, cardId: number): Promise<CardPrintings | undefined> {
  const [row] = await db
    .select({
      id: cards.id,
      printings: sql<string[]>`coalesce((
        select array_agg(${cardPrices.printing} order by ${cardPrices.printing} collate "C")
        from ${cardPrices} where ${cardPrices.cardId} = ${cards.id}
      ), '{}')`,
    })
    .from(cards)
    .where(eq(cards.id, cardId))
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

export type HistoryRecord = typeof priceHistory.$inferSelect

/**
 * The card's history points, oldest first, then by printing (byte order, so the order does not
 * depend on the database's collation). One statement on the primary key (card_id, printing, date):
 * a range scan of the card's rows, narrowed to one printing's date range when a printing is given.
 */
export async function findHistory(db: Executor, filter: HistoryFilter): Promise<HistoryRecord[]> {
  const conditions: (SQL | undefined)[] = [
    eq(priceHistory.cardId, filter.cardId),
    filter.printing === undefined ? undefined : eq(priceHistory.printing, filter.printing),
    filter.from === undefined ? undefined : gte(priceHistory.date, filter.from),
    filter.to === undefined ? undefined : lte(priceHistory.date, filter.to),
  ]
  return db
    .select()
    .from(priceHistory)
    .where(and(...conditions))
    .orderBy(asc(priceHistory.date), sql`${priceHistory.printing} collate "C"`)
}
