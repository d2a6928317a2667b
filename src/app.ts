import { Elysia } from 'elysia'
import type { Deps } from './deps'
import { rateLimitOf, refundRefusal } from './modules/auth/guard'
import { authRoutes } from './modules/auth/routes'
import { type AuthDeps, createAuthRuntime } from './modules/auth/runtime'
import { bulkRoutes } from './modules/bulk/routes'
import { catalogRoutes, openCatalogReads } from './modules/catalog/routes'
import { conditionRoutes } from './modules/conditions/routes'
import { conditionService } from './modules/conditions/service'
import { docsRoutes } from './modules/docs/routes'
import { nodeStateReaders } from './modules/health/metrics'
import { healthRoutes } from './modules/health/routes'
import { historyRoutes } from './modules/history/routes'
import { cardPriceRoutes, pricesRoutes } from './modules/prices/routes'
import { searchRoutes } from './modules/search/routes'
import { snapshotStore } from './modules/snapshot/store'
import { webhookRoutes } from './modules/webhooks/routes'
import { NO_WEBHOOK_SETTINGS, type WebhookSettings } from './modules/webhooks/settings'
import { BUN_SERVE_OPTIONS, connectionTimeoutSeconds, ELYSIA_OPTIONS } from './shared/bun-workarounds'
import { compressionStep } from './shared/compression'
import { registerFormats } from './shared/formats'
import { type Handler, hotRoutes } from './shared/hot-routes'
import { errorHandler, lastResortErrorResponse } from './shared/http'
import { createMetrics, type Metrics } from './shared/metrics'
import { noteRoute, requestTracking, UNMATCHED_ROUTE } from './shared/request-id'
import { accessLog, allOf } from './shared/request-log'
import type { RequestRecord } from './shared/request-record'
import { requestRules } from './shared/request-rules'

export type AppDeps = Pick<Deps, 'db' | 'redis' | 'logger' | 'clock' | 'source'> & {
  config: Pick<Deps['config'], 'cookieSecure' | 'trustedProxies' | 'maxBodyBytes' | 'requestTimeoutSeconds' | 'marketplaceTimeoutMs' | 'accessLog'>
} & Pick<AuthDeps, 'keyCache'> & {
    /** Whether this node leads the scheduled jobs (`/ready` says so); absent where no scheduler runs. */
    isLeader?: () => boolean
    /** The secret box and target policy of webhook management (default: no key, public targets only). */
    webhooks?: WebhookSettings
    /** Where the app counts (default: a registry of its own, unread); index.ts also hands it every request's record. */
    metrics?: Metrics
    /** What every request passes through, in order (everyRequest), inside the request id's step; none by default. */
    requestSteps?: RequestStep[]
    /** Called once per request after its answer is ready, beside the access log and the app's metrics (tests read the records). */
    onRequestDone?: (record: RequestRecord) => void
  }

/** A step every request passes, whichever router answers it: it may answer itself or call `next`. */
export type RequestStep = (request: Request, next: Handler) => Response | Promise<Response>

/**
 * The one place every request passes, the early answers to hot repeats and Elysia alike: where
 * behaviour for all requests goes (request ids, metrics, compression). With no steps it is
 * `handler` itself, so it costs nothing.
 */
export function everyRequest(steps: readonly RequestStep[], handler: Handler): Handler {
  return steps.reduceRight<Handler>((next, step) => (request) => step(request, next), handler)
}

/**
 * Builds the whole HTTP app without listening, so tests can serve it on any port. The auth
 * runtime (key cache, quota store, usage batching) and the price snapshot live as long as the app:
 * stop them with `stopApp`.
 */
