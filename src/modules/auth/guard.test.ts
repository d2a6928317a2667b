import { describe, expect, test } from 'bun:test'
import { sql } from 'drizzle-orm'
import { accountWithKey, manualClock, testRedis } from '../../../test/helpers/auth'
import { freshDatabase, selectRows, testLogger } from '../../../test/helpers/db'
import { eventually } from '../../../test/helpers/eventually'
import { probeCapabilities, withProbes } from '../../../test/helpers/probes'
import { startServer } from '../../../test/helpers/server'
import { setTier } from './accounts'
import { publishAuthEvent } from './key-directory'
import type { Tier } from './tiers'

// The key guard over real HTTP: PostgreSQL (or PGlite) for keys, the test Redis (a private key
// namespace) for quotas when TEST_REDIS_URL is set, the in-process store otherwise.
const { db } = await freshDatabase('empty')
const redis = await testRedis()
const clock = manualClock()
const server = startServer({ db, redis, logger: testLogger, clock }, withProbes)

const get = (path: string, key?: string) => server.get(path, { headers: key ? { 'x-api-key': key } : {} })
const json = async (response: Response) => (await response.json()) as any

async function usage(key: string) {
  const response = await get('/v1/usage', key)
  expect(response.status).toBe(200)
  return (await json(response)).data
}

describe('key authentication', () => {
  test('a missing key is 401 API_KEY_REQUIRED, even when the parameters are also wrong', async () => {
    for (const path of ['/probe/catalog', '/probe/catalog/check?n=abc', '/v1/usage']) {
      const response = await get(path)
      expect(response.status).toBe(401)
      expect((await json(response)).error.code).toBe('API_KEY_REQUIRED')
      expect(response.headers.get('x-ratelimit-limit')).toBeNull()
    }
  })

  test('an unknown, malformed or empty key is 401 INVALID_API_KEY', async () => {
    const { key } = await accountWithKey(db)
    const unknown = key.slice(0, -1) + (key.endsWith('a') ? 'b' : 'a')
    for (const bad of [unknown, 'tcg_live_short', `${key}x`, 'not a key at all', key.replace('tcg_live_', 'tcg_test_')]) {
      const response = await get('/probe/catalog', bad)
      expect(response.status).toBe(401)
      const body = await json(response)
      expect(body.error.code).toBe('INVALID_API_KEY')
      expect(body.rate_limit).toBeUndefined()
    }
  })

  test('a revoked key is refused at once and a new key of the account works', async () => {
    const account = await accountWithKey(db)
    expect((await get('/probe/catalog', account.key)).status).toBe(200)
    const revoke = await server.get(`/v1/keys/${account.publicKeyId}`, { method: 'DELETE', headers: { cookie: account.cookie } })
    expect(revoke.status).toBe(200)
    const refused = await get('/probe/catalog', account.key)
    expect(refused.status).toBe(401)
    expect((await json(refused)).error.code).toBe('INVALID_API_KEY')
  })
})

describe('tiers', () => {
  // Written out from the spec's tier table and docs/adr/0033-tier-access.md, not derived from tiers.ts.
  const NEEDS: Record<string, { tier: Tier; label: string }> = {
    catalog: { tier: 'free', label: 'Free' },
    bulk_resolve: { tier: 'starter', label: 'Starter' },
    set_prices: { tier: 'pro', label: 'Pro' },
    condition_prices: { tier: 'pro', label: 'Pro' },
    detailed_history: { tier: 'pro', label: 'Pro' },
    bulk_read: { tier: 'pro', label: 'Pro' },
    webhooks: { tier: 'pro', label: 'Pro' },
    bulk_history: { tier: 'business', label: 'Business' },
    set_export: { tier: 'business', label: 'Business' },
    bulk_conditions: { tier: 'pro', label: 'Pro' },
  }
  const ORDER: Tier[] = ['free', 'hobby', 'starter', 'pro', 'business']

  test('the probe routes cover every capability', () => {
    expect([...probeCapabilities].sort()).toEqual(Object.keys(NEEDS).sort())
  })

  test('each tier reaches exactly the endpoints at or below it; a refusal is 403 naming the tier and costs nothing', async () => {
    for (const tier of ORDER) {
      const { key } = await accountWithKey(db, tier)
      let admitted = 0
      for (const [capability, needed] of Object.entries(NEEDS)) {
        const response = await get(`/probe/${capability}`, key)
        const allowed = ORDER.indexOf(tier) >= ORDER.indexOf(needed.tier)
        expect({ tier, capability, status: response.status }).toEqual({ tier, capability, status: allowed ? 200 : 403 })
        const body = await json(response)
        if (allowed) admitted++
        else {
          expect(body.error.code).toBe('TIER_REQUIRED')
          expect(body.error.message).toContain(`requires a ${needed.label} subscription`)
        }
        // Refusals still say where the quota stands, in the headers and the body alike.
        expect(Number(response.headers.get('x-ratelimit-remaining'))).toBe(body.rate_limit.daily_remaining)
      }
      const today = await usage(key)
      expect(today.account.today_requests).toBe(admitted)
      expect(today.account.rejected_today).toBe(0)
    }
  })

  test('daily quotas and live-refresh allowances per tier are the spec figures', async () => {
    const expected: Record<Tier, [number, number]> = {
      free: [100, 0],
      hobby: [1_000, 0],
      starter: [2_500, 0],
      pro: [10_000, 200],
      business: [50_000, 1_000],
    }
    for (const tier of ORDER) {
      const { key } = await accountWithKey(db, tier)
      const { account, subscription, keys } = await usage(key)
      expect([account.daily_limit, account.live_refresh_limit]).toEqual(expected[tier])
      expect(subscription).toEqual({ plan: tier, status: 'active' })
      expect(keys.map((k: any) => k.tier)).toEqual([tier])
    }
  })

  test('a tier change reaches the key cache through the auth event', async () => {
    const account = await accountWithKey(db, 'free')
    expect((await get('/probe/bulk_read', account.key)).status).toBe(403)
    await setTier(db, account.email, 'pro')
    if (redis) await publishAuthEvent(redis, { kind: 'account', accountId: account.accountId }, testLogger)
    else return // without Redis there is no broadcast; the cache TTL bounds it (not waited for here)
    // The event arrives on the node's subscription a moment later: asked until it is in.
    await eventually(async () => (await get('/probe/bulk_read', account.key)).status === 200, { what: 'the Pro tier on the key' })
  })
})

