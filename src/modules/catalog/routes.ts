import { Type } from '@sinclair/typebox'
import { Elysia } from 'elysia'
import { LRUCache } from 'lru-cache'
import { LiteralUnion, PageMeta, PaginationQuery, QueryParams, toPage } from '../../shared/model'
import { type ApiKeyRule, authGuard, KEY_GUARD_ERRORS, withRateLimit } from '../auth/guard'
import type { AuthRuntime } from '../auth/runtime'
import { NOT_MODIFIED, repeatedSnapshotAnswer, snapshotResponse } from '../prices/respond'
import type { SnapshotStore } from '../snapshot/store'
import { cardPrices, cardPricesVariant } from '../prices/service'
import { models } from '../../shared/models-plugin'
import type { Clock } from '../../shared/clock'
import { createReadCache } from '../../shared/read-cache'
import { JSON_CONTENT_TYPE } from '../../shared/http'
import { pathAndQueryOf, type RepeatAnswer } from '../../shared/repeat-routes'
import {
  Card,
  CardWithPrice,
  Game,
  GameSlugParams,
  IdParams,
  MarketplaceCard,
  MarketplaceIdParams,
  Price,
  PRODUCT_TYPES,
  PriceRow,
  SET_CARD_SORTS,
  SetDetail,
  SetSummary,
} from './model'
import {
  getCard,
  getCardByMarketplaceId,
  getGame,
  getSet,
  listGameSets,
  listGames,
  listSetCards,
  listSetPrices,
  listSets,
} from './service'

const TypeFilter = LiteralUnion(PRODUCT_TYPES, { description: 'Cards or sealed products only' })
const SetsQuery = QueryParams({
  ...PaginationQuery.properties,
  game: Type.Optional(Type.String({ minLength: 1, maxLength: 100, description: 'Game slug' })),
})
const SetCardsQuery = QueryParams({
  ...PaginationQuery.properties,
  type: Type.Optional(TypeFilter),
  sort: Type.Optional(LiteralUnion(SET_CARD_SORTS, { default: 'number', description: 'number (default), name, price_asc or price_desc (by the primary printing\'s market price)' })),
})
const SetPricesQuery = QueryParams({ type: Type.Optional(TypeFilter) })
const PrintingQuery = QueryParams({
  printing: Type.Optional(Type.String({ minLength: 1, maxLength: 100, description: 'Exact printing name, e.g. Normal or Holofoil' })),
})
const NOT_FOUND_ERRORS = { 400: 'Error', 404: 'Error', ...KEY_GUARD_ERRORS } as const

/** Games and sets change only when a sync runs (daily); a few seconds of staleness is invisible. */
const PUBLIC_CACHE_TTL_MS = 5_000

/** Request paths and queries of open reads kept for repeats: their keys' bytes, as the bytes answered are shared. */
const OPEN_REPEATS_BYTES = 4 * 2 ** 20

const jsonResponse = (bytes: Buffer) => new Response(bytes, { headers: { 'content-type': JSON_CONTENT_TYPE } })

/**
 * The open catalog reads (games), serialised once per read, not per request: the bytes go out as
 * they are until they expire. Loaded by what they answer (page, size, slug), so differently
 * written queries share one database read; kept too by the request's exact path and query, for
 * repeats answered before routing (`repeat`), never past the read's own expiry (on `clock`).
 */
export function openCatalogReads(clock: Clock, ttlMs = PUBLIC_CACHE_TTL_MS) {
  const cache = createReadCache(clock, ttlMs)
  const byPath = new LRUCache<string, { bytes: Buffer; until: number }>({ maxSize: OPEN_REPEATS_BYTES, sizeCalculation: (_, path) => path.length + 64 })
  const repeat: RepeatAnswer = (_request, pathAndQuery) => {
    const kept = byPath.get(pathAndQuery)
    return kept && kept.until > clock.monotonic() ? jsonResponse(kept.bytes) : undefined
  }
  return {
    async json(request: Request, key: string, load: () => Promise<unknown>) {
      const read = await cache.get(key, async () => {
        const until = clock.monotonic() + ttlMs
        return { bytes: Buffer.from(JSON.stringify(await load())), until }
      })
      byPath.set(pathAndQueryOf(request.url), read)
      return jsonResponse(read.bytes)
    },
    repeats: { '/v1/games': repeat, '/v1/games/:slug': repeat, '/v1/games/:slug/sets': repeat } satisfies Record<string, RepeatAnswer>,
  }
}

