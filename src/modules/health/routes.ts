import { Type } from '@sinclair/typebox'
import { sql } from 'drizzle-orm'
import { Elysia } from 'elysia'
import type { Deps } from '../../deps'
import { isCatalogEmpty } from '../ingest/service'

const Check = Type.Union([Type.Literal('ok'), Type.Literal('empty'), Type.Literal('error'), Type.Literal('not_configured')])

const Readiness = Type.Object({
  status: Type.Union([Type.Literal('ready'), Type.Literal('not_ready')]),
  checks: Type.Object({ database: Check, data: Check, redis: Check }),
})

/** The check's verdict, or 'error' when it throws (an unreachable dependency is an answer here). */
async function probe<T extends string>(check: () => Promise<T>): Promise<T | 'error'> {
  try {
    return await check()
  } catch {
    return 'error'
  }
}

/** Liveness and readiness for load balancers and orchestrators. */
export function healthRoutes(deps: Pick<Deps, 'db' | 'redis'>) {
  return new Elysia({ name: 'health-routes' })
    .get('/health', () => ({ status: 'ok' as const }), {
      response: { 200: Type.Object({ status: Type.Literal('ok') }) },
      detail: { tags: ['Health'], summary: 'Liveness: the process answers' },
    })
    .get(
      '/ready',
      async ({ set }) => {
        const data = await probe(async () => {
          await deps.db.execute(sql`select 1`)
          return (await isCatalogEmpty(deps.db)) ? ('empty' as const) : ('ok' as const)
        })
        const database = data !== 'error'
        const redis = deps.redis ? await probe(async () => (await deps.redis!.ping(), 'ok' as const)) : ('not_configured' as const)
        const ready = database && data === 'ok' && redis !== 'error'
        set.status = ready ? 200 : 503
        return {
          status: ready ? ('ready' as const) : ('not_ready' as const),
          checks: { database: database ? ('ok' as const) : ('error' as const), data, redis },
        }
      },
      {
        response: { 200: Readiness, 503: Readiness },
        detail: {
          tags: ['Health'],
          summary: 'Readiness: database reachable, catalog loaded, Redis reachable when configured',
        },
      },
    )
}
