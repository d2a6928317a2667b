import { afterAll, beforeEach, describe, expect, test } from 'bun:test'
import { sql } from 'drizzle-orm'
import { openPostgres } from '../../src/db/client'
import { TIER_POLICY } from '../../src/modules/auth/tiers'
import { printingOrder } from '../../src/modules/catalog/printings'
import { LISTING_CONDITIONS } from '../../src/modules/conditions/model'
import { createHttpSource } from '../../src/modules/ingest/sources/http'
import { systemClock } from '../../src/shared/clock'
import { startFakeMarketplace } from '../fixtures/fake-marketplace'
import { accountWithKey, testRedis, testRedisPrefix } from '../helpers/auth'
import { freshDatabase, selectRows, testClock, testLogger, tinySource } from '../helpers/db'
import { TEST_DATABASE_URL, TEST_NOW, TEST_REDIS_URL } from '../helpers/env'
import { startServer } from '../helpers/server'

// Condition prices end to end: the real app on a real port, the tiny demo marketplace behind a
// fake marketplace HTTP server (a real socket) that can fail, answer slowly or hang, and the
// configured database and quota store (PostgreSQL + Redis, or PGlite + in-process counters).

const TIMEOUT_MS = 400
const database = await freshDatabase('seeded')
const redisPrefix = testRedisPrefix()
const redis = await testRedis(redisPrefix)
const marketplace = await startFakeMarketplace({ source: tinySource() })
afterAll(() => marketplace.stop(), 30_000)
const source = createHttpSource({ url: marketplace.url, timeoutMs: TIMEOUT_MS, clock: testClock })
const server = startServer({ db: database.db, redis, logger: testLogger, source, config: { marketplaceTimeoutMs: TIMEOUT_MS } })

interface CardFixture {
  id: number
  marketplace_id: number
  kind: string
  printings: string[]
}

// Cards the demo marketplace has listings for today, in id order: each test takes its own.
const candidates = await selectRows<CardFixture>(
  database.db,
  sql`select c.id, c.marketplace_id, g.kind, array_agg(cp.printing order by cp.printing) as printings
      from cards c join games g on g.id = c.game_id join card_prices cp on cp.card_id = c.id
      where c.product_type = 'Cards' group by c.id, g.kind order by c.id`,
)
const demo = tinySource()
const listed: CardFixture[] = []
for (const card of candidates) if ((await demo.listListings(card.marketplace_id)).listings.length >= 5) listed.push(card)
let taken = 0
/** A card with listings no other test touched. */
const freshCard = () => {
  const card = listed[taken++]
  if (!card) throw new Error('the tiny catalog ran out of cards with listings')
  return card
}

const conditions = (cardId: number, key: string, query = '') => server.json(`/v1/cards/${cardId}/prices/conditions${query}`, key)
const usage = async (key: string) => (await server.json('/v1/usage', key)).body.data.account

/** Dates the card's rows `hours` back: what a day without refreshes leaves. */
async function age(cardId: number, hours = 25) {
  const then = new Date(TEST_NOW.getTime() - hours * 3_600_000).toISOString()
  await database.db.execute(sql`update condition_refreshes set refreshed_at = ${then}::timestamptz where card_id = ${cardId}`)
  await database.db.execute(sql`update condition_prices set last_updated_at = ${then}::timestamptz where card_id = ${cardId}`)
}

beforeEach(() => marketplace.setFault({ kind: 'none' }))

