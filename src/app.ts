import { Elysia } from 'elysia'
import type { Deps } from './deps'
import { rateLimitOf } from './modules/auth/guard'
import { authRoutes } from './modules/auth/routes'
import { createAuthRuntime } from './modules/auth/runtime'
import { bulkRoutes } from './modules/bulk/routes'
import { catalogRoutes } from './modules/catalog/routes'
import { docsRoutes } from './modules/docs/routes'
import { healthRoutes } from './modules/health/routes'
import { historyRoutes } from './modules/history/routes'
import { pricesRoutes } from './modules/prices/routes'
import { searchRoutes } from './modules/search/routes'
import { snapshotStore } from './modules/snapshot/store'
import { registerFormats } from './shared/formats'
import { errorHandler } from './shared/http'

export type AppDeps = Pick<Deps, 'db' | 'redis' | 'logger' | 'clock'> & { config: Pick<Deps['config'], 'cookieSecure'> }

/**
 * Builds the whole HTTP app without listening, so tests can serve it on any port. The auth
 * runtime (key cache, quota store, usage batching) and the price snapshot live as long as the app:
 * stop them with `stopApp`.
 */
export function createApp(deps: AppDeps) {
  registerFormats()
  const auth = createAuthRuntime(deps)
  const snapshots = snapshotStore(deps)
  const app = new Elysia()
    .use(
      errorHandler(deps.logger, {
        allowedMethods: (path) => allowedMethods(path),
        // A refusal after a valid key (400, 404, 429, …) still tells the client where its quota stands.
        extraBody: (request) => {
          const rateLimit = rateLimitOf(request)
          return rateLimit && { rate_limit: rateLimit }
        },
      }),
    )
    .use(docsRoutes())
    .use(healthRoutes({ ...deps, quotaMode: auth.quotaMode, snapshot: snapshots.status }))
    .use(catalogRoutes(auth, snapshots))
    .use(authRoutes(auth))
    .use(historyRoutes(auth))
    .use(searchRoutes(auth))
    .use(pricesRoutes(auth, snapshots))
    .use(bulkRoutes(auth, deps.logger))

  // Which methods exist for a path, so a wrong method is a 405 with Allow, not a 404.
  let routeTable: { pattern: RegExp; method: string }[] | undefined
  function allowedMethods(path: string): string[] {
    routeTable ??= app.routes.map((route) => ({
      method: route.method,
      pattern: new RegExp(`^${route.path.replace(/:[^/]+/g, '[^/]+').replace(/\*$/, '.*')}/?$`),
    }))
    return [...new Set(routeTable.filter((route) => route.pattern.test(path)).map((route) => route.method))]
  }
  runtimes.set(app, {
    ready: async () => void (await snapshots.get()),
    async close() {
      snapshots.close()
      await auth.close()
    },
  })
  return app
}

export type App = ReturnType<typeof createApp>

const runtimes = new WeakMap<object, { ready(): Promise<void>; close(): Promise<void> }>()

/** Resolves once the app can answer everything: its first price snapshot is built. */
export async function appReady(app: App) {
  await runtimes.get(app)?.ready()
}

/** Stops listening, then writes out what the app still holds (usage counters) and closes it. */
export async function stopApp(app: App) {
  if (app.server) await app.stop()
  await runtimes.get(app)?.close()
}
