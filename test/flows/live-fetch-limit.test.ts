import { afterAll, describe, expect, test } from 'bun:test'
import { sql } from 'drizzle-orm'
import { TIER_POLICY } from '../../src/modules/auth/tiers'
import { createHttpSource } from '../../src/modules/ingest/sources/http'
import { startFakeMarketplace } from '../fixtures/fake-marketplace'
import { accountWithKey, testRedis } from '../helpers/auth'
import { freshDatabase, selectRows, testClock, testLogger, tinySource } from '../helpers/db'
import { TEST_REDIS_URL } from '../helpers/env'
import { startServer } from '../helpers/server'

// 429 LIVE_FETCH_LIMIT (condition prices of a card with no cached rows, the day's live refreshes
// used up) costs no quota unit, like every 429, and counts in rejected_today
// (docs/adr/0090-a-429-never-costs-a-unit.md). Real HTTP, the configured quota store (real Redis
// when TEST_REDIS_URL is set) and the in-process one, the demo marketplace on a real socket.
const database = await freshDatabase('seeded')
const marketplace = await startFakeMarketplace({ source: tinySource() })
afterAll(() => marketplace.stop(), 30_000)
const source = createHttpSource({ url: marketplace.url, timeoutMs: 2_000, clock: testClock })
const DAY = '2026-11-20'
const LIMIT = TIER_POLICY.pro.liveRefreshesPerDay
const QUOTA = TIER_POLICY.pro.dailyQuota

const cards = await selectRows<{ id: number }>(database.db, sql`select id from cards where product_type = 'Cards' order by id`)
let taken = 0
/** A card no test refreshed: it has no cached condition rows. */
const uncached = () => cards[taken++]!.id

/** A Pro account whose live refreshes for the day are used up (in PostgreSQL, which a missing quota counter is seeded from). */
async function exhaustedAccount() {
  const account = await accountWithKey(database.db, 'pro')
  await database.db.execute(sql`insert into daily_usage (account_id, day, requests, rejected, live_refreshes) values (${account.accountId}, ${DAY}, 0, 0, ${LIMIT})`)
  return account
}

const stores = [
  ['Redis', TEST_REDIS_URL ? await testRedis() : undefined],
  ['the in-process store', undefined],
] as const

for (const [name, redis] of stores) {
  describe(`on ${name}`, () => {
    if (name === 'Redis' && !redis) {
      test.skip('needs TEST_REDIS_URL', () => {})
      return
    }
    const server = startServer({ db: database.db, redis, logger: testLogger, source })
    const usage = async (key: string) => (await server.json('/v1/usage', key)).body.data

    test('LIVE_FETCH_LIMIT leaves X-RateLimit-Remaining and rate_limit as they were, and counts in rejected_today', async () => {
      const { key } = await exhaustedAccount()
      const asked = marketplace.requests()
      // A charged request first, so the counters are not at their start.
      expect((await server.json(`/v1/cards/${cards[0]!.id}`, key)).status).toBe(200)
      const before = await usage(key)
      expect(before.account).toMatchObject({ today_requests: 1, rejected_today: 0, live_refreshes_today: LIMIT })

      for (let attempt = 1; attempt <= 3; attempt++) {
        const refused = await server.json(`/v1/cards/${uncached()}/prices/conditions`, key)
        expect(refused.status).toBe(429)
        expect(refused.body.error.code).toBe('LIVE_FETCH_LIMIT')
        expect(refused.headers.get('x-ratelimit-remaining')).toBe(String(QUOTA - 1))
        expect(refused.headers.get('x-ratelimit-limit')).toBe(String(QUOTA))
        expect(refused.body.rate_limit).toEqual({ daily_limit: QUOTA, daily_remaining: QUOTA - 1, daily_reset: '2026-11-21T00:00:00.000Z' })
        expect(refused.headers.get('retry-after')).toBe(String(12 * 3600))
        const after = await usage(key)
        expect(after.account).toMatchObject({ today_requests: 1, daily_remaining: QUOTA - 1, rejected_today: attempt, live_refreshes_today: LIMIT })
        expect(after.keys[0].requests_today).toBe(1)
      }
      // The next charged request takes the next unit, as if the refusals had not happened.
      const next = await server.json(`/v1/cards/${cards[0]!.id}`, key)
      expect(next.headers.get('x-ratelimit-remaining')).toBe(String(QUOTA - 2))
      expect(marketplace.requests()).toBe(asked)
    })

    test('what is written to PostgreSQL agrees: the refusals are rejected, not requests, and still count on the key', async () => {
      const node = startServer({ db: database.db, redis, logger: testLogger, source })
      const { key, accountId, keyId } = await exhaustedAccount()
      expect((await node.json(`/v1/cards/${cards[0]!.id}`, key)).status).toBe(200)
      for (let i = 0; i < 2; i++) expect((await node.json(`/v1/cards/${uncached()}/prices/conditions`, key)).status).toBe(429)
      await node.stop() // writes its counters out
      const [day] = await selectRows<{ requests: number; rejected: number }>(
        database.db,
        sql`select requests, rejected from daily_usage where account_id = ${accountId} and day = ${DAY}`,
      )
      expect(day).toEqual({ requests: 1, rejected: 2 })
      const [stored] = await selectRows<{ total: number }>(database.db, sql`select total_requests::int as total from api_keys where id = ${keyId}`)
      expect(stored!.total).toBe(3)
    })

    test('a stale answer over the allowance (cached rows exist) is a 200 and costs its unit as before', async () => {
      const fresh = await accountWithKey(database.db, 'pro')
      const card = uncached()
      expect((await server.json(`/v1/cards/${card}/prices/conditions`, fresh.key)).body.meta.cached).toBe(false)
      await database.db.execute(sql`update condition_refreshes set refreshed_at = refreshed_at - interval '25 hours' where card_id = ${card}`)
      const { key } = await exhaustedAccount()
      const stale = await server.json(`/v1/cards/${card}/prices/conditions`, key)
      expect(stale.status).toBe(200)
      expect(stale.body.meta).toMatchObject({ stale: true, stale_reason: 'live_refresh_limit' })
      expect(stale.headers.get('x-ratelimit-remaining')).toBe(String(QUOTA - 1))
      expect((await usage(key)).account).toMatchObject({ today_requests: 1, rejected_today: 0 })
    })
  })
}
