import { describe, expect, test } from 'bun:test'
import { sql } from 'drizzle-orm'
import Redis from 'ioredis'
import { fakeClock } from '../../../test/helpers/clock'
import { freshDatabase, selectRows, testLogger, tinySource } from '../../../test/helpers/db'
import { TEST_NOW, TEST_REDIS_URL } from '../../../test/helpers/env'
import { eventually } from '../../../test/helpers/eventually'
import { startServer } from '../../../test/helpers/server'
import { declaredSource } from '../../../test/helpers/sources'
import { healthRoutes } from './routes'

/**
 * /ready once its database check answered within the probe's 2 s: on a loaded machine a fresh
 * database's first check can take longer, and /ready then rightly says `error`, not `empty`.
 */
async function readyOnceTheDatabaseAnswered(server: { get(path: string): Promise<Response> }) {
  return eventually(
    async () => {
      const response = await server.get('/ready')
      const body = (await response.json()) as any
      return body.checks.data === 'error' ? undefined : { status: response.status, body }
    },
    { what: "/ready's database check answering" },
  )
}

describe('health and readiness', async () => {
  const seeded = await freshDatabase('seeded')
  const empty = await freshDatabase('empty')

  test('/health answers while the process is alive', async () => {
    const server = startServer({ db: seeded.db, redis: undefined, logger: testLogger })
    const response = await server.get('/health')
    expect(response.status).toBe(200)
    expect(await response.json()).toEqual({ status: 'ok' })
  })

  test('/ready is 200 with data loaded, the price snapshot built and no Redis configured', async () => {
    const server = startServer({ db: seeded.db, redis: undefined, logger: testLogger })
    await server.ready()
    const response = await server.get('/ready')
    expect(response.status).toBe(200)
    const body = (await response.json()) as any
    expect(body).toMatchObject({ status: 'ready', checks: { database: 'ok', data: 'ok', redis: 'not_configured', quota: 'local' } })
    const [counts] = await selectRows<{ cards: number; prices: number }>(
      seeded.db,
      sql`select (select count(*)::int from cards) as cards, (select count(*)::int from card_prices) as prices`,
    )
    expect(body.snapshot).toMatchObject({ cards: counts!.cards, prices: counts!.prices, age_seconds: 0 })
    expect(body.snapshot.version).toMatch(/^[0-9a-z]+$/)
    expect(body.snapshot.built_at).toBe(TEST_NOW.toISOString())
  })

  test("/ready reports the node's memory: its RSS and the search index's size and words", async () => {
    const server = startServer({ db: seeded.db, redis: undefined, logger: testLogger })
    await server.ready()
    const body = (await (await server.get('/ready')).json()) as any
    const [words] = await selectRows<{ n: number }>(seeded.db, sql`select count(distinct w)::int as n from cards, unnest(string_to_array(clean_name, ' ')) as w where w <> ''`)
    expect(body.snapshot.search_index_words).toBe(words!.n)
    // At least the words' own characters; far below the process's resident size.
    expect(body.snapshot.search_index_bytes).toBeGreaterThan(words!.n)
    expect(Number.isInteger(body.memory.rss_mb)).toBe(true)
    expect(body.memory.rss_mb).toBeGreaterThan(0)
    expect(body.snapshot.search_index_bytes).toBeLessThan(body.memory.rss_mb * 1_048_576)
  })

  test('/ready says whether this node leads the scheduled jobs and, per tier, when its games were last synced', async () => {
    const follower = startServer({ db: seeded.db, redis: undefined, logger: testLogger })
    await follower.ready()
    const body = (await (await follower.get('/ready')).json()) as any
    // Per tier, the least recently synced game; null for a tier without games (the demo has none in 0 and 1).
    const tiers = await selectRows<{ priority: number; oldest: Date | string }>(seeded.db, sql`select priority, min(last_synced_at) as oldest from games group by priority`)
    expect(tiers.length).toBeGreaterThan(0)
    const expected: Record<string, string | null> = { tier_3: null, tier_2: null, tier_1: null, tier_0: null }
    for (const tier of tiers) expected[`tier_${tier.priority}`] = new Date(tier.oldest).toISOString()
    expect(body.jobs).toEqual({ leader: false, last_sync: expected })

    // One game of tier 3 never synced: the tier has no complete sync to show.
    await seeded.db.execute(sql`update games set last_synced_at = null where id = (select min(id) from games where priority = 3)`)
    const leader = startServer({ db: seeded.db, redis: undefined, logger: testLogger, isLeader: () => true })
    await leader.ready()
    const led = (await (await leader.get('/ready')).json()) as any
    expect(led.jobs).toEqual({ leader: true, last_sync: { ...expected, tier_3: null } })
    await seeded.db.execute(sql`update games set last_synced_at = ${TEST_NOW.toISOString()}::timestamptz where last_synced_at is null`)
  })

  test('/ready names the marketplace source and what it provides: the demo source, everything', async () => {
    const server = startServer({ db: seeded.db, redis: undefined, logger: testLogger })
    await server.ready()
    const body = (await (await server.get('/ready')).json()) as any
    expect(body.source).toEqual({ name: 'demo', capabilities: { listings: true, sales: true, past_prices: true } })
  })

  test('/ready says what a source lacks, also while not ready', async () => {
    const { source: lacking } = declaredSource('tcgcsv', { listings: false, sales: false, pastPrices: true })
    const served = startServer({ db: seeded.db, redis: undefined, logger: testLogger, source: lacking })
    await served.ready()
    expect(((await (await served.get('/ready')).json()) as any).source).toEqual({
      name: 'tcgcsv',
      capabilities: { listings: false, sales: false, past_prices: true },
    })
    const empty503 = await readyOnceTheDatabaseAnswered(startServer({ db: empty.db, redis: undefined, logger: testLogger, source: lacking }))
    expect(empty503.status).toBe(503)
    expect(empty503.body.source.capabilities.listings).toBe(false)
  })

  test('/ready is 503 while the catalog is empty', async () => {
    const { status, body } = await readyOnceTheDatabaseAnswered(startServer({ db: empty.db, redis: undefined, logger: testLogger }))
    expect(status).toBe(503)
    expect(body.checks.data).toBe('empty')
    expect(body.memory.rss_mb).toBeGreaterThan(0) // memory is reported before the node is ready too
  })

  test('/ready stays 200 but says degraded when a configured Redis is unreachable', async () => {
    const dead = new Redis('redis://127.0.0.1:1', { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null })
    dead.on('error', () => {})
    const server = startServer({ db: seeded.db, redis: dead, logger: testLogger })
    await server.ready()
    const response = await server.get('/ready')
    expect(response.status).toBe(200)
    const body = (await response.json()) as any
    expect(body.status).toBe('degraded')
    expect(body.checks.redis).toBe('error')
    dead.disconnect()
  })

  test('/ready gives up on a check that hangs once 2 s of its clock have passed', async () => {
    const clock = fakeClock()
    const hanging = { ping: () => new Promise(() => {}) } as unknown as Redis
    const routes = healthRoutes({ db: seeded.db, redis: hanging, clock, source: tinySource(), quotaMode: () => 'degraded', snapshot: () => null })
    let answered = false
    const answer = routes.handle(new Request('http://localhost/ready')).then((response) => ((answered = true), response))
    // The database check has answered (its bound is gone); the Redis one waits on its own.
    await eventually(() => clock.pending() === 1, { what: 'only the Redis check waiting' })
    await clock.advance(1_999)
    expect(answered).toBe(false)
    await clock.advance(1)
    await eventually(() => answered, { what: '/ready answering' })
    const response = await answer
    expect(response.status).toBe(503)
    expect(((await response.json()) as any).checks).toEqual({ database: 'ok', data: 'ok', redis: 'error', quota: 'degraded' })
  })

  test.skipIf(!TEST_REDIS_URL)('/ready checks the real Redis (needs TEST_REDIS_URL)', async () => {
    const redis = new Redis(TEST_REDIS_URL!)
    const server = startServer({ db: seeded.db, redis, logger: testLogger })
    await server.ready()
    const response = await server.get('/ready')
    expect(response.status).toBe(200)
    expect(await response.json()).toMatchObject({ status: 'ready', checks: { redis: 'ok', quota: 'shared' } })
    redis.disconnect()
  })
})

