import { type Static, Type } from '@sinclair/typebox'
import { Id, ListTotal, LiteralUnion, QueryParams, Timestamp } from '../../shared/model'
import { CONDITIONS, type ListingCondition, SEALED_CONDITION } from '../ingest/source'

/** Spec order of the conditions: the five card grades, then sealed products' one. */
export const LISTING_CONDITIONS: readonly ListingCondition[] = [...CONDITIONS, SEALED_CONDITION]

/** Rows at most this old are served without a refresh (spec, Rule 1). */
export const FRESH_FOR_MS = 24 * 3_600_000

/** Bulk condition prices take as many ids as bulk prices (docs/adr/0070-answers.md). */
export const MAX_BULK_CONDITION_IDS = 500

const Money = (description = 'USD') => Type.Number({ description })

/** The spec's Condition price row. */
export const ConditionPriceRow = Type.Object(
  {
    card_id: Id,
    printing: Type.String(),
    condition: LiteralUnion(LISTING_CONDITIONS, {
      description: 'Near Mint, Lightly Played, Moderately Played, Heavily Played or Damaged; sealed products: Unopened',
    }),
    language: Type.String({ examples: ['English'] }),
    low_price: Money('Lowest listed item price for the printing, condition and language (USD)'),
    lowest_with_shipping: Money('Lowest listed price including shipping (USD)'),
    median_with_shipping: Type.Union([Money(), Type.Null()], {
      description:
        'Median of the sampled shipping-inclusive prices; null when fewer than 3 listings were sampled. Resists junk one-cent listings: prefer it to low_price for pricing inventory',
    }),
    sample_count: Type.Integer({ minimum: 1, description: 'Listings sampled for the row, not the total market depth' }),
    last_updated_at: Timestamp,
  },
  { description: "One printing × condition × language of a card, from the marketplace's live listings" },
)
export type ConditionPriceRow = Static<typeof ConditionPriceRow>

const COUNTS_DESCRIPTION = 'Total live listings per condition across all printings (market depth, beyond the sample)'
const ConditionCounts = (description = COUNTS_DESCRIPTION) => Type.Record(Type.String(), Type.Integer({ minimum: 0 }), { description })

export const ConditionPricesMeta = Type.Object({
  total: ListTotal('Rows in `data`'),
  cached: Type.Boolean({ description: 'true: served from the condition catalog; false: refreshed live from the marketplace for this request' }),
  as_of: Type.String({ format: 'date-time', description: "When the rows served were refreshed from the marketplace's listings" }),
  stale: Type.Boolean({
    description: 'true when rows older than 24 hours were served because no refresh was possible (live refresh allowance used up, or the marketplace failing)',
  }),
  stale_reason: Type.Optional(
    LiteralUnion(['live_refresh_limit', 'upstream_unavailable'] as const, {
      description: 'Why a refresh was not possible; present only when `stale` is true',
    }),
  ),
  condition_counts: Type.Optional(ConditionCounts(`${COUNTS_DESCRIPTION}; present on live-refreshed answers only`)),
})
export type ConditionPricesMeta = Static<typeof ConditionPricesMeta>

export const ConditionPricesQuery = QueryParams({
  printing: Type.Optional(Type.String({ minLength: 1, maxLength: 100, description: "Only this printing (exact match); a printing the card lacks is a 400 listing the card's" })),
})

/** A bulk condition row: the row with the card's name and marketplace id (docs/adr/0070-answers.md). */
export const BulkConditionRow = Type.Object({
  ...ConditionPriceRow.properties,
  name: Type.String(),
  marketplace_id: Id,
})
export type BulkConditionRow = Static<typeof BulkConditionRow>

export const BulkConditionsQuery = QueryParams({
  ids: Type.String({
    description: `Comma-separated card ids (positive integers), at most ${MAX_BULK_CONDITION_IDS}; a repeated id is answered once`,
    examples: ['1,2,3'],
  }),
})

export const BulkConditionsMeta = Type.Object({
  requested: Type.Integer({ minimum: 0, description: 'Distinct ids asked for' }),
  found: Type.Integer({ minimum: 0, description: 'Ids that name a card' }),
  not_found: Type.Array(Id, { description: 'Requested ids that name no card, in request order' }),
  not_cached: Type.Array(Id, { description: 'Cards with no cached condition rows (never refreshed, or no live listings), in request order' }),
  total: ListTotal('Rows in `data`, all cards together'),
})
