import { Elysia } from 'elysia'
import type { Deps } from './deps'
import { catalogRoutes } from './modules/catalog/routes'
import { docsRoutes } from './modules/docs/routes'
import { healthRoutes } from './modules/health/routes'
import { errorHandler } from './shared/http'

export type AppDeps = Pick<Deps, 'db' | 'redis' | 'logger'>

/** Builds the whole HTTP app without listening, so tests can serve it on any port. */
export function createApp(deps: AppDeps) {
  const app = new Elysia()
    .use(errorHandler(deps.logger, (path) => allowedMethods(path)))
    .use(docsRoutes())
    .use(healthRoutes(deps))
    .use(catalogRoutes(deps))

  // Which methods exist for a path, so a wrong method is a 405 with Allow, not a 404.
  let routeTable: { pattern: RegExp; method: string }[] | undefined
  function allowedMethods(path: string): string[] {
    routeTable ??= app.routes.map((route) => ({
      method: route.method,
      pattern: new RegExp(`^${route.path.replace(/:[^/]+/g, '[^/]+').replace(/\*$/, '.*')}/?$`),
    }))
    return [...new Set(routeTable.filter((route) => route.pattern.test(path)).map((route) => route.method))]
  }
  return app
}

export type App = ReturnType<typeof createApp>
