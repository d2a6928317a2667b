import { type Static, Type } from '@sinclair/typebox'
import { Elysia } from 'elysia'
import { LRUCache } from 'lru-cache'
import type { Clock } from '../../shared/clock'
import { type EarlyAnswer, type HotRoute, type HotRoutes, pathAndQueryOf } from '../../shared/hot-routes'
import { JSON_CONTENT_TYPE } from '../../shared/http'
import { LiteralUnion, PageMeta, PaginationQuery, QueryParams, toPage } from '../../shared/model'
import { models } from '../../shared/models-plugin'
import { createReadCache } from '../../shared/read-cache'
import { withBodyLength } from '../../shared/request-id'
import { authGuard, NOT_FOUND_ERRORS, withRateLimit } from '../auth/guard'
import type { AuthRuntime } from '../auth/runtime'
import {
  Card,
  CardWithPrice,
  Game,
  GameSlugParams,
  IdParams,
  MarketplaceCard,
  MarketplaceIdParams,
  PRODUCT_TYPES,
  Price,
  PriceRow,
  SET_CARD_SORTS,
  SetDetail,
  SetSummary,
} from './model'
import { getCard, getCardByMarketplaceId, getGame, getSet, listGameSets, listGames, listSetCards, listSetPrices, listSets } from './service'

const TypeFilter = LiteralUnion(PRODUCT_TYPES, { description: 'Cards or sealed products only' })
const SetsQuery = QueryParams({
  ...PaginationQuery.properties,
  game: Type.Optional(Type.String({ minLength: 1, maxLength: 100, description: 'Game slug' })),
})
const SetCardsQuery = QueryParams({
  ...PaginationQuery.properties,
  type: Type.Optional(TypeFilter),
  sort: Type.Optional(LiteralUnion(SET_CARD_SORTS, { default: 'number', description: "number (default), name, price_asc or price_desc (by the primary printing's market price)" })),
})
const SetPricesQuery = QueryParams({ type: Type.Optional(TypeFilter) })

/** Games and sets change only when a sync runs (daily); a few seconds of staleness is invisible. */
const PUBLIC_CACHE_TTL_MS = 5_000

/** Request paths and queries of open reads kept for repeats: their keys' bytes, as the bytes answered are shared. */
const OPEN_REPEATS_BYTES = 4 * 2 ** 20

const jsonResponse = (bytes: Buffer) => withBodyLength(new Response(bytes, { headers: { 'content-type': JSON_CONTENT_TYPE } }), bytes.byteLength)

/**
 * The open catalog reads (games), serialised once per read, not per request: the bytes go out as
 * they are until they expire. Loaded by what they answer (page, size, slug), so differently
 * written queries share one database read; kept too by the request's exact path and query, for
 * repeats answered before routing (`route`), never past the read's own expiry (on `clock`).
 */
export function openCatalogReads(clock: Clock, ttlMs = PUBLIC_CACHE_TTL_MS) {
  const cache = createReadCache(clock, ttlMs)
  const byPath = new LRUCache<string, { bytes: Buffer; until: number }>({ maxSize: OPEN_REPEATS_BYTES, sizeCalculation: (_, path) => path.length + 64 })
  const early: EarlyAnswer = (_request, pathAndQuery) => {
    const kept = byPath.get(pathAndQuery)
    return kept && kept.until > clock.monotonic() ? jsonResponse(kept.bytes) : undefined
  }
  async function json(request: Request, key: string, load: () => Promise<unknown>) {
    const read = await cache.get(key, async () => {
      const until = clock.monotonic() + ttlMs
      return { bytes: Buffer.from(JSON.stringify(await load())), until }
    })
    byPath.set(pathAndQueryOf(request.url), read)
    return jsonResponse(read.bytes)
  }
  return {
    json,
    /** A repeat of a read `json` answered, from its bytes until they expire. */
    early,
    /**
     * An open read as a hot route: Elysia validates and answers it first (`read` names the cached
     * read behind the validated params and query); a repeat of the exact path and query is
     * answered early from the same bytes until they expire.
     */
    route<Params, Query>(route: {
      path: string
      read: (request: { params: Params; query: Query }) => { key: string; load: () => Promise<unknown> }
      hook: Record<string, unknown>
    }): HotRoute {
      return {
        path: route.path,
        hook: route.hook,
        handler: ({ request, params, query }: { request: Request; params: Params; query: Query }) => {
          const { key, load } = route.read({ params, query })
          return json(request, key, load)
        },
        early,
      }
    },
  }
}

export type OpenCatalogReads = ReturnType<typeof openCatalogReads>

/** The catalog: games (public, no key, no quota: spec Authentication 2), sets and cards (API key). */
export function catalogRoutes(auth: AuthRuntime, reads: OpenCatalogReads, hot: HotRoutes) {
  const deps = { db: auth.db }
  const games = reads.route<unknown, Static<typeof PaginationQuery>>({
    path: '/v1/games',
    read: ({ query }) => {
      const page = toPage(query)
      return { key: `games:${page.page}:${page.perPage}`, load: () => listGames(deps.db, page) }
    },
    hook: {
      query: PaginationQuery,
      response: {
        200: Type.Object({ data: Type.Array(Type.Ref('Game')), meta: PageMeta }),
        400: 'Error',
      },
      detail: { tags: ['Games'], summary: 'List games', description: 'Every supported game, major games first.' },
    },
  })
  const game = reads.route<Static<typeof GameSlugParams>, unknown>({
    path: '/v1/games/:slug',
    read: ({ params }) => ({ key: `game:${params.slug}`, load: () => getGame(deps.db, params.slug) }),
    hook: {
      params: GameSlugParams,
      response: { 200: Type.Object({ data: Type.Ref('Game') }), 400: 'Error', 404: 'Error' },
      detail: {
        tags: ['Games'],
        summary: 'Get a game by slug or id',
        description: "`:slug` is the game's slug or its numeric id (`/v1/games/3`): a value of digits only is always read as the id.",
      },
    },
  })
  const gameSets = reads.route<Static<typeof GameSlugParams>, Static<typeof PaginationQuery>>({
    path: '/v1/games/:slug/sets',
    read: ({ params, query }) => {
      const page = toPage(query)
      return { key: `sets:${params.slug}:${page.page}:${page.perPage}`, load: () => listGameSets(deps.db, params.slug, page) }
    },
    hook: {
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
    },
  })
  const routes = new Elysia({ name: 'catalog-routes' }).use(models).use(authGuard(auth)).model({ Game, SetSummary, SetDetail, Card, Price, CardWithPrice, PriceRow })
  return hot
    .add(hot.add(hot.add(routes, games), game), gameSets)
    .get('/v1/sets', ({ query }) => listSets(deps.db, query.game, toPage(query)), {
      apiKey: { needs: 'catalog' },
      query: SetsQuery,
      response: { 200: withRateLimit(Type.Object({ data: Type.Array(Type.Ref('SetDetail')), meta: PageMeta })), ...NOT_FOUND_ERRORS },
      detail: { tags: ['Sets'], summary: 'List sets', description: "Every set, or one game's with `game`; newest release first. An unknown game slug is a 404." },
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
      detail: {
        tags: ['Sets'],
        summary: "Every price of a set's cards (Pro)",
        description: 'One row per card and printing, in card number order: every row of the set in one answer (no paging; `meta.total` counts them).',
      },
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
}
