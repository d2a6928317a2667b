import { type Static, Type } from '@sinclair/typebox'
import { Id, LiteralUnion, QueryParams } from '../../shared/model'
import { Card, Price } from '../catalog/model'
import { HISTORY_RANGES, HistoryMeta } from '../history/model'
import { TIER_POLICY } from '../auth/tiers'

// Spec limits (Limits → Other limits).
export const MAX_BULK_CARD_IDS = 100
export const MAX_BULK_HISTORY_IDS = 50

const idsParam = (max: number) =>
  Type.String({ description: `Comma-separated card ids (positive integers), at most ${max}; a repeated id is answered once`, examples: ['1,2,3'] })

export const BulkCardsQuery = QueryParams({ ids: idsParam(MAX_BULK_CARD_IDS) })

export const CardWithPrices = Type.Object(
  { ...Card.properties, prices: Type.Array(Price, { description: 'One per printing, primary printing first' }) },
  { description: 'The spec’s Card with its prices' },
)
export type CardWithPrices = Static<typeof CardWithPrices>

const NotFoundIds = Type.Array(Id, { description: 'Requested ids that name no card, in request order' })

export const BulkCardsMeta = Type.Object({
  requested: Type.Integer({ minimum: 0, description: 'Distinct ids asked for' }),
  found: Type.Integer({ minimum: 0 }),
  not_found: NotFoundIds,
})

// The spec lists month, quarter and year; `all` and `printing` are accepted too, as one card's
// history takes them, because the public service's clients send them (docs/decisions.md "Compatibility superset").
export const BulkHistoryQuery = QueryParams({
  ids: idsParam(MAX_BULK_HISTORY_IDS),
  range: Type.Optional(
    LiteralUnion(HISTORY_RANGES, {
      default: 'month',
      description:
        'month = 30 days, quarter = 90, year = 365, all = everything; then clipped to the tier window as for one card\'s history',
    }),
  ),
  printing: Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: 100,
      description:
        'Only this printing (exact match). Cards without it get an empty list; 400 when none of the cards found has it',
    }),
  ),
})

export const BulkHistoryMeta = Type.Object({
  ...Type.Omit(HistoryMeta, ['count']).properties,
  requested: Type.Integer({ minimum: 0, description: 'Distinct ids asked for' }),
  found: Type.Integer({ minimum: 0 }),
  not_found: NotFoundIds,
  count: Type.Integer({ minimum: 0, description: 'History rows in `data`, all cards together' }),
})

export const EXPORT_FORMATS = ['json', 'csv'] as const
export const ExportQuery = QueryParams({
  format: Type.Optional(LiteralUnion(EXPORT_FORMATS, { default: 'json', description: 'json (default) or csv (RFC 4180, header row first)' })),
})

export const ExportMeta = Type.Object({
  set_id: Id,
  set_name: Type.String(),
  game_slug: Type.String(),
  count: Type.Integer({ minimum: 0, description: 'Rows in `data`' }),
  exported_at: Type.String({ format: 'date-time' }),
})

// Bulk resolve: item limits and credits come from the tier table (Limits → Bulk resolve credits).
const MAX_RESOLVE_ITEMS = Math.max(...Object.values(TIER_POLICY).map((policy) => policy.resolve?.maxItems ?? 0))

export const ResolveMarketplaceBody = Type.Object({
  ids: Type.Array(Type.Integer({ minimum: 1, maximum: 2147483647 }), {
    minItems: 1,
    maxItems: MAX_RESOLVE_ITEMS,
    description: 'Marketplace product ids; per request at most Starter 100, Pro 500, Business 1,000',
  }),
})

/**
 * Long enough for the longest printed card name (141 characters), and short enough that the largest
 * request, 1,000 names each written as `\uXXXX` escapes (6 bytes a character, as ASCII-only JSON
 * encoders do), stays under the default body limit of 1 MiB.
 */
export const MAX_RESOLVE_NAME_LENGTH = 150

export const ResolveNameBody = Type.Object({
  names: Type.Array(Type.String({ minLength: 1, maxLength: MAX_RESOLVE_NAME_LENGTH }), {
    minItems: 1,
    maxItems: MAX_RESOLVE_ITEMS,
    description: 'Card names as written anywhere (case, accents and punctuation do not matter); per request at most Starter 100, Pro 500, Business 1,000',
  }),
  game: Type.Optional(Type.String({ minLength: 1, maxLength: 100, description: 'Game slug: only that game’s cards are candidates (more accurate, faster)' })),
})

export const ResolveMeta = Type.Object({
  requested: Type.Integer({ minimum: 0, description: 'Items in the request' }),
  resolved: Type.Integer({ minimum: 0 }),
  credits_consumed: Type.Integer({ minimum: 0, description: 'ceil(items × the tier’s credit per item), taken from the daily quota' }),
})

export const ResolvedByMarketplaceId = Type.Object({
  marketplace_id: Id,
  card: Card,
  prices: Type.Array(Price),
})

export const CandidateCard = Type.Object({
  id: Id,
  name: Type.String(),
  set_name: Type.String(),
  set_slug: Type.String(),
  game_name: Type.String(),
  game_slug: Type.String(),
  score: Type.Number({ minimum: 0, maximum: 1 }),
})

export const ResolvedByName = Type.Object({
  query: Type.String({ description: 'The name as sent' }),
  match: LiteralUnion(['exact', 'fuzzy'] as const, { description: 'exact: same name once case, accents and punctuation are set aside' }),
  score: Type.Number({ minimum: 0, maximum: 1, description: '1 for exact; trigram similarity of the names for fuzzy' }),
  card: Card,
  prices: Type.Array(Price),
})

export const AmbiguousName = Type.Object({
  query: Type.String(),
  candidates: Type.Array(CandidateCard, { description: 'The cards it could mean, best first (at most 5)' }),
})