export type OpenCatalogReads = ReturnType<typeof openCatalogReads>

const CARD_PRICES_KEY = { needs: 'catalog' } satisfies ApiKeyRule

/** The catalog reads a repeat of is answered before routing (shared/repeat-routes.ts). */
export function catalogRepeats(auth: AuthRuntime, snapshots: SnapshotStore, reads: OpenCatalogReads): Record<string, RepeatAnswer> {
  return { ...reads.repeats, '/v1/cards/:id/prices': repeatedSnapshotAnswer(auth, snapshots, CARD_PRICES_KEY, cardPricesVariant) }
}

/** The catalog: games (public, no key, no quota: spec Authentication 2), sets and cards (API key). */
export function catalogRoutes(auth: AuthRuntime, snapshots: SnapshotStore, reads: OpenCatalogReads) {
  const deps = { db: auth.db }
  return new Elysia({ name: 'catalog-routes' })
    .use(models)
    .use(authGuard(auth))
    .model({ Game, SetSummary, SetDetail, Card, Price, CardWithPrice, PriceRow })
    .get('/v1/games', ({ request, query }) => {
      const page = toPage(query)
      return reads.json(request, `games:${page.page}:${page.perPage}`, () => listGames(deps.db, page))
    }, {
      query: PaginationQuery,
      response: {
        200: Type.Object({ data: Type.Array(Type.Ref('Game')), meta: PageMeta }),
        400: 'Error',
      },
      detail: { tags: ['Games'], summary: 'List games', description: 'Every supported game, major games first.' },
    })
    .get('/v1/games/:slug', ({ request, params }) => reads.json(request, `game:${params.slug}`, () => getGame(deps.db, params.slug)), {
      params: GameSlugParams,
      response: { 200: Type.Object({ data: Type.Ref('Game') }), 400: 'Error', 404: 'Error' },
      detail: {
        tags: ['Games'],
        summary: 'Get a game by slug or id',
        description: '`:slug` is the game\'s slug or its numeric id (`/v1/games/3`): a value of digits only is always read as the id.',
      },
    })
    .get('/v1/games/:slug/sets', ({ request, params, query }) => {
      const page = toPage(query)
      return reads.json(request, `sets:${params.slug}:${page.page}:${page.perPage}`, () => listGameSets(deps.db, params.slug, page))
    }, {
      params: GameSlugParams,
      query: PaginationQuery,
      response: {
        200: Type.Object({ data: Type.Array(Type.Ref('SetDetail')), meta: PageMeta }),
        400: 'Error',
        404: 'Error',
      },
      detail: {
        tags: ['Games'],
        summary: "List a game's sets",
        description:
          "Newest release first. `:slug` is the game's slug or its numeric id, as for the game itself. Each set carries the " +
          "fields of a set in a list and its game's `game_id`, `game_name` and `game_slug`.",
      },
    })
    .get('/v1/sets', ({ query }) => listSets(deps.db, query.game, toPage(query)), {
      apiKey: { needs: 'catalog' },
      query: SetsQuery,
      response: { 200: withRateLimit(Type.Object({ data: Type.Array(Type.Ref('SetDetail')), meta: PageMeta })), ...NOT_FOUND_ERRORS },
      detail: { tags: ['Sets'], summary: 'List sets', description: 'Every set, or one game\'s with `game`; newest release first. An unknown game slug is a 404.' },
    })
    .get('/v1/sets/:id', ({ params }) => getSet(deps.db, params.id), {
      apiKey: { needs: 'catalog' },
      params: IdParams,
      response: { 200: withRateLimit(Type.Object({ data: Type.Ref('SetDetail') })), ...NOT_FOUND_ERRORS },
      detail: { tags: ['Sets'], summary: 'Get a set', description: 'The set with its game (`game_id`, `game_name`, `game_slug`). An unknown id is a 404.' },
    })
    .get('/v1/sets/:id/cards', ({ params, query }) => listSetCards(deps.db, params.id, { type: query.type, sort: query.sort ?? 'number' }, toPage(query)), {
      apiKey: { needs: 'catalog' },
      params: IdParams,
      query: SetCardsQuery,
      response: { 200: withRateLimit(Type.Object({ data: Type.Array(Type.Ref('CardWithPrice')), meta: PageMeta })), ...NOT_FOUND_ERRORS },
      detail: {
        tags: ['Sets'],
        summary: "List a set's cards with prices",
        description: "Card-with-price rows: each card's summary and its primary printing's price (Normal when it has one). Cards without a price sort last by price.",
      },
    })
    .get('/v1/sets/:id/prices', ({ params, query }) => listSetPrices(deps.db, params.id, query.type), {
      apiKey: { needs: 'set_prices' },
      params: IdParams,
      query: SetPricesQuery,
      response: {
        200: withRateLimit(Type.Object({ data: Type.Array(Type.Ref('PriceRow')), meta: Type.Object({ total: Type.Integer({ minimum: 0 }) }) })),
        ...NOT_FOUND_ERRORS,
      },
      detail: { tags: ['Sets'], summary: "Every price of a set's cards (Pro)", description: 'One row per card and printing, in card number order: every row of the set in one answer (no paging; `meta.total` counts them).' },
    })
    .get('/v1/cards/:id', ({ params }) => getCard(deps.db, params.id), {
      apiKey: { needs: 'catalog' },
      params: IdParams,
      response: { 200: withRateLimit(Type.Object({ data: Type.Ref('Card') })), ...NOT_FOUND_ERRORS },
      detail: {
        tags: ['Cards'],
        summary: 'Get a card or sealed product',
        description:
          'Every field of the card, its set and its game. `custom_attributes` depend on the game (creature-battle games carry ' +
          '`hp`, `stage`, `energyType` …); sealed products have `product_type` `Sealed Products`. Prices: `/v1/cards/{id}/prices`.',
      },
    })
    .get('/v1/cards/marketplace/:marketplaceId', ({ params }) => getCardByMarketplaceId(deps.db, params.marketplaceId), {
      apiKey: { needs: 'catalog' },
      params: MarketplaceIdParams,
      response: { 200: withRateLimit(Type.Object({ data: MarketplaceCard })), ...NOT_FOUND_ERRORS },
      detail: {
        tags: ['Cards'],
        summary: "Look a card up by the marketplace's product id",
        description:
          'The card with every field of `GET /v1/cards/:id` and its `prices`, one per printing. These price elements omit ' +
          '`card_id`, `price_change_7d` and `price_change_30d`: ask `GET /v1/cards/:id/prices` for those.',
      },
    })
    .get(
      '/v1/cards/:id/prices',
      // Destructured, not `(context) =>`: Elysia reads what a handler uses to skip the rest
      // (a handler taking the whole context had every request's cookies parsed, 16% of its CPU).
      async ({ request, set, params, query, apiKey }) => {
        const snapshot = await snapshots.get()
        // docs/decisions.md "Sales in Pro card prices": the answer (and its ETag) depends on the tier's variant.
        const variant = cardPricesVariant(apiKey.policy)
        const body = () => cardPrices(auth.db, snapshot, params.id, query.printing, variant)
        return snapshotResponse({ request, set }, snapshot, body, { msgpack: false, remember: true, variant })
      },
      {
        apiKey: CARD_PRICES_KEY,
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
    )
}
