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
export type RepeatAnswer = (request: Request, pathAndQuery: string) => Response | undefined

type Handler = (request: Request) => Response | Promise<Response>

/**
 * Bun.serve `routes` (Elysia's `serve.routes`, which take a path and method from Elysia's own
 * routes) that answer repeated GETs on these paths at once, and pass every other request to the
 * app. Why: Elysia's per-request lifecycle (context, hooks, parsing, validation, the guard's
 * promises) costs more than the answer on the hottest reads (docs/decisions.md, "Hot path").
 */
export function repeatRoutes(answers: Record<string, RepeatAnswer>, app: Handler): Record<string, { GET: Handler }> {
  const routes: Record<string, { GET: Handler }> = {}
  for (const [path, answer] of Object.entries(answers)) {
    // A GET that declares a body is left to the app's request rules (413 over the size limit).
    routes[path] = { GET: (request) => (!declaresBody(request) && answer(request, pathAndQueryOf(request.url))) || app(request) }
  }
  return routes
}
