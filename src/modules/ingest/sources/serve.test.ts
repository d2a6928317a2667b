import { describe, expect, test } from 'bun:test'
import { TEST_NOW } from '../../../../test/helpers/env'
import type { MarketplaceSource } from '../source'
import { createDemoSource } from './demo'
import { marketplacePaths, serveMarketplace } from './serve'

const demo = createDemoSource({ scale: 'tiny', now: () => TEST_NOW })
const handle = serveMarketplace(demo)
const ask = async (path: string, method = 'GET') => {
  const response = await handle(new Request(`http://marketplace.test${path}`, { method }))
  return { status: response.status, type: response.headers.get('content-type'), body: (await response.json()) as any }
}

describe('the marketplace protocol', () => {
  test("each path answers the source's results as JSON", async () => {
    const [game] = await demo.listGames()
    const [set] = await demo.listSets(game!.categoryId)
    const [product] = await demo.listProducts(set!.groupId)
    const answers: [string, unknown][] = [
      [marketplacePaths.categories(), await demo.listGames()],
      [marketplacePaths.groups(game!.categoryId), await demo.listSets(game!.categoryId)],
      [marketplacePaths.products(set!.groupId), await demo.listProducts(set!.groupId)],
      [marketplacePaths.prices(set!.groupId, '2026-11-19'), await demo.listPrices(set!.groupId, '2026-11-19')],
      [marketplacePaths.sales(set!.groupId, '2026-11-19'), await demo.listSales(set!.groupId, '2026-11-19')],
      [marketplacePaths.listings(product!.productId), await demo.listListings(product!.productId)],
    ]
    for (const [path, results] of answers) {
      expect(await ask(path)).toEqual({ status: 200, type: 'application/json', body: { results } })
    }
  })

  test('malformed ids and dates are 400, other paths 404, other methods 405, all in the error shape', async () => {
    for (const path of ['/categories/abc/groups', '/groups/0/products', '/groups/-1/prices?date=2026-11-19', '/products/1.5/listings', '/groups/1234567890123456/products']) {
      const { status, body } = await ask(path)
      expect(status).toBe(400)
      expect(body.error.message).toContain('malformed id')
    }
    for (const path of ['/groups/10001/prices', '/groups/10001/sales?date=yesterday', '/groups/10001/prices?date=2026-11-19T00:00:00Z']) {
      expect(await ask(path)).toMatchObject({ status: 400, body: { error: { message: 'query parameter date must be YYYY-MM-DD' } } })
    }
    for (const path of ['/', '/categories/1', '/groups/1/cards', '/categories/']) expect((await ask(path)).status).toBe(404)
    expect((await ask('/categories', 'POST')).status).toBe(405)
    expect((await ask('/products/10001001/listings', 'DELETE')).status).toBe(405)
  })

  test("a failing source is a 500 that does not repeat the source's error", async () => {
    const failing: MarketplaceSource = {
      ...demo,
      listGames: () => Promise.reject(new Error('connect ECONNREFUSED db.internal:5432 password=hunter2')),
      listSets: () => {
        throw new Error('thrown before any promise')
      },
    }
    const serve = serveMarketplace(failing)
    for (const path of ['/categories', '/categories/1/groups']) {
      const response = await serve(new Request(`http://marketplace.test${path}`))
      expect(response.status).toBe(500)
      const text = await response.text()
      expect(JSON.parse(text)).toEqual({ error: { message: 'the marketplace source failed' } })
      expect(text).not.toContain('hunter2')
    }
  })
})
