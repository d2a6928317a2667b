import { date, doublePrecision, index, integer, jsonb, pgTable, primaryKey, text } from 'drizzle-orm/pg-core'
import { cards } from './catalog'
import { timestamptz } from './columns'

// Money and percentages are double precision, stored rounded to 2 decimals: postgres.js returns
// `numeric` as strings, and the API must emit JSON numbers without a parse on every read.

/** Current price per card and printing. */
export const cardPrices = pgTable(
  'card_prices',
  {
    cardId: integer('card_id')
      .notNull()
      .references(() => cards.id),
    printing: text('printing').notNull(),
    marketPrice: doublePrecision('market_price'),
    /** When the marketplace last reported market_price; older than last_updated_at when it went quiet. */
    marketPriceAsOf: date('market_price_as_of', { mode: 'string' }),
    /** null (like the two below) when the source does not report it: never filled with a made-up number. */
    lowPrice: doublePrecision('low_price'),
    medianPrice: doublePrecision('median_price'),
    lowestWithShipping: doublePrecision('lowest_with_shipping'),
    buylistPrice: doublePrecision('buylist_price'),
    priceChange24h: doublePrecision('price_change_24h'),
    priceChange7d: doublePrecision('price_change_7d'),
    priceChange30d: doublePrecision('price_change_30d'),
    lastUpdatedAt: timestamptz('last_updated_at').notNull(),
  },
  (table) => [
    primaryKey({ columns: [table.cardId, table.printing] }),
    // Change feeds ("what moved since T") read by update time.
    index('card_prices_updated_idx').on(table.lastUpdatedAt),
  ],
)

/**
 * Daily price points per card and printing. The primary key leads with the card (history reads)
 * and contains the date, so the table can be range-partitioned by month without a key change.
 * No foreign key to cards: the check cost 3.6 µs per inserted row, more than the insert itself
 * (1.4 µs), on the tens of millions of rows a seed writes; only the sync writes here, with ids it
 * just read from cards, and cards are never deleted but with their history (`wipeCatalog`).
 */
export const priceHistory = pgTable(
  'price_history',
  {
    cardId: integer('card_id').notNull(),
    printing: text('printing').notNull(),
    date: date('date', { mode: 'string' }).notNull(),
    marketPrice: doublePrecision('market_price').notNull(),
    /** null when the source did not report one that day. */
    lowPrice: doublePrecision('low_price'),
    /** null: not recorded yet (or never, from a source without sales). */
    avgSalesPrice: doublePrecision('avg_sales_price'),
    /** null: not recorded yet; 0: no sales that day. */
    salesVolume: integer('sales_volume'),
  },
  (table) => [primaryKey({ columns: [table.cardId, table.printing, table.date] })],
)

/** Per-condition listing prices, refreshed live from the marketplace's listings. */
export const conditionPrices = pgTable(
  'condition_prices',
  {
    cardId: integer('card_id')
      .notNull()
      .references(() => cards.id),
    printing: text('printing').notNull(),
    condition: text('condition').notNull(),
    language: text('language').notNull(),
    lowPrice: doublePrecision('low_price').notNull(),
    lowestWithShipping: doublePrecision('lowest_with_shipping').notNull(),
    /** null when fewer than 3 listings were sampled. */
    medianWithShipping: doublePrecision('median_with_shipping'),
    sampleCount: integer('sample_count').notNull(),
    lastUpdatedAt: timestamptz('last_updated_at').notNull(),
  },
  (table) => [
    primaryKey({ columns: [table.cardId, table.printing, table.condition, table.language] }),
    // The rolling re-crawl takes the oldest rows first.
    index('condition_prices_updated_idx').on(table.lastUpdatedAt),
  ],
)

/**
 * When each card's condition rows were last refreshed from the marketplace's listings, and the
 * live listing counts per condition seen then. A refresh replaces all of a card's rows at once, so
 * this one instant dates them; a card refreshed with no listings has a row here and none above.
 */
export const conditionRefreshes = pgTable(
  'condition_refreshes',
  {
    cardId: integer('card_id')
      .primaryKey()
      .references(() => cards.id),
    refreshedAt: timestamptz('refreshed_at').notNull(),
    /** Total live listings per condition across all printings (market depth, not the sample). */
    conditionCounts: jsonb('condition_counts').$type<Record<string, number>>().notNull(),
  },
  // The rolling re-crawl takes the oldest refreshes first.
  (table) => [index('condition_refreshes_at_idx').on(table.refreshedAt)],
)
