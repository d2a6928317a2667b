import { type Static, Type } from '@sinclair/typebox'
import { Id, ListTotal, LiteralUnion, QueryInt, QueryParams, Timestamp } from '../../shared/model'
import { PRODUCT_TYPES, ReportedMoney } from '../catalog/model'

/**
 * The spec's Bulk price row: one per card that has prices, from its primary printing (docs/decisions.md
 * "Primary printing"); a card without any is in `meta.unpriced` instead (docs/decisions.md "Bulk price rows and `ids` lists").
 */
export const BulkPriceRow = Type.Object(
  {
    card_id: Id,
    market_price: ReportedMoney("the primary printing's market price (Normal when the card has one)", 'it was never sold'),
    low_price: ReportedMoney("the primary printing's lowest listing price", 'it has no listings'),
    foil_market_price: Type.Union([Type.Number(), Type.Null()], {
      description:
        'USD, the market price of the first foil-type printing (Foil, Holofoil, Reverse Holofoil, Rainbow Foil, Cold Foil …) that has one; ' +
        'null when the card has none',
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

export const MAX_BULK_PRICE_IDS = 500

export const BulkIdsQuery = QueryParams({
  ids: Type.String({
    description: `Comma-separated card ids (positive integers), at most ${MAX_BULK_PRICE_IDS}; a repeated id is answered once`,
    examples: ['1,2,3'],
  }),
})

export const SnapshotMeta = {
  snapshot_version: Type.String({ description: 'The price snapshot that answered; it changes after every sync' }),
  as_of: Type.Union([Timestamp, Type.Null()], { description: 'Newest price update in that snapshot' }),
}

export const BulkMeta = Type.Object({
  requested: Type.Integer({ minimum: 0, description: 'Distinct ids asked for' }),
  found: Type.Integer({ minimum: 0, description: 'Ids that name a card, with prices or not' }),
  not_found: Type.Array(Id, { description: 'Ids that name no card, in request order' }),
  unpriced: Type.Array(Id, { description: 'Ids of cards without any price yet (presales), in request order: they have no row in `data`' }),
  total: ListTotal('Rows in `data`: `found` less the `unpriced` cards'),
  ...SnapshotMeta,
})

export const MOVER_PERIODS = ['24h', '7d', '30d'] as const
export type MoverPeriod = (typeof MOVER_PERIODS)[number]
export const MOVER_DIRECTIONS = ['up', 'down'] as const
export type MoverDirection = (typeof MOVER_DIRECTIONS)[number]
export const MAX_MOVERS = 50

/**
 * The spec's Top mover row: one card × printing. The slugs, marketplace_id and last_updated_at go
 * beyond the spec: the public service's clients read them (docs/decisions.md "Compatibility superset").
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
  price_change: Type.Number({ description: "Percent change over the period (15.5 = +15.5%)" }),
  image_url: Type.String({ format: 'uri' }),
  marketplace_id: Id,
  last_updated_at: Timestamp,
})
export type TopMoverRow = Static<typeof TopMoverRow>

export const TopMoversQuery = QueryParams({
  game: Type.Optional(Type.String({ minLength: 1, maxLength: 100, description: 'Game slug; all games when absent' })),
  direction: Type.Optional(LiteralUnion(MOVER_DIRECTIONS, { default: 'up', description: 'up: biggest gains first; down: biggest losses first' })),
  period: Type.Optional(LiteralUnion(MOVER_PERIODS, { default: '24h', description: 'The change ranked: over 24 hours (default), 7 or 30 days' })),
  printing: Type.Optional(Type.String({ minLength: 1, maxLength: 100, description: 'Only this printing (exact match)' })),
  type: Type.Optional(LiteralUnion(PRODUCT_TYPES, { description: 'Cards or sealed products only' })),
  limit: Type.Optional(QueryInt({ minimum: 1, maximum: MAX_MOVERS, default: 20, description: `Rows, 1 to ${MAX_MOVERS}` })),
})

export const TopMoversMeta = Type.Object({
  period: LiteralUnion(MOVER_PERIODS),
  direction: LiteralUnion(MOVER_DIRECTIONS),
  count: Type.Integer({ minimum: 0 }),
  total: ListTotal('Rows in `data` (the same as `count`)'),
  ...SnapshotMeta,
})

export const MAX_CHANGES = 1000

export const ChangesQuery = QueryParams({
  since: Type.Optional(
    Type.String({ format: 'date-time', description: 'ISO 8601 instant: rows updated after it (give this or `cursor`)', examples: ['2026-11-20T00:00:00Z'] }),
  ),
  cursor: Type.Optional(
    Type.String({ minLength: 1, maxLength: 400, description: "A previous answer's `meta.next`: rows after the last one it returned (give this or `since`)" }),
  ),
  game: Type.Optional(Type.String({ minLength: 1, maxLength: 100, description: 'Game slug; all games when absent' })),
  limit: Type.Optional(QueryInt({ minimum: 1, maximum: MAX_CHANGES, default: 100, description: `Rows, 1 to ${MAX_CHANGES}` })),
})

export const ChangesMeta = Type.Object({
  count: Type.Integer({ minimum: 0 }),
  total: ListTotal('Rows in `data` (the same as `count`); more may follow, see `has_more`'),
  has_more: Type.Boolean({ description: 'More rows follow now: ask again with `cursor` = `next`' }),
  next: Type.String({ description: 'Where this answer ended. Keep it: asking with it later returns what changed since' }),
  ...SnapshotMeta,
})
