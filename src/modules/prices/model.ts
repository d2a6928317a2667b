import { Type } from '@sinclair/typebox'
import { Id, ListTotal, LiteralUnion, QueryInt, QueryParams, Timestamp } from '../../shared/model'
import { PRODUCT_TYPES } from '../catalog/model'
import { MAX_MOVERS, MOVER_DIRECTIONS, MOVER_PERIODS } from '../snapshot/model'

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
  since: Type.Optional(Type.String({ format: 'date-time', description: 'ISO 8601 instant: rows updated after it (give this or `cursor`)', examples: ['2026-11-20T00:00:00Z'] })),
  cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 400, description: "A previous answer's `meta.next`: rows after the last one it returned (give this or `since`)" })),
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
