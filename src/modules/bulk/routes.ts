import { Type } from '@sinclair/typebox'
import { Elysia } from 'elysia'
import { headOfStreamedAnswer } from '../../shared/bun-workarounds'
import type { Logger } from '../../shared/logger'
import { models } from '../../shared/models-plugin'
import { authGuard, KEY_GUARD_ERRORS, rateLimitOf, withRateLimit } from '../auth/guard'
import type { AuthRuntime } from '../auth/runtime'
import { IdParams, PriceRow } from '../catalog/model'
import { HistoryRow } from '../history/model'
import { ALSO_MSGPACK, msgpackWhenAsked } from '../prices/respond'
import {
  AmbiguousName,
  BulkCardsMeta,
  BulkCardsQuery,
  BulkHistoryMeta,
  BulkHistoryQuery,
  CardWithPrices,
  ExportMeta,
  ExportQuery,
  MAX_BULK_CARD_IDS,
  MAX_BULK_HISTORY_IDS,
  ResolvedByMarketplaceId,
  ResolvedByName,
  ResolveMarketplaceBody,
  ResolveMeta,
  ResolveNameBody,
} from './model'
import { bulkCards, bulkHistory, describeExport, EXPORT_COLUMNS, EXPORT_LIST_SEPARATOR, exportSet, resolveCost, resolveMarketplaceIds, resolveNames } from './service'

const MSGPACK_NOTE = ' `Accept: application/msgpack` returns the same body msgpack-encoded; errors stay the JSON envelope.'

const RESOLVE_LIMITS =
  'Per request at most Starter 100, Pro 500, Business 1,000 items (more is a 400); a valid body costs ceil(items × 1.0 / 0.5 / 0.1) ' +
  'credits of the daily quota instead of 1, and is refused with 429 when fewer are left. A body refused with 400 costs 1.'