describe('GET /v1/cards/:id/prices/conditions', () => {
  test('a card never refreshed is refreshed live: every field, stable order, condition counts, one live refresh charged', async () => {
    const { key } = await accountWithKey(database.db, 'pro')
    const card = freshCard()
    const before = marketplace.requests()
    const answer = await conditions(card.id, key)
    expect(answer.status).toBe(200)
    expect(marketplace.requests()).toBe(before + 1)
    const { data, meta } = answer.body
    expect(meta).toMatchObject({ cached: false, stale: false, as_of: TEST_NOW.toISOString() })
    expect(meta.stale_reason).toBeUndefined()
    expect(Object.keys(meta.condition_counts).length).toBeGreaterThan(0)
    expect(data.length).toBeGreaterThan(0)

    // Every row checked against the listings the marketplace answered (the same deterministic day).
    const { listings, conditionCounts } = await demo.listListings(card.marketplace_id)
    expect(meta.condition_counts).toEqual(conditionCounts)
    for (const row of data) {
      expect(Object.keys(row).sort()).toEqual([
        'card_id',
        'condition',
        'language',
        'last_updated_at',
        'low_price',
        'lowest_with_shipping',
        'median_with_shipping',
        'printing',
        'sample_count',
      ])
      const sample = listings.filter((l) => l.printing === row.printing && l.condition === row.condition && l.language === row.language)
      const withShipping = sample.map((l) => Math.round((l.price + l.shipping) * 100) / 100).sort((a, b) => a - b)
      expect(row.card_id).toBe(card.id)
      expect(row.sample_count).toBe(sample.length)
      expect(row.low_price).toBe(Math.min(...sample.map((l) => l.price)))
      expect(row.lowest_with_shipping).toBe(withShipping[0]!)
      if (sample.length < 3) expect(row.median_with_shipping).toBeNull()
      else {
        expect(row.median_with_shipping).toBeGreaterThanOrEqual(withShipping[0]!)
        expect(row.median_with_shipping).toBeLessThanOrEqual(withShipping.at(-1)!)
      }
      expect(row.last_updated_at).toBe(TEST_NOW.toISOString())
    }
    expect(new Set(data.map((r: any) => `${r.printing}|${r.condition}|${r.language}`)).size).toBe(data.length)
    // Printing in the card's order, then the spec's condition order, then language.
    const byPrinting = printingOrder(card.kind)
    const sorted = [...data].sort(
      (a: any, b: any) =>
        byPrinting(a.printing, b.printing) || LISTING_CONDITIONS.indexOf(a.condition) - LISTING_CONDITIONS.indexOf(b.condition) || a.language.localeCompare(b.language),
    )
    expect(data).toEqual(sorted)
    expect(await usage(key)).toMatchObject({ live_refreshes_today: 1, live_refresh_limit: TIER_POLICY.pro.liveRefreshesPerDay })

    // Within 24 hours the same rows come from the catalog: no marketplace request, no live refresh.
    const again = await conditions(card.id, key)
    expect(again.body.meta).toEqual({ cached: true, stale: false, as_of: TEST_NOW.toISOString(), total: again.body.data.length })
    expect(again.body.data).toEqual(data)
    expect(marketplace.requests()).toBe(before + 1)
    expect((await usage(key)).live_refreshes_today).toBe(1)
  })

  test('the printing filter is exact; a printing the card lacks is 400 and refreshes nothing; an unknown card is 404', async () => {
    const { key } = await accountWithKey(database.db, 'pro')
    const card = freshCard()
    const before = marketplace.requests()
    const lacking = await conditions(card.id, key, '?printing=Gold')
    expect(lacking.status).toBe(400)
    expect(lacking.body.error.code).toBe('INVALID_PARAMETER')
    expect(lacking.body.error.message).toContain(card.printings[0]!)
    expect((await conditions(card.id, key, '?printing=normal')).status).toBe(card.printings.includes('normal') ? 200 : 400)
    expect((await conditions(999_999_999, key)).status).toBe(404)
    expect((await conditions(0, key)).status).toBe(400)
    expect(marketplace.requests()).toBe(before)
    expect((await usage(key)).live_refreshes_today).toBe(0)

    const all = await conditions(card.id, key)
    const printing = all.body.data[0].printing
    const one = await conditions(card.id, key, `?printing=${encodeURIComponent(printing)}`)
    expect(one.status).toBe(200)
    expect(one.body.data).toEqual(all.body.data.filter((row: any) => row.printing === printing))
  })

  test('Pro and Business only: Starter and Free keys are 403 TIER_REQUIRED, no key 401', async () => {
    const card = freshCard()
    for (const tier of ['starter', 'free'] as const) {
      const { key } = await accountWithKey(database.db, tier)
      const answer = await conditions(card.id, key)
      expect(answer.status).toBe(403)
      expect(answer.body.error.code).toBe('TIER_REQUIRED')
    }
    expect((await server.json(`/v1/cards/${card.id}/prices/conditions`)).status).toBe(401)
    const business = await accountWithKey(database.db, 'business')
    expect((await conditions(card.id, business.key)).status).toBe(200)
    expect(await usage(business.key)).toMatchObject({ live_refreshes_today: 1, live_refresh_limit: TIER_POLICY.business.liveRefreshesPerDay })
  })

  test('rows older than 24 hours trigger a live refresh; younger ones do not', async () => {
    const { key } = await accountWithKey(database.db, 'pro')
    const card = freshCard()
    await conditions(card.id, key)
    await age(card.id, 23)
    const young = await conditions(card.id, key)
    expect(young.body.meta).toMatchObject({ cached: true, stale: false })
    await age(card.id, 25)
    const before = marketplace.requests()
    const old = await conditions(card.id, key)
    expect(old.body.meta).toMatchObject({ cached: false, stale: false, as_of: TEST_NOW.toISOString() })
    expect(old.body.meta.condition_counts).toBeObject()
    expect(marketplace.requests()).toBe(before + 1)
    expect((await usage(key)).live_refreshes_today).toBe(2)
  })

  for (const fault of [
    { kind: 'status', status: 500 },
    { kind: 'malformed' },
    { kind: 'junk' },
    { kind: 'slow', delayMs: TIMEOUT_MS * 3 },
    { kind: 'hang' },
    { kind: 'reset' },
  ] as const) {
    test(`marketplace ${fault.kind}: stale rows with stale:true, or 503 UPSTREAM_UNAVAILABLE without rows; no live refresh charged`, async () => {
      const { key } = await accountWithKey(database.db, 'pro')
      const cached = freshCard()
      await conditions(cached.id, key)
      await age(cached.id)
      const cachedRows = (await selectRows<{ n: number }>(database.db, sql`select count(*)::int as n from condition_prices where card_id = ${cached.id}`))[0]!.n
      marketplace.setFault(fault)

      // A real server and socket: the answer comes after the timeout, far before a hang would end (docs/testing.md "Timing asserts").
      const started = systemClock.monotonic()
      const stale = await conditions(cached.id, key)
      expect(systemClock.monotonic() - started).toBeLessThan(TIMEOUT_MS * 10)
      expect(stale.status).toBe(200)
      expect(stale.body.meta).toEqual({
        cached: true,
        stale: true,
        stale_reason: 'upstream_unavailable',
        as_of: new Date(TEST_NOW.getTime() - 25 * 3_600_000).toISOString(),
        total: stale.body.data.length,
      })
      expect(stale.body.data).toHaveLength(cachedRows)

      const never = await conditions(freshCard().id, key)
      expect(never.status).toBe(503)
      expect(never.body.error.code).toBe('UPSTREAM_UNAVAILABLE')
      expect(never.headers.get('retry-after')).not.toBeNull()
      expect((await usage(key)).live_refreshes_today).toBe(1) // the first refresh only

      // Back: the next request refreshes and pays.
      marketplace.setFault({ kind: 'none' })
      expect((await conditions(cached.id, key)).body.meta).toMatchObject({ cached: false, stale: false })
      expect((await usage(key)).live_refreshes_today).toBe(2)
    }, 15_000)
  }

  test('the 200th live refresh of a Pro account is made, the 201st is not: stale rows, or 429 LIVE_FETCH_LIMIT without rows', async () => {
    const { key } = await accountWithKey(database.db, 'pro')
    const limit = TIER_POLICY.pro.liveRefreshesPerDay
    const repeated = freshCard()
    // 195 refreshes one after the other (one card, aged each time) ...
    for (let n = 1; n <= limit - 5; n++) {
      const answer = await conditions(repeated.id, key)
      expect(answer.body.meta.cached).toBe(false)
      await age(repeated.id)
    }
    expect((await usage(key)).live_refreshes_today).toBe(limit - 5)
    // ... then ten at once, on ten cards never refreshed: exactly the five left are made (the 196th to the 200th).
    const ten = Array.from({ length: 10 }, freshCard)
    const answers = await Promise.all(ten.map((card) => conditions(card.id, key)))
    const refreshed = answers.filter((answer) => answer.status === 200)
    const refused = answers.filter((answer) => answer.status === 429)
    expect(refreshed).toHaveLength(5)
    expect(refreshed.every((answer) => answer.body.meta.cached === false)).toBe(true)
    expect(refused).toHaveLength(5)
    for (const answer of refused) {
      expect(answer.body.error.code).toBe('LIVE_FETCH_LIMIT')
      expect(answer.body.error.message).toContain(`${limit} live refreshes`)
      expect(answer.body.error.message).toContain('midnight UTC (2026-11-21T00:00:00.000Z)')
      expect(answer.headers.get('retry-after')).toBe(String(12 * 3600))
    }
    expect(await usage(key)).toMatchObject({ live_refreshes_today: limit, live_refresh_limit: limit })
    // The 201st: the old rows, marked stale.
    const before = marketplace.requests()
    const stale = await conditions(repeated.id, key)
    expect(stale.status).toBe(200)
    expect(stale.body.meta).toMatchObject({ cached: true, stale: true, stale_reason: 'live_refresh_limit' })
    expect(stale.body.data.length).toBeGreaterThan(0)
    expect(marketplace.requests()).toBe(before)
    expect((await usage(key)).live_refreshes_today).toBe(limit)
    // Fresh rows refreshed by someone else are still served, allowance or not.
    const other = await accountWithKey(database.db, 'pro')
    await conditions(repeated.id, other.key)
    expect((await conditions(repeated.id, key)).body.meta).toMatchObject({ cached: true, stale: false })
  }, 120_000) // 200 refreshes one after the other: 24 s seen with both cores busy

  test('20 concurrent requests for a stale card: one marketplace request, one live refresh charged, the others served the refreshed rows', async () => {
    const { key } = await accountWithKey(database.db, 'pro')
    const card = freshCard()
    marketplace.setFault({ kind: 'slow', delayMs: 150 })
    const before = marketplace.requests()
    const answers = await Promise.all(Array.from({ length: 20 }, () => conditions(card.id, key)))
    expect(answers.map((answer) => answer.status)).toEqual(Array(20).fill(200))
    expect(marketplace.requests()).toBe(before + 1)
    expect(answers.filter((answer) => answer.body.meta.cached === false)).toHaveLength(1)
    const data = answers[0]!.body.data
    for (const answer of answers) expect(answer.body.data).toEqual(data)
    expect((await usage(key)).live_refreshes_today).toBe(1)
  })

  test('a card the marketplace has no listings for gets a refresh and no rows: an empty answer, cached from then on', async () => {
    const { key } = await accountWithKey(database.db, 'pro')
    const [empty] = await selectRows<{ id: number; marketplace_id: number }>(database.db, sql`select id, marketplace_id from cards order by id`).then(async (rows) => {
      for (const row of rows) if ((await demo.listListings(row.marketplace_id)).listings.length === 0) return [row]
      return []
    })
    expect(empty).toBeDefined()
    const first = await conditions(empty!.id, key)
    expect(first.body).toMatchObject({ data: [], meta: { cached: false, condition_counts: {} } })
    const [refresh] = await selectRows<{ n: number }>(database.db, sql`select count(*)::int as n from condition_refreshes where card_id = ${empty!.id}`)
    expect(refresh!.n).toBe(1)
    expect((await conditions(empty!.id, key)).body).toMatchObject({ data: [], meta: { cached: true } })
  })
})

