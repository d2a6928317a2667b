import type { Database, Executor } from '../../db/client'
import { addDays, utcDate } from '../../shared/clock'
import { invalidQuery, notFound } from '../../shared/errors'
import type { TierPolicy } from '../auth/tiers'
import type { Price, PriceWithSales, SALES_FIELDS } from '../catalog/model'
import { type DetailedHistoryMeta, type HistoryMeta, type HistoryRange, type HistoryRow, RANGE_DAYS } from './model'
import * as repo from './repo'

export interface HistoryWindow {
  range: HistoryRange
  /** Window length in days, today included; null = no lower bound. */
  days: number | null
  /** First day included; null = no lower bound. */
  from: string | null
  /** Last day included: today. */
  to: string
  clippedToTier: boolean
  tierDays: number | null
}

/**
 * The window of `GET /v1/cards/:id/history` (docs/adr/0012-history-window.md). The range asks for a number of
 * days (month 30, quarter 90, year 365, all unlimited); the tier's `historyDays` caps it (Free 7,
 * Hobby 30, Starter 90, Pro and Business unlimited); the smaller one applies. An N-day window is
 * the N UTC dates ending with today, today included: [today − (N − 1), today], both ends
 * inclusive, "today" being the UTC date of the service clock's instant the request was charged
 * at. So a Free caller on 2026-11-20 sees 2026-11-14 … 2026-11-20 (7 dates). An unlimited window
 * has no lower bound and still ends today.
 */
export function historyWindow(range: HistoryRange, policy: Pick<TierPolicy, 'historyDays'>, now: Date): HistoryWindow {
  const today = utcDate(now)
  const rangeDays = RANGE_DAYS[range]
  const tierDays = policy.historyDays
  const clippedToTier = tierDays !== null && (rangeDays === null || tierDays < rangeDays)
  const days = clippedToTier ? tierDays : rangeDays
  return {
    range,
    days,
    from: days === null ? null : addDays(today, -(days - 1)),
    to: today,
    clippedToTier,
    tierDays,
  }
}

/**
 * 404 for an unknown card; 400 naming `printing` (and listing the card's printings) when the card
 * has no printing of that name, so a typo is not mistaken for "no history".
 */
function checkPrinting(card: repo.CardPrintings | undefined, cardId: number, printing: string | undefined) {
  if (!card) throw notFound(`Card ${cardId}`)
  if (printing === undefined || card.printings.includes(printing)) return
  const expected = card.printings.length > 0 ? `must be one of this card's printings: ${card.printings.join(', ')}` : 'card has no printings'
  throw invalidQuery(`'printing' ${expected} (got '${printing}')`, [{ field: 'printing', message: expected }])
}

/**
 * The rows in the window, in one statement when there are any: a row proves the card exists and,
 * when one printing was asked for, that the card has it. Only an empty window needs the second
 * statement (the card and its printings) to tell an unknown card (404) or printing (400) from a
 * window without points.
 */
async function load(db: Database, filter: repo.HistoryFilter): Promise<HistoryRow[]> {
  const rows = await repo.findHistory(db, filter)
  if (rows.length === 0) checkPrinting(await repo.findCardPrintings(db, filter.cardId), filter.cardId, filter.printing)
  return rows
}

export async function getHistory(
  db: Database,
  request: { cardId: number; range: HistoryRange; printing?: string; policy: Pick<TierPolicy, 'historyDays'>; now: Date },
): Promise<{ data: HistoryRow[]; meta: HistoryMeta }> {
  const window = historyWindow(request.range, request.policy, request.now)
  const data = await load(db, {
    cardId: request.cardId,
    printing: request.printing,
    from: window.from ?? undefined,
    to: window.to,
  })
  return { data, meta: { ...windowMeta(window), count: data.length, total: data.length } }
}

/** `meta`'s account of the window applied (docs/adr/0012-history-window.md). */
export function windowMeta(window: HistoryWindow): Omit<HistoryMeta, 'count' | 'total'> {
  return {
    range: window.range,
    days: window.days,
    from: window.from,
    to: window.to,
    clipped_to_tier: window.clippedToTier,
    tier_history_days: window.tierDays,
  }
}

/** Every recorded point of the card (or one printing), no date window: Pro and Business only. */
export async function getDetailedHistory(db: Database, request: { cardId: number; printing?: string }): Promise<{ data: HistoryRow[]; meta: DetailedHistoryMeta }> {
  const data = await load(db, { cardId: request.cardId, printing: request.printing })
  const printings = [...new Set(data.map((row) => row.printing))].sort()
  return {
    data,
    meta: {
      count: data.length,
      total: data.length,
      first_date: data[0]?.date ?? null,
      last_date: data.at(-1)?.date ?? null,
      printings,
    },
  }
}

type SalesFields = Pick<PriceWithSales, (typeof SALES_FIELDS)[number]>
const NO_SALES: SalesFields = { sales_volume: null, avg_sales_price: null, sales_as_of: null }

/**
 * What gives a Price of these cards its newest recorded sales (Pro and up, docs/adr/0093-sales-in-pro-card-prices.md): the newest history point of its printing whose sales_volume is
 * not null, its day, volume and average price; all null when none was recorded (a source without
 * sales, a printing never worth 1 USD). One statement for all the cards.
 */
export async function newestSalesOf(db: Executor, cardIds: number[]): Promise<(price: Price) => PriceWithSales> {
  const byPrinting = new Map<string, SalesFields>()
  for (const row of await repo.findNewestSales(db, cardIds)) {
    byPrinting.set(`${row.cardId} ${row.printing}`, { sales_volume: row.salesVolume, avg_sales_price: row.avgSalesPrice, sales_as_of: row.date })
  }
  return (price) => ({ ...price, ...(byPrinting.get(`${price.card_id} ${price.printing}`) ?? NO_SALES) })
}
