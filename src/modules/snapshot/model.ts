import { type Static, Type } from '@sinclair/typebox'
import { Id, LiteralUnion, Timestamp } from '../../shared/model'
import { PRODUCT_TYPES, ReportedMoney } from '../catalog/model'

// The rows the snapshot computes once per sync; the prices routes answer them (and re-export them).

/**
 * The spec's Bulk price row: one per card that has prices, from its primary printing (docs/adr/0011-primary-printing.md); a card without any is in `meta.unpriced` instead (docs/adr/0047-bulk-price-rows-and-ids-lists.md).
 */
export const BulkPriceRow = Type.Object(
  {
    card_id: Id,
    market_price: ReportedMoney("the primary printing's market price (Normal when the card has one)", 'it was never sold'),
    low_price: ReportedMoney("the primary printing's lowest listing price", 'it has no listings'),
    foil_market_price: Type.Union([Type.Number(), Type.Null()], {
      description:
        'USD, the market price of the first foil-type printing (Foil, Holofoil, Reverse Holofoil, Rainbow Foil, Cold Foil …) that has one; ' + 'null when the card has none',
    }),
    price_change_24h: Type.Union([Type.Number(), Type.Null()], { description: 'Percent (15.5 = +15.5%); null: not enough data' }),
    last_updated_at: Timestamp,
  },
  {
    description:
      "One card's current price. Rows come in the order the ids were asked for, each id once; cards without prices (presales) have no row and are listed in `meta.unpriced`.",
  },
)
export type BulkPriceRow = Static<typeof BulkPriceRow>

export const MOVER_PERIODS = ['24h', '7d', '30d'] as const
export type MoverPeriod = (typeof MOVER_PERIODS)[number]
export const MOVER_DIRECTIONS = ['up', 'down'] as const
export type MoverDirection = (typeof MOVER_DIRECTIONS)[number]
export const MAX_MOVERS = 50

/**
 * The spec's Top mover row: one card × printing. The slugs, marketplace_id and last_updated_at go
 * beyond the spec: the public service's clients read them (docs/adr/0025-compatibility-superset.md).
 */
export const TopMoverRow = Type.Object({
  card_id: Id,
  name: Type.String(),
  set_name: Type.String(),
  set_slug: Type.String(),
  game_name: Type.String(),
  game_slug: Type.String({ description: 'As in `/v1/games/:slug` and the `game` filter' }),
  product_type: LiteralUnion(PRODUCT_TYPES),
  foil_only: Type.Integer({ minimum: 0, maximum: 1 }),
  printing: Type.String(),
  market_price: Type.Number({ description: 'USD; a printing without a market price is never a mover' }),
  price_change: Type.Number({ description: 'Percent change over the period (15.5 = +15.5%)' }),
  image_url: Type.String({ format: 'uri' }),
  marketplace_id: Id,
  last_updated_at: Timestamp,
})
export type TopMoverRow = Static<typeof TopMoverRow>