describe('live refresh counts', () => {
  test('reach daily_usage.live_refreshes, and a quota store that lost its counters is seeded with them', async () => {
    const node = startServer({ db: database.db, redis, logger: testLogger, source, config: { marketplaceTimeoutMs: TIMEOUT_MS } })
    const { key, accountId } = await accountWithKey(database.db, 'pro')
    for (const card of [freshCard(), freshCard(), freshCard()]) expect((await node.json(`/v1/cards/${card.id}/prices/conditions`, key)).body.meta.cached).toBe(false)
    await node.stop() // writes its counters out
    const [stored] = await selectRows<{ live_refreshes: number; requests: number }>(
      database.db,
      sql`select live_refreshes, requests from daily_usage where account_id = ${accountId} and day = '2026-11-20'`,
    )
    expect(stored).toEqual({ live_refreshes: 3, requests: 3 })
    if (redis) {
      await redis.del(`quota:2026-11-20:${accountId}`) // Redis lost the day: seeded from PostgreSQL
      expect(await usage(key)).toMatchObject({ live_refreshes_today: 3 })
    }
  })
})

describe('GET /v1/bulk/conditions', () => {
  test('cached rows of many cards with name and marketplace_id, never a refresh; unknown ids and cards without rows listed', async () => {
    const { key } = await accountWithKey(database.db, 'pro')
    const [a, b, uncached] = [freshCard(), freshCard(), freshCard()]
    const single = await Promise.all([a, b].map(async (card) => (await conditions(card.id, key)).body.data))
    const before = marketplace.requests()
    const answer = await server.json(`/v1/bulk/conditions?ids=${b.id},999999999,${a.id},${uncached.id},${b.id}`, key)
    expect(answer.status).toBe(200)
    expect(marketplace.requests()).toBe(before)
    expect(answer.body.meta).toEqual({ requested: 4, found: 3, not_found: [999999999], not_cached: [uncached.id], total: answer.body.data.length })
    const [names] = await Promise.all([
      selectRows<{ id: number; name: string; marketplace_id: number }>(database.db, sql`select id, name, marketplace_id from cards where id in (${a.id}, ${b.id})`),
    ])
    const byId = new Map(names.map((row) => [row.id, row]))
    const expected = [...single[1]!, ...single[0]!].map((row: any) => ({ ...row, name: byId.get(row.card_id)!.name, marketplace_id: byId.get(row.card_id)!.marketplace_id }))
    expect(answer.body.data).toEqual(expected)
    expect(answer.body.rate_limit).toBeObject()

    // Stale rows stay as they are: bulk never refreshes.
    await age(a.id)
    const later = await server.json(`/v1/bulk/conditions?ids=${a.id}`, key)
    expect(later.body.data.every((row: any) => row.last_updated_at === new Date(TEST_NOW.getTime() - 25 * 3_600_000).toISOString())).toBe(true)
    expect(marketplace.requests()).toBe(before)
  })

  test('at most 500 ids, the bulk ids rules; Starter is 403', async () => {
    const { key } = await accountWithKey(database.db, 'pro')
    const ids = Array.from({ length: 501 }, (_, i) => i + 1).join(',')
    const tooMany = await server.json(`/v1/bulk/conditions?ids=${ids}`, key)
    expect(tooMany.status).toBe(400)
    expect(tooMany.body.error.message).toContain('500')
    expect((await server.json(`/v1/bulk/conditions?ids=${ids.split(',').slice(0, 500).join(',')}`, key)).status).toBe(200)
    for (const bad of ['', '1,,2', 'abc', '0']) expect((await server.json(`/v1/bulk/conditions?ids=${bad}`, key)).status).toBe(400)
    expect((await server.json('/v1/bulk/conditions', key)).status).toBe(400)
    const starter = await accountWithKey(database.db, 'starter')
    const refused = await server.json('/v1/bulk/conditions?ids=1', starter.key)
    expect(refused.status).toBe(403)
    expect(refused.body.error.code).toBe('TIER_REQUIRED')
  })
})