describe('daily quota', () => {
  test('headers and body agree and count down; the reset is the next 00:00 UTC', async () => {
    const { key } = await accountWithKey(db)
    for (const expected of [99, 98, 97]) {
      const response = await get('/probe/catalog', key)
      expect(response.status).toBe(200)
      const body = await json(response)
      expect(body.rate_limit).toEqual({ daily_limit: 100, daily_remaining: expected, daily_reset: '2026-11-21T00:00:00.000Z' })
      expect(response.headers.get('x-ratelimit-limit')).toBe('100')
      expect(response.headers.get('x-ratelimit-remaining')).toBe(String(expected))
      expect(response.headers.get('x-ratelimit-reset')).toBe('2026-11-21T00:00:00.000Z')
    }
  })

  test('errors after a valid key (400, 404, 500) cost one unit and carry rate_limit', async () => {
    const { key } = await accountWithKey(db)
    const cases: [string, number, string][] = [
      ['/probe/catalog/check?n=abc', 400, 'INVALID_PARAMETER'],
      ['/probe/catalog/check?n=11', 400, 'INVALID_PARAMETER'],
      ['/probe/catalog/missing', 404, 'NOT_FOUND'],
      ['/probe/catalog/boom', 500, 'INTERNAL_ERROR'],
    ]
    let remaining = 100
    for (const [path, status, code] of cases) {
      const response = await get(path, key)
      expect(response.status).toBe(status)
      const body = await json(response)
      expect(body.error.code).toBe(code)
      remaining--
      expect(body.rate_limit.daily_remaining).toBe(remaining)
      expect(response.headers.get('x-ratelimit-remaining')).toBe(String(remaining))
    }
  })

  test('the 101st request of a Free account is 429 with Retry-After, consumes nothing, and counts as rejected', async () => {
    const { key, accountId } = await accountWithKey(db)
    const statuses = []
    for (let i = 0; i < 100; i++) statuses.push((await get('/probe/catalog', key)).status)
    expect(statuses.every((s) => s === 200)).toBe(true)

    for (let i = 0; i < 3; i++) {
      const refused = await get('/probe/catalog', key)
      expect(refused.status).toBe(429)
      const body = await json(refused)
      expect(body.error.code).toBe('RATE_LIMIT_EXCEEDED')
      expect(body.error.message).toContain('resets at midnight UTC')
      // TEST_NOW is 12:00 UTC: twelve hours to the reset.
      expect(refused.headers.get('retry-after')).toBe(String(12 * 3600))
      expect(refused.headers.get('x-ratelimit-remaining')).toBe('0')
      expect(body.rate_limit).toEqual({ daily_limit: 100, daily_remaining: 0, daily_reset: '2026-11-21T00:00:00.000Z' })
    }
    // Usage is free and still answered over quota.
    const today = await usage(key)
    expect(today.account).toMatchObject({ today_requests: 100, daily_remaining: 0, rejected_today: 3 })
    expect(today.keys[0].requests_today).toBe(100)
    if (redis) {
      const stored = await redis.hgetall(`quota:2026-11-20:${accountId}`)
      expect(stored).toMatchObject({ used: '100', rejected: '3' })
    }
  })

  test('a busy account (served from a quota lease on Redis) still counts down by one per request and is refused at exactly its quota', async () => {
    const { key, accountId } = await accountWithKey(db)
    const burst = await Promise.all(Array.from({ length: 20 }, () => get('/probe/catalog', key)))
    expect(burst.every((r) => r.status === 200)).toBe(true)
    let leased = false
    const remaining: number[] = []
    for (;;) {
      const response = await get('/probe/catalog', key)
      if (response.status === 429) break
      remaining.push(Number(response.headers.get('x-ratelimit-remaining')))
      if (redis && !leased) leased = Object.keys(await redis.hgetall(`quota:2026-11-20:${accountId}`)).some((field) => field.startsWith('L:'))
    }
    expect(remaining).toEqual(Array.from({ length: 80 }, (_, i) => 79 - i))
    if (redis) expect(leased).toBe(true) // some of those were admitted from a lease, not charged in Redis one by one
    const today = await usage(key)
    expect(today.account).toMatchObject({ today_requests: 100, daily_remaining: 0, rejected_today: 1 })
    expect(today.keys[0].requests_today).toBe(100)
  })

  test('all keys of an account share its quota', async () => {
    const account = await accountWithKey(db)
    const second = await server.get('/v1/keys', {
      method: 'POST',
      headers: { cookie: account.cookie, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'second app' }),
    })
    const otherKey = (await json(second)).data.key
    await get('/probe/catalog', account.key)
    const response = await get('/probe/catalog', otherKey)
    expect((await json(response)).rate_limit.daily_remaining).toBe(98)
    const today = await usage(otherKey)
    expect(today.keys.map((k: any) => k.requests_today)).toEqual([1, 1])
    // A key has its account's tier: every key of the account shows the same one, as GET /v1/keys does.
    const listed = (await json(await server.get('/v1/keys', { headers: { cookie: account.cookie } }))).data
    expect(today.keys.map((k: any) => [k.id, k.tier])).toEqual(listed.map((k: any) => [k.id, k.tier]))
    expect(today.keys.map((k: any) => k.tier)).toEqual([today.subscription.plan, today.subscription.plan])
  })

  test('the counter rolls over at 00:00 UTC', async () => {
    clock.set('2026-11-20T23:59:59.000Z')
    try {
      const { key } = await accountWithKey(db)
      for (let i = 0; i < 100; i++) await get('/probe/catalog', key)
      const lastSecond = await get('/probe/catalog', key)
      expect(lastSecond.status).toBe(429)
      expect(lastSecond.headers.get('retry-after')).toBe('1')

      clock.set('2026-11-21T00:00:00.000Z')
      const newDay = await get('/probe/catalog', key)
      expect(newDay.status).toBe(200)
      expect((await json(newDay)).rate_limit).toEqual({
        daily_limit: 100,
        daily_remaining: 99,
        daily_reset: '2026-11-22T00:00:00.000Z',
      })
      expect((await usage(key)).account).toMatchObject({ today_requests: 1, rejected_today: 0 })
    } finally {
      clock.set('2026-11-20T12:00:00.000Z')
    }
  })
})

