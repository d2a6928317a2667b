/**
 * The marketplace's HTTP protocol, served from any MarketplaceSource: what `createHttpSource` reads.
 *
 *   GET /categories                            { results: SourceGame[] }
 *   GET /categories/:categoryId/groups         { results: SourceSet[] }
 *   GET /groups/:groupId/products              { results: SourceProduct[] }
 *   GET /groups/:groupId/prices?date=YYYY-MM-DD  { results: SourcePrice[] }
 *   GET /groups/:groupId/sales?date=YYYY-MM-DD   { results: SourceSale[] }
 *   GET /products/:productId/listings          { results: SourceListings }
 *
 * Every answer is JSON in the source's own shapes under `results`, as the public catalog mirrors wrap
 * theirs. Unknown ids answer empty results (as the source does), a malformed id or date 400, another
 * path 404, another method 405, a failing source 500; errors are `{ error: { message } }`.
 */
import type { MarketplaceSource } from '../source'

/** The protocol's paths, shared by the server and the client so the two cannot drift apart. */
export const marketplacePaths = {
  categories: () => '/categories',
  groups: (categoryId: number) => `/categories/${categoryId}/groups`,
  products: (groupId: number) => `/groups/${groupId}/products`,
  prices: (groupId: number, date: string) => `/groups/${groupId}/prices?date=${encodeURIComponent(date)}`,
  sales: (groupId: number, date: string) => `/groups/${groupId}/sales?date=${encodeURIComponent(date)}`,
  listings: (productId: number) => `/products/${productId}/listings`,
}

export type MarketplaceHandler = (request: Request) => Promise<Response>

/** Ids are positive integers that survive JSON and Number(): up to 15 digits. */
const ID = /^[1-9][0-9]{0,14}$/
const SEGMENT = '([^/]+)'
const DATE = /^\d{4}-\d{2}-\d{2}$/

type Route = (source: MarketplaceSource, id: number, date: string | null) => Promise<unknown> | null

/** Each route answers its results, or null when its query is malformed. */
const ROUTES: readonly (readonly [RegExp, Route])[] = [
  [/^\/categories$/, (source) => source.listGames()],
  [new RegExp(`^/categories/${SEGMENT}/groups$`), (source, id) => source.listSets(id)],
  [new RegExp(`^/groups/${SEGMENT}/products$`), (source, id) => source.listProducts(id)],
  [new RegExp(`^/groups/${SEGMENT}/prices$`), (source, id, date) => (date === null ? null : source.listPrices(id, date))],
  [new RegExp(`^/groups/${SEGMENT}/sales$`), (source, id, date) => (date === null ? null : source.listSales(id, date))],
  [new RegExp(`^/products/${SEGMENT}/listings$`), (source, id) => source.listListings(id)],
]

function answer(status: number, body: unknown): Response {
  return new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } })
}

function refusal(status: number, message: string): Response {
  return answer(status, { error: { message } })
}

/** A fetch-style handler serving `source` over the protocol above. */
export function serveMarketplace(source: MarketplaceSource): MarketplaceHandler {
  return async (request) => {
    const url = new URL(request.url)
    for (const [pattern, route] of ROUTES) {
      const match = pattern.exec(url.pathname)
      if (!match) continue
      if (request.method !== 'GET' && request.method !== 'HEAD') return refusal(405, `${request.method} is not allowed; use GET`)
      const id = match[1]
      if (id !== undefined && !ID.test(id)) return refusal(400, `malformed id in ${url.pathname}: expected a positive integer`)
      const rawDate = url.searchParams.get('date')
      const date = rawDate !== null && DATE.test(rawDate) ? rawDate : null
      try {
        const pending = route(source, Number(id ?? 0), date)
        if (pending === null) return refusal(400, 'query parameter date must be YYYY-MM-DD')
        return answer(200, { results: await pending })
      } catch {
        // The source's error may carry internals (hosts, queries); the caller only needs to know it failed.
        return refusal(500, 'the marketplace source failed')
      }
    }
    return refusal(404, `no route ${url.pathname}`)
  }
}
