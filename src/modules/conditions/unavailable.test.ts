import { describe, expect, test } from 'bun:test'
import { sql } from 'drizzle-orm'
import { accountWithKey } from '../../../test/helpers/auth'
import { freshDatabase, selectRows, testClock, testLogger } from '../../../test/helpers/db'
import { startServer } from '../../../test/helpers/server'
import { declaredSource, FULL_CAPABILITIES, NO_LISTINGS } from '../../../test/helpers/sources'
import { createLogger } from '../../shared/logger'
import { recrawlConditions } from './recrawl'

// Condition prices under a source without live listings (as tcgcsv is): refused with 404
// CONDITION_PRICES_UNAVAILABLE before the key guard charges anything, the marketplace never asked.

const database = await freshDatabase('seeded')
const [card] = await selectRows<{ id: number }>(database.db, sql`select id from cards where product_type = 'Cards' order by id limit 1`)
const cardId = card!.id

describe('condition prices without live listings', () => {
  const { source, asked } = declaredSource('tcgcsv', NO_LISTINGS)
  const server = startServer({ db: database.db, redis: undefined, logger: testLogger, source })

  const expectUnavailable = async (path: string, key?: string) => {
    const { status, body, headers } = await server.json(path, key)
    expect({ path, status, code: body.error?.code }).toEqual({ path, status: 404, code: 'CONDITION_PRICES_UNAVAILABLE' })
    expect(body.error.message).toBe('Condition prices are not available: this service reads the tcgcsv marketplace source, which has no live listings')
    // Refused before the key guard: no quota headers, no rate_limit.
    expect(body.rate_limit).toBeUndefined()
    expect(headers.get('x-ratelimit-remaining')).toBeNull()
  }

  test("a card's condition prices and bulk condition prices are 404 CONDITION_PRICES_UNAVAILABLE, costing nothing", async () => {
    const pro = await accountWithKey(database.db, 'pro')
    await expectUnavailable(`/v1/cards/${cardId}/prices/conditions`, pro.key)
    await expectUnavailable(`/v1/bulk/conditions?ids=${cardId}`, pro.key)
    const usage = await server.json('/v1/usage', pro.key)
    expect(usage.body.data.account).toMatchObject({ today_requests: 0, live_refreshes_today: 0 })
    expect(asked.listings).toBe(0)
    // The rest of the API is served as usual.
    expect((await server.json(`/v1/cards/${cardId}`, pro.key)).status).toBe(200)
  })

  test('every request gets the same answer, whatever its key: a tier or a key would not bring what the source lacks', async () => {
    const free = await accountWithKey(database.db, 'free')
    await expectUnavailable(`/v1/cards/${cardId}/prices/conditions`, free.key)
    await expectUnavailable(`/v1/cards/${cardId}/prices/conditions`)
    await expectUnavailable(`/v1/bulk/conditions?ids=${cardId}`, 'tcg_live_unknownunknownunknownunknown1234')
    await expectUnavailable(`/v1/bulk/conditions?ids=not-ids`)
    expect(asked.listings).toBe(0)
  })

  test("this service's OpenAPI document gives these routes as unavailable: no key, no answer but the 404", async () => {
    const doc = (await server.json('/openapi.json')).body
    for (const path of ['/v1/cards/{id}/prices/conditions', '/v1/bulk/conditions']) {
      const operation = doc.paths[path].get
      expect(operation.summary).toEndWith(': unavailable here')
      expect(operation.description).toContain('this service reads the tcgcsv marketplace source, which has no live listings')
      expect(operation.description).toContain('**Depends on the marketplace source.**')
      expect(operation.security).toBeUndefined()
      expect(operation['x-min-tier']).toBeUndefined()
      expect(Object.keys(operation.responses)).not.toContain('200')
      expect(operation.responses['404'].description).toContain('CONDITION_PRICES_UNAVAILABLE')
    }
  })
})

describe('the same routes on a source with live listings', () => {
  const { source, asked } = declaredSource('demo', FULL_CAPABILITIES)
  const server = startServer({ db: database.db, redis: undefined, logger: testLogger, source })

  test('answer condition prices, asking the marketplace', async () => {
    const pro = await accountWithKey(database.db, 'pro')
    const { status, body } = await server.json(`/v1/cards/${cardId}/prices/conditions`, pro.key)
    expect(status).toBe(200)
    expect(body.meta.cached).toBe(false)
    expect(asked.listings).toBe(1)
    expect((await server.json(`/v1/bulk/conditions?ids=${cardId}`, pro.key)).status).toBe(200)
  })

  test('whose OpenAPI document says they depend on the source', async () => {
    const doc = (await server.json('/openapi.json')).body
    for (const path of ['/v1/cards/{id}/prices/conditions', '/v1/bulk/conditions']) {
      const operation = doc.paths[path].get
      expect(operation.description).toContain('**Depends on the marketplace source.**')
      expect(operation.description).toContain('`source.capabilities.listings`')
      expect(operation.security).toEqual([{ ApiKey: [] }])
    }
    // Bulk condition prices never answer 404 here, and the document does not say they do.
    expect(doc.paths['/v1/bulk/conditions'].get.responses['404']).toBeUndefined()
  })
})

describe('the condition re-crawl without live listings', () => {
  test('refreshes nothing, asks the marketplace nothing, and says so once in the log', async () => {
    const { source, asked } = declaredSource('tcgcsv', NO_LISTINGS)
    const lines: string[] = []
    const logger = createLogger('info', { write: (line: string) => void lines.push(line) })
    await database.db.execute(sql`delete from condition_refreshes`)
    const deps = { db: database.db, redis: undefined, source, clock: testClock, logger, config: { marketplaceTimeoutMs: 500 } }
    expect(await recrawlConditions(deps, { limit: 5 })).toEqual({ refreshed: 0, failed: 0 })
    expect(await recrawlConditions(deps, { limit: 5 })).toEqual({ refreshed: 0, failed: 0 })
    expect(asked.listings).toBe(0)
    const said = lines.map((line) => JSON.parse(line)).filter((line) => line.msg?.includes('no live listings'))
    expect(said).toHaveLength(1)
    expect(said[0]).toMatchObject({ source: 'tcgcsv' })
    const [refreshes] = await selectRows<{ n: number }>(database.db, sql`select count(*)::int as n from condition_refreshes`)
    expect(refreshes!.n).toBe(0)
  })

  test('with listings, the same run refreshes the cards never refreshed', async () => {
    const { source, asked } = declaredSource('demo', FULL_CAPABILITIES)
    await database.db.execute(sql`delete from condition_refreshes`)
    const deps = { db: database.db, redis: undefined, source, clock: testClock, logger: testLogger, config: { marketplaceTimeoutMs: 500 } }
    // One card: it is due at once, so the run never waits on the clock.
    expect(await recrawlConditions(deps, { limit: 1 })).toEqual({ refreshed: 1, failed: 0 })
    expect(asked.listings).toBe(1)
  })
})
