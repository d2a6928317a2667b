import { Type } from '@sinclair/typebox'
import { Elysia } from 'elysia'
import { models } from '../../shared/models-plugin'
import { type ApiKeyRule, authGuard, KEY_GUARD_ERRORS, withRateLimit } from '../auth/guard'
import type { AuthRuntime } from '../auth/runtime'
import type { SnapshotStore } from '../snapshot/store'
import { PriceRow } from '../catalog/model'
import {
  BulkIdsQuery,
  BulkMeta,
  BulkPriceRow,
  ChangesMeta,
  ChangesQuery,
  MAX_BULK_PRICE_IDS,
  MAX_CHANGES,
  MAX_MOVERS,
  TopMoverRow,
  TopMoversMeta,
  TopMoversQuery,
} from './model'
import { ALSO_MSGPACK, MSGPACK, NOT_MODIFIED, repeatedSnapshotAnswer, snapshotResponse } from './respond'
import { bulkPrices, priceChanges, topMovers } from './service'
import type { RepeatAnswer } from '../../shared/repeat-routes'

const TOP_MOVERS_KEY = { needs: 'catalog' } satisfies ApiKeyRule

/** The price reads a repeat of is answered before routing (shared/repeat-routes.ts). */
export function pricesRepeats(auth: AuthRuntime, snapshots: SnapshotStore): Record<string, RepeatAnswer> {
  return { '/v1/prices/top-movers': repeatedSnapshotAnswer(auth, snapshots, TOP_MOVERS_KEY) }
}

/** Price reads answered from the in-process snapshot: no database round trip (docs/decisions.md "The snapshot"). */
export function pricesRoutes(auth: AuthRuntime, snapshots: SnapshotStore) {
  return new Elysia({ name: 'prices-routes' })
    .use(models)
    .use(authGuard(auth))
    .model({ BulkPriceRow, TopMoverRow, PriceRow })
    .get(
      '/v1/bulk/prices',
      // Destructured, not `(context) =>`: Elysia reads what a handler uses to skip the rest
      // (a handler taking the whole context had every request's cookies parsed).
      async ({ request, set, query }) => {
        const snapshot = await snapshots.get()
        return snapshotResponse({ request, set }, snapshot, () => bulkPrices(snapshot, query.ids), { msgpack: true })
      },
      {
        apiKey: { needs: 'bulk_read' },
        query: BulkIdsQuery,
        response: {
          200: withRateLimit(Type.Object({ data: Type.Array(Type.Ref('BulkPriceRow')), meta: BulkMeta })),
          ...NOT_MODIFIED,
          400: 'Error',
          ...KEY_GUARD_ERRORS,
        },
        detail: {
          tags: ['Prices'],
          ...ALSO_MSGPACK,
          summary: 'Current prices of up to 500 cards (Pro and Business)',
          description:
            `\`ids\`: up to ${MAX_BULK_PRICE_IDS} comma-separated card ids. One Bulk price row per distinct id, in the order asked, from ` +
            "each card's primary printing (Normal when it has one), with the market price of the first foil-type printing that has one beside it. " +
            'Ids that name no card are listed in `meta.not_found`; cards without any price yet (presales) have no row and are listed in ' +
            '`meta.unpriced`, so every row has a market price, low price and 24 h change as far as the marketplace source reports them ' +
            '(null only where it does not: a printing never sold or without listings). `meta.total` counts the rows. ' +
            'Answered from the price snapshot, which every sync renews: ' +
            'send the `ETag` back as `If-None-Match` to get 304 until prices change. `Accept: ' +
            `${MSGPACK}\` returns the same body as msgpack.`,
        },
      },
    )
    .get(
      '/v1/prices/top-movers',
      async ({ request, set, query }) => {
        const snapshot = await snapshots.get()
        return snapshotResponse({ request, set }, snapshot, () => topMovers(snapshot, query), { msgpack: false, remember: true })
      },
      {
        apiKey: TOP_MOVERS_KEY,
        query: TopMoversQuery,
        response: {
          200: withRateLimit(Type.Object({ data: Type.Array(Type.Ref('TopMoverRow')), meta: TopMoversMeta })),
          ...NOT_MODIFIED,
          400: 'Error',
          404: 'Error',
          ...KEY_GUARD_ERRORS,
        },
        detail: {
          tags: ['Prices'],
          summary: 'The printings whose market price moved most',
          description:
            'One row per card × printing with a market price and a change over `period` (24h, 7d or 30d): for `direction=up` ' +
            'the largest gains first, for `down` the largest drops first; an unchanged price is neither. Ties go by card id, ' +
            `then printing. Filters: \`game\` (slug; unknown is 404), \`type\`, \`printing\` (exact). \`limit\` 1 to ${MAX_MOVERS}, ` +
            'default 20. Answered from the price snapshot; `ETag` and `If-None-Match` as for bulk prices.',
        },
      },
    )
    .get(
      '/v1/prices/changes',
      async ({ request, set, query }) => {
        const snapshot = await snapshots.get()
        return snapshotResponse({ request, set }, snapshot, () => priceChanges(snapshot, query), { msgpack: true })
      },
      {
        apiKey: { needs: 'bulk_read' },
        query: ChangesQuery,
        response: {
          200: withRateLimit(Type.Object({ data: Type.Array(Type.Ref('PriceRow')), meta: ChangesMeta })),
          ...NOT_MODIFIED,
          400: 'Error',
          404: 'Error',
          ...KEY_GUARD_ERRORS,
        },
        detail: {
          tags: ['Prices'],
          ...ALSO_MSGPACK,
          summary: 'Price rows changed since an instant: a feed to stay in sync (Pro and Business)',
          description:
            'Price rows (one per card × printing) whose `last_updated_at` is after `since`, oldest first (then by card id and ' +
            `printing), at most \`limit\` (1 to ${MAX_CHANGES}, default 100), optionally of one \`game\`. \`meta.next\` marks where the ` +
            'answer ended: ask with `cursor` = `next` (instead of `since`) while `has_more`, and keep the last `next` to ask ' +
            'later for what changed after it. Answered from the price snapshot; `ETag` and msgpack as for bulk prices.',
        },
      },
    )
}
