import { Type } from '@sinclair/typebox'
import { Elysia } from 'elysia'
import type { Database } from '../../db/client'
import { PageMeta, PaginationQuery, toPage } from '../../shared/model'
import { models } from '../../shared/models-plugin'
import { createReadCache } from '../../shared/read-cache'
import { Game, GameSlugParams, SetSummary } from './model'
import { getGame, listGameSets, listGames } from './service'

/** Games and sets change only when a sync runs (daily); a few seconds of staleness is invisible. */
const PUBLIC_CACHE_TTL_MS = 5_000

/** Public catalog endpoints: no key, no quota (spec: Authentication 2). */
export function catalogRoutes(deps: { db: Database }) {
  const cache = createReadCache(PUBLIC_CACHE_TTL_MS)
  return new Elysia({ name: 'catalog-routes' })
    .use(models)
    .model({ Game, SetSummary })
    .get('/v1/games', ({ query }) => {
      const page = toPage(query)
      return cache.get(`games:${page.page}:${page.perPage}`, () => listGames(deps.db, page))
    }, {
      query: PaginationQuery,
      response: {
        200: Type.Object({ data: Type.Array(Type.Ref('Game')), meta: PageMeta }),
        400: 'Error',
      },
      detail: { tags: ['Games'], summary: 'List games', description: 'Every supported game, major games first.' },
    })
    .get('/v1/games/:slug', ({ params }) => cache.get(`game:${params.slug}`, () => getGame(deps.db, params.slug)), {
      params: GameSlugParams,
      response: { 200: Type.Object({ data: Type.Ref('Game') }), 404: 'Error' },
      detail: { tags: ['Games'], summary: 'Get a game by slug' },
    })
    .get('/v1/games/:slug/sets', ({ params, query }) => {
      const page = toPage(query)
      return cache.get(`sets:${params.slug}:${page.page}:${page.perPage}`, () => listGameSets(deps.db, params.slug, page))
    }, {
      params: GameSlugParams,
      query: PaginationQuery,
      response: {
        200: Type.Object({ data: Type.Array(Type.Ref('SetSummary')), meta: PageMeta }),
        400: 'Error',
        404: 'Error',
      },
      detail: { tags: ['Games'], summary: "List a game's sets", description: 'Newest release first.' },
    })
}
