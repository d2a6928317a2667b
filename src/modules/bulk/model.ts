import { type Static, Type } from '@sinclair/typebox'
import { Id, ListTotal, LiteralUnion, QueryParams } from '../../shared/model'
import { TIER_POLICY } from '../auth/tiers'
import { Card, Price, PriceWithSales } from '../catalog/model'
import { HISTORY_RANGES, HistoryMeta } from '../history/model'

// Spec limits (Limits → Other limits).
export const MAX_BULK_CARD_IDS = 100
export const MAX_BULK_HISTORY_IDS = 50

const idsParam = (max: number) => Type.String({ description: `Comma-separated card ids (positive integers), at most ${max}; a repeated id is answered once`, examples: ['1,2,3'] })

export const BulkCardsQuery = QueryParams({ ids: idsParam(MAX_BULK_CARD_IDS) })

export const CardWithPrices = Type.Object(
  {
    ...Card.properties,
    prices: Type.Array(PriceWithSales, {
      description: 'One per printing, primary printing first, each with its newest recorded sales (Pro and up); an empty list when the card has no prices yet',
    }),
  },
  { description: 'The card, every field of `GET /v1/cards/:id`, with its prices' },
)
export type CardWithPrices = Static<typeof CardWithPrices>

const NotFoundIds = Type.Array(Id, { description: 'Requested ids that name no card, in request order' })

export const BulkCardsMeta = Type.Object({
  requested: Type.Integer({ minimum: 0, description: 'Distinct ids asked for' }),
  found: Type.Integer({ minimum: 0 }),
  not_found: NotFoundIds,
  total: ListTotal('Cards in `data`'),
})

// The spec lists month, quarter and year; `all` and `printing` are accepted too, as one card's
// history takes them, because the public service's clients send them (docs/adr/0025-compatibility-superset.md).
export const BulkHistoryQuery = QueryParams({
  ids: idsParam(MAX_BULK_HISTORY_IDS),
  range: Type.Optional(
    LiteralUnion(HISTORY_RANGES, {
      default: 'month',
      description: "month = 30 days, quarter = 90, year = 365, all = everything; then clipped to the tier window as for one card's history",
    }),
  ),
  printing: Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: 100,
      description: 'Only this printing (exact match). Cards without it get an empty list; 400 when none of the cards found has it',
    }),
  ),
})

export const BulkHistoryMeta = Type.Object({
  ...Type.Omit(HistoryMeta, ['count', 'total']).properties,
  requested: Type.Integer({ minimum: 0, description: 'Distinct ids asked for' }),
  found: Type.Integer({ minimum: 0 }),
  not_found: NotFoundIds,
  count: Type.Integer({ minimum: 0, description: 'History rows in `data`, all cards together' }),
  total: ListTotal('History rows in `data`, all cards together (the same as `count`; `data` is keyed by card id)'),
})

export const EXPORT_FORMATS = ['json', 'csv'] as const
export const ExportQuery = QueryParams({
  format: Type.Optional(LiteralUnion(EXPORT_FORMATS, { default: 'json', description: 'json (default) or csv (RFC 4180, header row first)' })),
})

export const ExportMeta = Type.Object({
  set_id: Id,
  set_name: Type.String(),
  game_slug: Type.String(),
  count: Type.Integer({ minimum: 0, description: 'Cards and sealed products in `data`' }),
  total: ListTotal('Cards and sealed products in `data` (the same as `count`): every one of the set'),
  exported_at: Type.String({ format: 'date-time' }),
})

// Bulk resolve: item limits and credits come from the tier table (Limits → Bulk resolve credits).
// The limit is the tier's, so the schemas state none: a schema maxItems (the largest tier's) was
// judged before the tier's own and worded differently (docs/adr/0096-bulk-resolve-limits-read-the-same-on-every-tier.md).
const RESOLVE_ITEM_LIMITS = Object.values(TIER_POLICY)
  .filter((policy) => policy.resolve)
  .map((policy) => `${policy.label} ${policy.resolve!.maxItems.toLocaleString('en-US')}`)
  .join(', ')

export const ResolveMarketplaceBody = Type.Object({
  ids: Type.Array(Type.Integer({ minimum: 1, maximum: 2147483647 }), {
    minItems: 1,
    description: `Marketplace product ids; per request at most ${RESOLVE_ITEM_LIMITS} (more is a 400 naming the tier's limit)`,
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
    description: `Card names as written anywhere (case, accents and punctuation do not matter); per request at most ${RESOLVE_ITEM_LIMITS} (more is a 400 naming the tier's limit)`,
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