describe('per-key counters', () => {
  test('total_requests and last_used_at are batched: not written per request, listed at once, flushed on stop', async () => {
    // A server of its own, so stopping it flushes only this test's counters.
    const own = startServer({ db, redis, logger: testLogger, clock }, withProbes)
    const { key, keyId, cookie } = await accountWithKey(db)
    for (let i = 0; i < 5; i++) await own.get('/probe/catalog', { headers: { 'x-api-key': key } })
    await own.get('/probe/bulk_read', { headers: { 'x-api-key': key } }) // 403: used, not charged

    const stored = () => selectRows<any>(db, sql`select total_requests::int as n, last_used_at from api_keys where id = ${keyId}`)
    expect((await stored())[0]).toEqual({ n: 0, last_used_at: null })

    const listed = (await json(await own.get('/v1/keys', { headers: { cookie } }))).data[0]
    expect(listed.total_requests).toBe(6)
    expect(listed.last_used_at).toBe('2026-11-20T12:00:00.000Z')

    await own.stop()
    const [after] = await stored()
    expect(after.n).toBe(6)
    expect(new Date(after.last_used_at).toISOString()).toBe('2026-11-20T12:00:00.000Z')
    const daily = await selectRows(db, sql`select day::text, requests, rejected from daily_usage where account_id = (select account_id from api_keys where id = ${keyId})`)
    expect(daily).toEqual([{ day: '2026-11-20', requests: 5, rejected: 0 }])
  })
})