/** Batched reads backed by Postgres: full cards, history, set export, and bulk resolve. */
export function bulkRoutes(auth: AuthRuntime, logger: Logger) {
  return (
    new Elysia({ name: 'bulk-routes' })
      .use(models)
      .use(authGuard(auth))
      .model({ CardWithPrices, PriceRow })
      // Refusals stay the JSON envelope whatever Accept asks (docs/adr/0014-msgpack.md): only answers are re-encoded.
      .mapResponse((context) => (Number(context.set.status) >= 400 ? undefined : msgpackWhenAsked(context)))
      .get('/v1/bulk/cards', ({ query }) => bulkCards(auth.db, query.ids), {
        apiKey: { needs: 'bulk_read' },
        query: BulkCardsQuery,
        response: {
          200: withRateLimit(Type.Object({ data: Type.Array(Type.Ref('CardWithPrices')), meta: BulkCardsMeta })),
          400: 'Error',
          ...KEY_GUARD_ERRORS,
        },
        detail: {
          tags: ['Bulk'],
          ...ALSO_MSGPACK,
          summary: `Full cards with their prices, up to ${MAX_BULK_CARD_IDS} (Pro and Business)`,
          description: `One full Card with \`prices\` per distinct id, in the order asked; ids that name no card are in \`meta.not_found\`.${MSGPACK_NOTE}`,
        },
      })
      .get(
        '/v1/bulk/history',
        ({ query, apiKey }) => bulkHistory(auth.db, { rawIds: query.ids, range: query.range ?? 'month', printing: query.printing, policy: apiKey.policy, now: apiKey.now }),
        {
          apiKey: { needs: 'bulk_history' },
          query: BulkHistoryQuery,
          response: {
            200: withRateLimit(
              Type.Object({
                data: Type.Record(Type.String({ pattern: '^[1-9][0-9]*$' }), Type.Array(HistoryRow), {
                  description: "Keyed by card id: that card's points in the window, oldest first, then by printing",
                }),
                meta: BulkHistoryMeta,
              }),
            ),
            400: 'Error',
            ...KEY_GUARD_ERRORS,
          },
          detail: {
            tags: ['Bulk'],
            ...ALSO_MSGPACK,
            summary: `Price history of up to ${MAX_BULK_HISTORY_IDS} cards (Business)`,
            description:
              '`range` month (30 days, default), quarter (90), year (365) or all, today included, clipped to the tier window as for one ' +
              "card's history. `printing` (exact) keeps that printing's points only: cards without it get an empty list, and it is a 400 " +
              'when none of the cards found has it. Every known id is a key (an empty list when it has no points in the window); the ' +
              'others are in `meta.not_found`.' +
              MSGPACK_NOTE,
          },
        },
      )
      .get(
        '/v1/export/set/:id',
        async ({ params, query, apiKey, request }) => {
          const format = query.format ?? 'json'
          if (request.method === 'HEAD') {
            // GET's status and headers without reading a row.
            const described = await describeExport(auth.db, { setId: params.id, format, now: apiKey.now })
            return headOfStreamedAnswer({ 'content-type': described.contentType, 'content-disposition': `attachment; filename="${described.filename}"` })
          }
          const exported = await exportSet(auth.db, {
            setId: params.id,
            format,
            now: apiKey.now,
            rateLimit: rateLimitOf(request),
            onError: (error) => logger.error({ err: error, setId: params.id }, 'set export failed midway; the response was cut short'),
          })
          return new Response(exported.stream, {
            headers: { 'content-type': exported.contentType, 'content-disposition': `attachment; filename="${exported.filename}"` },
          })
        },
        {
          apiKey: { needs: 'set_export' },
          params: IdParams,
          query: ExportQuery,
          response: {
            200: withRateLimit(Type.Object({ data: Type.Array(Type.Ref('CardWithPrices')), meta: ExportMeta })),
            400: 'Error',
            404: 'Error',
            ...KEY_GUARD_ERRORS,
          },
          detail: {
            tags: ['Bulk'],
            'x-also-as': { 'text/csv': 'With `format=csv`: RFC 4180 text, a header row first' },
            summary: 'Download every card, sealed product and price of a set (Business)',
            description:
              'Every card and sealed product of the set, priced or not, cards in number order and sealed products after them, streamed as ' +
              'it is read: the whole set in one answer (no paging). `format=json` (default): `{ data, meta, rate_limit }`, one full card ' +
              '(every field of `GET /v1/cards/:id`) per item with its `prices` (each with its newest recorded sales; an empty list when it ' +
              'has none yet); `meta.total` counts the items. `format=csv`: RFC 4180, one row per card and printing (a card without prices: ' +
              'one row, its price cells empty), with the same columns for every set: ' +
              `${EXPORT_COLUMNS.join(', ')}. Custom attributes the columns do not name go, as JSON, to \`custom_attributes.other\`; a list ` +
              `(energyType) is its items joined by \`${EXPORT_LIST_SEPARATOR}\`; nulls are empty fields. Both come as an attachment named ` +
              '`<game>-<set>-prices-<date>.<format>`.',
          },
        },
      )
      .post('/v1/bulk/resolve/marketplace', ({ body, apiKey }) => resolveMarketplaceIds(auth.db, { ids: body.ids, tier: apiKey.identity.tier }), {
        apiKey: { needs: 'bulk_resolve', cost: resolveCost('ids') },
        body: ResolveMarketplaceBody,
        response: {
          200: withRateLimit(
            Type.Object({
              data: Type.Object({
                resolved: Type.Array(ResolvedByMarketplaceId, { description: 'In request order' }),
                not_found: Type.Array(Type.Integer(), { description: 'Marketplace ids that name no card, in request order' }),
              }),
              meta: ResolveMeta,
            }),
          ),
          400: 'Error',
          ...KEY_GUARD_ERRORS,
        },
        detail: {
          tags: ['Bulk'],
          ...ALSO_MSGPACK,
          summary: 'Resolve marketplace product ids to cards (Starter and up)',
          description: `Body \`{ ids: [...] }\`. Each id that names a card comes back with the full card and its prices. ${RESOLVE_LIMITS}${MSGPACK_NOTE}`,
        },
      })
      .post('/v1/bulk/resolve/name', ({ body, apiKey }) => resolveNames(auth.db, { names: body.names, game: body.game, tier: apiKey.identity.tier }), {
        apiKey: { needs: 'bulk_resolve', cost: resolveCost('names') },
        body: ResolveNameBody,
        response: {
          200: withRateLimit(
            Type.Object({
              data: Type.Object({
                resolved: Type.Array(ResolvedByName, { description: 'In request order' }),
                ambiguous: Type.Array(AmbiguousName, { description: 'Names that fit several cards about as well: pick one by id' }),
                not_found: Type.Array(Type.String(), { description: 'Names that fit no card well enough, as sent' }),
              }),
              meta: ResolveMeta,
            }),
          ),
          400: 'Error',
          404: 'Error',
          ...KEY_GUARD_ERRORS,
        },
        detail: {
          tags: ['Bulk'],
          ...ALSO_MSGPACK,
          summary: 'Resolve card names to cards (Starter and up)',
          description:
            'Body `{ names: [...], game? }`. A name equal to exactly one card name once case, accents and punctuation are set ' +
            'aside is an exact match (score 1). Otherwise the most similar names are weighed (trigram similarity): the best is a ' +
            'fuzzy match when it scores at least 0.6 and leads the next by 0.1; when several cards fit about as well (reprints ' +
            'share a name) the name is reported in `ambiguous` with its candidates, never guessed. `game` (slug) limits the ' +
            `candidates to one game: more accurate and faster; an unknown game is 404. ${RESOLVE_LIMITS}${MSGPACK_NOTE}`,
        },
      })
  )
}
