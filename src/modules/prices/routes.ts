import { type Static, Type } from '@sinclair/typebox'
import { Elysia } from 'elysia'
import type { HotRoutes } from '../../shared/hot-routes'
import { QueryParams } from '../../shared/model'
import { models } from '../../shared/models-plugin'
import { authGuard, KEY_GUARD_ERRORS, NOT_FOUND_ERRORS, withRateLimit } from '../auth/guard'
import type { AuthRuntime } from '../auth/runtime'
import { IdParams, Price, PriceRow } from '../catalog/model'
import { BulkPriceRow, MAX_MOVERS, TopMoverRow } from '../snapshot/model'
import type { SnapshotStore } from '../snapshot/store'
import { BulkIdsQuery, BulkMeta, ChangesMeta, ChangesQuery, MAX_BULK_PRICE_IDS, MAX_CHANGES, TopMoversMeta, TopMoversQuery } from './model'
import { ALSO_MSGPACK, keptSnapshotRoute, MSGPACK, NOT_MODIFIED, snapshotResponse } from './respond'
import { bulkPrices, cardPrices, cardPricesVariant, priceChanges, topMovers } from './service'

const PrintingQuery = QueryParams({
  printing: Type.Optional(Type.String({ minLength: 1, maxLength: 100, description: 'Exact printing name, e.g. Normal or Holofoil' })),
})

/**
 * A card's prices, answered from the snapshot: a price read under the catalog's `/v1/cards`, served
 * right after the catalog's routes (app.ts) so the OpenAPI document lists it among the cards.
 */
export function cardPriceRoutes(auth: AuthRuntime, snapshots: SnapshotStore, hot: HotRoutes) {
  const routes = new Elysia({ name: 'card-price-routes' }).use(models).use(authGuard(auth)).model({ Price })
  return hot.add(
    routes,
    keptSnapshotRoute<Static<typeof IdParams>, Static<typeof PrintingQuery>>(auth, snapshots, {
      path: '/v1/cards/:id/prices',
      rule: { needs: 'catalog' },
      // docs/adr/0093-sales-in-pro-card-prices.md: the answer (and its ETag) depends on the tier's variant.
      variant: cardPricesVariant,
      body: ({ params, query, snapshot, variant }) => cardPrices(auth.db, snapshot, params.id, query.printing, variant),
      hook: {
        params: IdParams,
        query: PrintingQuery,
        response: {
          200: withRateLimit(
            Type.Object({
              data: Type.Union([Type.Ref('Price'), Type.Array(Type.Ref('Price'))], {
                description: 'An array of prices, one per printing; a single object when the card has exactly one printing',
              }),
            }),
          ),
          ...NOT_MODIFIED,
          ...NOT_FOUND_ERRORS,
        },
        detail: {
          tags: ['Cards'],
          summary: "A card's prices per printing",
          description:
            '`printing` is an exact match; a printing the card does not have is a 400 listing the ones it has. Answered from ' +
            'the price snapshot, which every sync renews: send the `ETag` back as `If-None-Match` to get 304 until prices change. ' +
            'From Pro up each price also carries `sales_volume`, `avg_sales_price` and `sales_as_of`: the newest day with recorded ' +
            'sales of that printing (null when none were ever recorded); below Pro the three fields are absent. The ETag differs between the two.',
        },
      },
    }),
  )
}

/** Price reads answered from the in-process snapshot: no database round trip (docs/adr/0020-the-snapshot.md). */
export function pricesRoutes(auth: AuthRuntime, snapshots: SnapshotStore, hot: HotRoutes) {
  const topMoversRoute = keptSnapshotRoute<Record<string, never>, Static<typeof TopMoversQuery>>(auth, snapshots, {
    path: '/v1/prices/top-movers',
    rule: { needs: 'catalog' },
    body: ({ query, snapshot }) => topMovers(snapshot, query),
    hook: {
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
  })
  const routes = new Elysia({ name: 'prices-routes' })
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
  return hot.add(routes, topMoversRoute).get(
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
