import { declaresBody } from './request-rules'

/** The path with its query of a request URL (`http://host/v1/games?page=2` → `/v1/games?page=2`). */
export const pathAndQueryOf = (url: string) => url.slice(url.indexOf('/', url.indexOf('//') + 2))

/**
 * Answers a GET that asks, byte for byte, what an earlier GET asked and was answered: from what
 * that answer kept, or undefined to let the app answer it. Called before the app routes, parses or
 * validates anything, so it answers only what it can prove the app would answer the same way: the
 * kept answer stands for the exact path and query that the app validated once, and any check it
 * cannot make at once (a key this node has not seen, a charge that needs Redis) means undefined,
 * with nothing charged or counted.
 */
export type EarlyAnswer = (request: Request, pathAndQuery: string) => Response | undefined

export type Handler = (request: Request) => Response | Promise<Response>

/**
 * A GET route declared once for both routers: Elysia's route (`handler` with `hook`: schemas,
 * guard, OpenAPI detail), and its `early` answer to repeats in Bun's router, before Elysia.
 * Why: Elysia's per-request lifecycle (context, hooks, parsing, validation, the guard's promises)
 * costs more than the answer on the hottest reads (docs/adr/0081-repeats-answered-before-elysia.md).
 */
export interface HotRoute {
  path: string
  /** Typed by the route's builder (its context is Elysia's, which Elysia's types cannot follow through a helper). */
  handler: (context: never) => unknown
  hook: Record<string, unknown>
  early: EarlyAnswer
}

/** What registers GET routes, as an Elysia instance does. */
interface Routes {
  get(path: string, handler: HotRoute['handler'], hook: Record<string, unknown>): unknown
}

/**
 * The app's hot routes: `add` registers a route on an Elysia instance and its early answer here,
 * at once, so the two cannot drift; `serveRoutes` makes them Bun.serve `routes`.
 */
export function hotRoutes() {
  const early = new Map<string, EarlyAnswer>()
  return {
    add<App>(app: App, route: HotRoute): App {
      if (early.has(route.path)) throw new Error(`hot route ${route.path} declared twice`)
      early.set(route.path, route.early)
      ;(app as Routes).get(route.path, route.handler, route.hook)
      return app
    },
    /** Bun.serve `routes`: each hot path's GET answered early when it can be, else by `app`. */
    serveRoutes(app: Handler): Record<string, { GET: Handler }> {
      const routes: Record<string, { GET: Handler }> = {}
      for (const [path, answer] of early) {
        // A GET that declares a body is left to the app's request rules (413 over the size limit).
        routes[path] = { GET: (request) => (!declaresBody(request) && answer(request, pathAndQueryOf(request.url))) || app(request) }
      }
      return routes
    },
  }
}

export type HotRoutes = ReturnType<typeof hotRoutes>