export function createApp(deps: AppDeps) {
  registerFormats()
  const metrics = deps.metrics ?? createMetrics()
  const auth = createAuthRuntime({ ...deps, metrics })
  const snapshots = snapshotStore(deps)
  metrics.readState(nodeStateReaders({ ...deps, quotaMode: auth.quotaMode, snapshot: snapshots.status }))
  const catalogReads = openCatalogReads(deps.clock)
  const hot = hotRoutes()
  const { maxBodyBytes, requestTimeoutSeconds } = deps.config
  const lastResort = lastResortErrorResponse(deps.logger)
  const app = new Elysia({
    ...ELYSIA_OPTIONS,
    // Elysia's own router answers whatever the hot routes do not, through app.fetch: without this,
    // Elysia puts its routes into Bun's router with handlers that would bypass everyRequest.
    systemRouter: false,
    // Wherever the app is served (index.ts, tests), as Bun.serve options.
    serve: {
      ...BUN_SERVE_OPTIONS,
      error: lastResort,
      // A connection silent for REQUEST_TIMEOUT_SECONDS is closed, never sooner (an answer being
      // prepared is not cut off); request-rules times a body itself.
      idleTimeout: connectionTimeoutSeconds(requestTimeoutSeconds),
      // A backstop only: request-rules refuses bodies over maxBodyBytes with the envelope first (a
      // declared length before reading, a chunked body as it is read), while Bun refuses a declared
      // length over its own limit with a bare 413 before the app sees the request.
      maxRequestBodySize: 2 * maxBodyBytes,
      // Filled below, once the routes are declared: listen reads them.
      routes: {} as Record<string, Handler | { GET: Handler }>,
    },
  })
    .use(requestRules({ maxBodyBytes, requestTimeoutSeconds }, deps.clock))
    // The route template of the request record, once Elysia has matched a route.
    .onTransform({ as: 'global' }, ({ route }) => noteRoute(route))
    .use(
      errorHandler(deps.logger, {
        allowedMethods: (path) => allowedMethods(path),
        // A refusal after a valid key (400, 404, 429, …) still tells the client where its quota stands.
        extraBody: (request) => {
          const rateLimit = rateLimitOf(request)
          return rateLimit && { rate_limit: rateLimit }
        },
        // A 429 costs nothing, even after the charge (docs/adr/0090-a-429-never-costs-a-unit.md).
        beforeAnswer: (request, error, headers) => refundRefusal(auth, request, error, headers),
      }),
    )
    .use(docsRoutes(deps))
    .use(healthRoutes({ ...deps, quotaMode: auth.quotaMode, snapshot: snapshots.status }))
    .use(catalogRoutes(auth, catalogReads, hot))
    .use(cardPriceRoutes(auth, snapshots, hot))
    .use(authRoutes(auth))
    .use(historyRoutes(auth))
    .use(searchRoutes(auth, snapshots, hot))
    .use(pricesRoutes(auth, snapshots, hot))
    .use(bulkRoutes(auth, deps.logger))
    .use(conditionRoutes(auth, conditionService({ ...deps, metrics })))
    .use(webhookRoutes(auth, deps.webhooks ?? NO_WEBHOOK_SETTINGS))

  // The hottest reads, repeated, are answered before Elysia; everything else goes through it. Both
  // pass everyRequest, the request id's step first (a hot path's template known from Bun's router).
  const access = deps.config.accessLog ? accessLog(deps.logger, deps.clock) : undefined
  const tracked = requestTracking({
    clock: deps.clock,
    done: allOf([access?.done, metrics.requestDone, deps.onRequestDone]),
    routeOf: (request) => routeOf(request),
    lastResort,
  })
  // Compression inside the tracking, so the request's record counts the bytes sent (docs/adr/0127-response-compression.md).
  const steps = [compressionStep, ...(deps.requestSteps ?? [])]
  const appFetch: Handler = (request) => app.fetch(request)
  const serveRoutes = app.config.serve!.routes as Record<string, Handler | { GET: Handler }>
  for (const [path, { GET }] of Object.entries(hot.serveRoutes(appFetch))) serveRoutes[path] = { GET: everyRequest([tracked(path), ...steps], GET) }
  serveRoutes['/*'] = everyRequest([tracked(), ...steps], appFetch)

  // Which methods exist for a path, so a wrong method is a 405 with Allow, not a 404.
  let routeTable: { pattern: RegExp; method: string; path: string }[] | undefined
  const routesOf = (path: string) => {
    routeTable ??= app.routes.map((route) => ({
      method: route.method,
      path: route.path,
      pattern: new RegExp(`^${route.path.replace(/:[^/]+/g, '[^/]+').replace(/\*$/, '.*')}/?$`),
    }))
    return routeTable.filter((route) => route.pattern.test(path))
  }
  function allowedMethods(path: string): string[] {
    return [...new Set(routesOf(path).map((route) => route.method))]
  }
  // The template of a request refused before Elysia routed it (413, 408, 415): the route it asked for, else `unmatched`.
  function routeOf(request: Request): string {
    const path = URL.parse(request.url)?.pathname
    return (path !== undefined && routesOf(path).find((route) => route.method === request.method)?.path) || UNMATCHED_ROUTE
  }
  runtimes.set(app, {
    ready: async () => void (await snapshots.get()),
    refreshSnapshot: () => snapshots.refresh(),
    async close() {
      snapshots.close()
      await auth.close()
      access?.close()
    },
  })
  return app
}

export type App = ReturnType<typeof createApp>

const runtimes = new WeakMap<object, { ready(): Promise<void>; refreshSnapshot(): Promise<unknown>; close(): Promise<void> }>()

/** Resolves once the app can answer everything: its first price snapshot is built. */
export async function appReady(app: App) {
  await runtimes.get(app)?.ready()
}

/** Rebuilds the app's price snapshot now (after a sync in this process), rather than at the next change message or poll. */
export async function refreshAppSnapshot(app: App) {
  await runtimes.get(app)?.refreshSnapshot()
}

/** Stops listening, then writes out what the app still holds (usage counters) and closes it. */
export async function stopApp(app: App) {
  if (app.server) await app.stop()
  await runtimes.get(app)?.close()
}