describe('across nodes', () => {
  // Two nodes: their own database pools and Redis connections, one PostgreSQL and one Redis.
  test.skipIf(!TEST_REDIS_URL || !TEST_DATABASE_URL)('20 concurrent requests spread over two nodes: one marketplace request, one live refresh charged', async () => {
    const otherDb = await openPostgres((database as { url?: string }).url!, { max: 8 })
    afterAll(() => otherDb.close(), 30_000)
    const otherRedis = await testRedis(redisPrefix)
    const other = startServer({ db: otherDb.db, redis: otherRedis, logger: testLogger, source, config: { marketplaceTimeoutMs: TIMEOUT_MS } })
    const { key } = await accountWithKey(database.db, 'pro')
    const card = freshCard()
    marketplace.setFault({ kind: 'slow', delayMs: 150 })
    const before = marketplace.requests()
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 === 0 ? server : other).json(`/v1/cards/${card.id}/prices/conditions`, key)))
    expect(answers.map((answer) => answer.status)).toEqual(Array(20).fill(200))
    expect(marketplace.requests()).toBe(before + 1)
    expect(answers.filter((answer) => answer.body.meta.cached === false)).toHaveLength(1)
    expect((await usage(key)).live_refreshes_today).toBe(1)
    expect((await other.json('/v1/usage', key)).body.data.account.live_refreshes_today).toBe(1)
  })
})
