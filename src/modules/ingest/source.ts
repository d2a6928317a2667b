/**
 * The marketplace as the sync pipeline sees it (docs/adr/0052-how-prices-arrive.md). Shapes follow the
 * marketplace's own catalog: categories (games) → groups (sets) → products (cards and sealed
 * products), per-printing prices, daily sales and live listings by condition.
 *
 * Every implementation must be deterministic for a given date so that a re-run sync is a no-op.
 */

import type { GameKind } from '../catalog/printings'

// The catalog's vocabulary, named here too because every source speaks it.

export type ProductType = 'Cards' | 'Sealed Products'

export const CONDITIONS = ['Near Mint', 'Lightly Played', 'Moderately Played', 'Heavily Played', 'Damaged'] as const
export type Condition = (typeof CONDITIONS)[number]

/** Sealed products are sold in one condition (docs/adr/0070-answers.md). */
export const SEALED_CONDITION = 'Unopened'
export type ListingCondition = Condition | typeof SEALED_CONDITION

export interface SourceGame {
  /** The marketplace's category id; stable across syncs. */
  categoryId: number
  name: string
  slug: string
  /** Update tier 0..3 (spec: Data refresh schedule). */
  priority: 0 | 1 | 2 | 3
  kind: GameKind
  /** The game's image at the marketplace; absent when the source has none. */
  imageUrl?: string
  /** The game's logo at the marketplace; absent when the source has none. */
  logoUrl?: string
}

export interface SourceSet {
  /** The marketplace's group id; unique across all games. */
  groupId: number
  categoryId: number
  name: string
  slug: string
  abbreviation: string
  /** YYYY-MM-DD */
  releaseDate: string
  /**
   * Moves whenever the group's products change (the marketplace's `modifiedOn`); absent when the
   * source does not say, and then products are fetched on every sync.
   */
  modifiedOn?: string
  /** The set's image at the marketplace; absent when the source has none. */
  imageUrl?: string
  /** The set's icon (its expansion symbol) at the marketplace; absent when the source has none. */
  setIconUrl?: string
}

export interface SourceProduct {
  /** The marketplace's product id (the API's `marketplace_id`); unique across all games. */
  productId: number
  groupId: number
  name: string
  /**
   * Card number within the set; null when the product has none (sealed products never do). The sync
   * stores a blank number as null too (docs/adr/0092-sealed-products-have-no-number.md).
   */
  number: string | null
  rarity: string
  imageUrl: string
  url: string
  productType: ProductType
  /** 1 = card, 3 = box, 4 = case */
  shippingCategoryId: 1 | 3 | 4
  /** 1 = active, 20 = presale */
  productStatusId: 1 | 20
  /** Active seller listings; null when the source does not count them. */
  totalListings: number | null
  /** Only for games that have hit points; null otherwise. */
  hp: string | null
  /** Game-kind attributes; every value a string except `energyType` (array of strings). */
  customAttributes: Record<string, string | string[]>
  /**
   * The printings this product exists in, in the spec's order for its game kind (names it does not
   * list after them); empty when the source has no price for the product yet.
   */
  printings: string[]
}

/**
 * One printing's prices on one day. A price the source does not report is null and stays null in
 * the API: a real source's gaps are never filled with made-up numbers.
 */
export interface SourcePrice {
  productId: number
  printing: string
  /** Lowest verified listing price. */
  lowPrice: number | null
  /** Median listing price across sellers. */
  midPrice: number | null
  /** Median of recent sales; null when the marketplace reported none that day (the API keeps the last one). */
  marketPrice: number | null
  /** Lowest price including shipping. */
  directLowPrice: number | null
  /** What stores pay; null when no store buys it. */
  buylistPrice: number | null
}

/** One printing's sales on one day. */
export interface SourceSale {
  productId: number
  printing: string
  /** null when there were no sales. */
  avgSalesPrice: number | null
  salesVolume: number
}

/** One live listing (used by the condition-price refresh). */
export interface SourceListing {
  productId: number
  printing: string
  condition: ListingCondition
  language: string
  price: number
  shipping: number
}

/** What the marketplace answers for one product's live listings. */
export interface SourceListings {
  /**
   * A sample of the live listings, not the whole market: the cheapest few of every printing ×
   * condition × language (the demo marketplace: up to 10 each), ordered by printing, condition,
   * language, then price. One-cent placeholder listings are real listings here and may be in it.
   */
  listings: SourceListing[]
  /** Total live listings per condition across all printings: the market's depth, beyond the sample. */
  conditionCounts: Partial<Record<ListingCondition, number>>
}

/** The marketplace sources the service can run on (MARKETPLACE_SOURCE). */
export const SOURCE_NAMES = ['demo', 'tcgcsv', 'http'] as const
export type SourceName = (typeof SOURCE_NAMES)[number]

/**
 * What a source can provide. A capability it lacks is declared, and the API answers that data as
 * unavailable instead of inventing it (docs/adr/0101-real-sources-declare-what-they-lack.md).
 */
export interface SourceCapabilities {
  /** Live listings per condition: condition prices and their re-crawl. */
  listings: boolean
  /** Daily sales: history's avg_sales_price and sales_volume. */
  sales: boolean
  /** Prices of past days: a seed backfills history. Without it history starts at the first sync. */
  pastPrices: boolean
}

export interface MarketplaceSource {
  /** Which source this is: recorded with the catalog it fills. */
  readonly name: SourceName
  readonly capabilities: SourceCapabilities
  /**
   * Rows the source refused since the last call (invalid, duplicated), by kind: a source that
   * validates row by row skips bad rows instead of failing their group. Absent: it never skips.
   */
  takeSkipped?(): Record<string, number>
  /**
   * Records what the source counted (its requests against a daily budget) in the database. The
   * sync calls it outside its transactions, after listing the games and after each game.
   */
  checkpoint?(): Promise<void>
  listGames(): Promise<SourceGame[]>
  listSets(categoryId: number): Promise<SourceSet[]>
  listProducts(groupId: number): Promise<SourceProduct[]>
  /**
   * Prices of every printing of every product of the group on `date` (YYYY-MM-DD, UTC). A source
   * without `pastPrices` answers today's whatever the date.
   */
  listPrices(groupId: number, date: string): Promise<SourcePrice[]>
  /** Sales of every printing of every product of the group on `date` (YYYY-MM-DD, UTC); [] without `sales`. */
  listSales(groupId: number, date: string): Promise<SourceSale[]>
  /** Current live listings of one product: a sample and the counts per condition. Throws without `listings`. */
  listListings(productId: number): Promise<SourceListings>
}