describe('API docs', async () => {
  const { db } = await freshDatabase('seeded')
  const server = startServer({ db, redis: undefined, logger: testLogger })

  test('/openapi.json documents every public route with response schemas', async () => {
    const response = await server.get('/openapi.json')
    expect(response.status).toBe(200)
    const doc = (await response.json()) as any
    expect(doc.openapi).toMatch(/^3\./)
    for (const path of ['/v1/games', '/v1/games/{slug}', '/v1/games/{slug}/sets', '/health', '/ready']) {
      const get = doc.paths[path]?.get
      expect(get).toBeDefined()
      expect(get.responses['200'].content['application/json'].schema).toBeDefined()
    }
    expect(doc.paths['/v1/games'].get.responses['400']).toBeDefined()
    expect(doc.paths['/v1/games/{slug}'].get.responses['404']).toBeDefined()
    expect(doc.components.schemas.Game.properties.last_synced_at).toBeDefined()
    expect(doc.components.schemas.Error).toBeDefined()
    const perPage = doc.paths['/v1/games'].get.parameters.find((p: any) => p.name === 'per_page')
    // No maximum: a larger per_page is served as 100 (docs/adr/0025-compatibility-superset.md), and the description says so.
    expect(perPage.schema).toMatchObject({ minimum: 1 })
    expect(perPage.schema.maximum).toBeUndefined()
    expect(perPage.schema.description ?? perPage.description).toContain('above 100 are served as 100')
    expect(JSON.stringify(doc.paths)).not.toContain('/docs/assets')
  })

  test('/openapi.json: every operation has a JSON success schema; key and cookie routes declare their security', async () => {
    const doc = (await (await server.get('/openapi.json')).json()) as any
    const operations = Object.entries(doc.paths).flatMap(([path, methods]: [string, any]) =>
      Object.entries(methods).map(([method, operation]) => ({ path, method, operation: operation as any })),
    )
    const documented = operations.filter(({ path }) => path.startsWith('/v1/')).map(({ method, path }) => `${method} ${path}`)
    for (const expected of [
      'post /v1/auth/signup',
      'post /v1/auth/login',
      'post /v1/auth/logout',
      'get /v1/auth/me',
      'post /v1/keys',
      'get /v1/keys',
      'delete /v1/keys/{keyId}',
      'get /v1/usage',
    ]) {
      expect(documented).toContain(expected)
    }
    for (const { path, method, operation } of operations.filter(({ path }) => path !== '/docs')) {
      const success = Object.entries(operation.responses).find(([status]) => status.startsWith('2'))
      expect({ path, method, schema: Boolean((success?.[1] as any)?.content?.['application/json']?.schema) }).toEqual({ path, method, schema: true })
    }
    const usage = doc.paths['/v1/usage'].get
    expect(usage.security).toEqual([{ ApiKey: [] }])
    expect(usage.responses['200'].content['application/json'].schema.required).toContain('rate_limit')
    // Usage is open to every tier and free, answered even over quota: only a missing or bad key
    // refuses it, or a database outage before the key is known.
    expect(Object.keys(usage.responses).sort()).toEqual(['200', '401', '503'])
    expect(doc.paths['/v1/keys'].post.security).toEqual([{ Session: [] }])
    expect(doc.paths['/v1/keys'].post.requestBody.content['application/json'].schema.required).toEqual(['name'])
    // Cookie writes accept JSON only (forms are refused with 415), and the docs say so.
    expect(Object.keys(doc.paths['/v1/auth/signup'].post.requestBody.content)).toEqual(['application/json'])
    expect(doc.components.securitySchemes.Session).toMatchObject({ type: 'apiKey', in: 'cookie', name: 'session' })
    expect(doc.components.schemas.Error.properties.rate_limit).toBeDefined()
  })

  test('/docs renders Swagger UI from assets the app serves itself', async () => {
    // URLs relative to the page, so /docs and /docs/ (and a path prefix) both find them.
    const page = await (await server.get('/docs')).text()
    expect(page).toContain('src="docs/assets/swagger-ui-bundle.js"')
    expect(page).toContain('href="docs/assets/swagger-ui.css"')
    expect(page).toContain("url: 'openapi.json'")
    const slashed = await (await server.get('/docs/')).text()
    expect(slashed).toContain('src="../docs/assets/swagger-ui-bundle.js"')
    expect(slashed).toContain("url: '../openapi.json'")
    expect(page).not.toMatch(/https?:\/\//)
    const bundle = await server.get('/docs/assets/swagger-ui-bundle.js')
    expect(bundle.status).toBe(200)
    expect(bundle.headers.get('content-type')).toContain('javascript')
    expect((await bundle.text()).length).toBeGreaterThan(100_000)
    expect((await server.get('/docs/assets/swagger-ui.css')).status).toBe(200)
    expect((await server.get('/docs/assets/..%2Fpackage.json')).status).toBe(404)
    for (const name of ['constructor', '__proto__', 'toString', 'index.html']) {
      const response = await server.get(`/docs/assets/${name}`)
      expect({ name, status: response.status, body: await response.json() }).toMatchObject({ name, status: 404, body: { error: { code: 'NOT_FOUND' } } })
    }
  })
})
