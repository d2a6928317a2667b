import { describe, expect, test } from 'bun:test'
import { sql } from 'drizzle-orm'
import type { App } from '../../src/app'
import { HOT_CHARGES_PER_WINDOW } from '../../src/modules/auth/quota'
import { accountWithKey, testRedis } from '../helpers/auth'
import { freshDatabase, selectRows, testLogger } from '../helpers/db'
import { startServer } from '../helpers/server'
import { rawExchange } from '../property/raw-http'

// The hottest reads asked again (same path and query) are answered before Elysia routes them
// (src/shared/hot-routes.ts). Over real HTTP: a repeat must be the app's own answer with this
// request's quota, and everything the repeat path cannot decide at once must still reach the app.
// Each server counts what reaches Elysia, so a test sees which path answered.

const database = await freshDatabase('seeded')
const [{ id: cardId }] = (await selectRows<{ id: number }>(database.db, sql`select min(card_id)::int as id from card_prices`)) as [{ id: number }]

function countingServer(redis: Awaited<ReturnType<typeof testRedis>>) {
  const reachedApp: string[] = []
  const countRequests = (app: App) => app.onRequest(({ request }) => void reachedApp.push(new URL(request.url).pathname)) as unknown as App
  const server = startServer({ db: database.db, redis, logger: testLogger }, countRequests)
  return { server, reachedApp }
}

const withKey = (key: string, headers: Record<string, string> = {}) => ({ headers: { 'x-api-key': key, ...headers } })
const headersBut = (headers: Headers, ...left: string[]) => Object.fromEntries([...headers].filter(([name]) => !left.includes(name)))
const bodyBut = ({ rate_limit: _, ...rest }: Record<string, unknown>) => rest

const inProcess = countingServer(undefined)
await inProcess.server.ready()

describe('a repeated keyed snapshot read', () => {
  // The longest movers list is over the size from which a repeat is written in two parts (respond.ts).
  const paths = [`/v1/cards/${cardId}/prices`, '/v1/prices/top-movers?period=7d&limit=5', '/v1/prices/top-movers?period=30d&limit=50']
  for (const path of paths) {
    test(`${path.split('?')[0]}: the first answer again, charged, with its own rate_limit, without reaching the app`, async () => {
      const { server, reachedApp } = inProcess
      const { key } = await accountWithKey(database.db, 'pro')
      const first = await server.get(path, withKey(key))
      const firstText = await first.text()
      const firstBody = JSON.parse(firstText)
      expect(first.status).toBe(200)
      if (path.includes('limit=50')) expect(Buffer.byteLength(firstText)).toBeGreaterThan(4_096)
      const reached = reachedApp.length
      for (let i = 1; i <= 3; i++) {
        const again = await server.get(path, withKey(key))
        const body = (await again.json()) as any
        expect(again.status).toBe(200)
        // How the body is framed (a length, or chunks) may differ; what it says may not. Each request has its own id.
        const unframed = ['x-ratelimit-remaining', 'date', 'content-length', 'transfer-encoding', 'x-request-id']
        expect(headersBut(again.headers, ...unframed)).toEqual(headersBut(first.headers, ...unframed))
        expect(bodyBut(body)).toEqual(bodyBut(firstBody))
        expect(body.rate_limit).toEqual({ ...firstBody.rate_limit, daily_remaining: firstBody.rate_limit.daily_remaining - i })
        expect(again.headers.get('x-ratelimit-remaining')).toBe(String(body.rate_limit.daily_remaining))
      }
      expect(reachedApp.length).toBe(reached)
    })
  }

  test('If-None-Match with the ETag is a 304 with the quota headers, and is charged', async () => {
    const { server, reachedApp } = inProcess
    const { key } = await accountWithKey(database.db, 'pro')
    const path = `/v1/cards/${cardId}/prices`
    const first = await server.get(path, withKey(key))
    await first.arrayBuffer()
    const reached = reachedApp.length
    const notModified = await server.get(path, withKey(key, { 'if-none-match': first.headers.get('etag')! }))
    expect(notModified.status).toBe(304)
    expect(await notModified.text()).toBe('')
    expect(notModified.headers.get('etag')).toBe(first.headers.get('etag'))
    expect(Number(notModified.headers.get('x-ratelimit-remaining'))).toBe(Number(first.headers.get('x-ratelimit-remaining')) - 1)
    const stale = await server.get(path, withKey(key, { 'if-none-match': 'W/"0-other"' }))
    expect(stale.status).toBe(200)
    await stale.arrayBuffer()
    expect(reachedApp.length).toBe(reached)
  })

  test('a key first seen on a repeat, an unknown key and no key are judged by the app', async () => {
    const { server, reachedApp } = inProcess
    const path = `/v1/cards/${cardId}/prices`
    const { key } = await accountWithKey(database.db, 'pro')
    expect((await server.get(path, withKey(key))).status).toBe(200) // the first ask of this key for the path was kept by another key's
    const other = await accountWithKey(database.db, 'pro')
    const reached = reachedApp.length
    const fresh = await server.get(path, withKey(other.key))
    expect(fresh.status).toBe(200)
    expect(reachedApp.length).toBe(reached + 1) // its key was not known to this node yet
    const unknown = await server.json(path, `tcg_live_${'x'.repeat(32)}`)
    expect(unknown.status).toBe(401)
    expect(unknown.body.error.code).toBe('INVALID_API_KEY')
    const none = await server.json(path)
    expect(none.status).toBe(401)
    expect(none.body.error.code).toBe('API_KEY_REQUIRED')
  })

  test('a revoked key is refused on its next repeat', async () => {
    const { server } = inProcess
    const account = await accountWithKey(database.db, 'pro')
    const path = `/v1/cards/${cardId}/prices`
    for (let i = 0; i < 2; i++) expect((await server.get(path, withKey(account.key))).status).toBe(200)
    const revoked = await server.get(`/v1/keys/${account.publicKeyId}`, { method: 'DELETE', headers: { cookie: account.cookie } })
    expect(revoked.status).toBe(200)
    const refused = await server.json(path, account.key)
    expect(refused.status).toBe(401)
    expect(refused.body.error.code).toBe('INVALID_API_KEY')
  })

  test('over the daily quota, the repeat is the app 429 with Retry-After, and the refusal is counted', async () => {
    const { server } = inProcess
    const { key } = await accountWithKey(database.db, 'free') // 100 a day
    const path = `/v1/cards/${cardId}/prices`
    for (let i = 0; i < 100; i++) {
      const response = await server.get(path, withKey(key))
      expect(response.status).toBe(200)
      await response.arrayBuffer()
    }
    const refused = await server.json(path, key)
    expect(refused.status).toBe(429)
    expect(refused.body.error.code).toBe('RATE_LIMIT_EXCEEDED')
    expect(refused.body.rate_limit.daily_remaining).toBe(0)
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0)
    const usage = await server.json('/v1/usage', key)
    expect(usage.body.data.account).toMatchObject({ today_requests: 100, rejected_today: 1 })
  })

  test('a read handed to the app is routed by its path whatever the Host (`Host: x`, absolute form)', async () => {
    const { server } = inProcess
    const { key } = await accountWithKey(database.db, 'pro')
    const port = Number(new URL(server.base).port)
    for (const target of [`/v1/cards/${cardId}/prices?printing=Normal`, `http://x/v1/cards/${cardId}/prices`]) {
      const request = `GET ${target} HTTP/1.1\r\nHost: x\r\nX-API-Key: ${key}\r\nConnection: close\r\n\r\n`
      const outcome = await rawExchange(port, Buffer.from(request), { head: false, timeoutMs: 5_000 })
      expect(outcome.kind === 'response' && outcome.response.status).toBe(200)
    }
  })

  test('a GET declaring a body over the size limit is refused by the app (413), not answered as a repeat', async () => {
    const { server } = inProcess
    const { key } = await accountWithKey(database.db, 'pro')
    const path = `/v1/cards/${cardId}/prices`
    for (let i = 0; i < 2; i++) expect((await server.get(path, withKey(key))).status).toBe(200)
    const port = Number(new URL(server.base).port)
    const request = `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-API-Key: ${key}\r\nContent-Length: 900000000\r\n\r\n`
    const outcome = await rawExchange(port, Buffer.from(request), { head: false, timeoutMs: 5_000 })
    expect(outcome.kind).toBe('response')
    if (outcome.kind === 'response') expect(outcome.response.status).toBe(413)
  })
})

describe('a repeated open catalog read', () => {
  test('the same bytes and headers, without reaching the app', async () => {
    const { server, reachedApp } = inProcess
    for (const path of ['/v1/games?per_page=5', '/v1/games/1', '/v1/games/1/sets?page=1']) {
      const first = await server.get(path)
      const firstBytes = await first.arrayBuffer()
      expect(first.status).toBe(200)
      const reached = reachedApp.length
      const again = await server.get(path)
      expect(again.status).toBe(200)
      expect(headersBut(again.headers, 'date', 'x-request-id')).toEqual(headersBut(first.headers, 'date', 'x-request-id'))
      expect(Buffer.from(await again.arrayBuffer()).equals(Buffer.from(firstBytes))).toBe(true)
      expect(reachedApp.length).toBe(reached)
    }
  })

  test('a refusal is never kept: an unknown game stays 404 and a bad page 400', async () => {
    const { server, reachedApp } = inProcess
    for (const [path, status] of [
      ['/v1/games/no-such-game', 404],
      ['/v1/games?per_page=0', 400],
    ] as const) {
      for (let i = 0; i < 2; i++) {
        const reached = reachedApp.length
        const response = await server.json(path)
        expect(response.status).toBe(status)
        expect(reachedApp.length).toBe(reached + 1)
      }
    }
  })
})

// With Redis a charge is answered at once only from a quota lease: the first charges go to Redis
// through the app, and once the account is hot its repeats are answered before it.
const redis = await testRedis()
describe.skipIf(!redis)('a repeated read with quotas in Redis', () => {
  test('once the account holds a lease, repeats skip the app; every request is counted exactly once', async () => {
    const { server, reachedApp } = countingServer(redis)
    await server.ready()
    const { key } = await accountWithKey(database.db, 'pro')
    const path = `/v1/cards/${cardId}/prices`
    const requests = 4 * HOT_CHARGES_PER_WINDOW
    const remaining: number[] = []
    const reached = reachedApp.length
    for (let i = 0; i < requests; i++) {
      const response = await server.json(path, key)
      expect(response.status).toBe(200)
      remaining.push(response.body.rate_limit.daily_remaining)
    }
    expect(remaining).toEqual(remaining.map((_, i) => remaining[0]! - i))
    expect(reachedApp.length - reached).toBeLessThan(requests / 2)
    const usage = await server.json('/v1/usage', key)
    expect(usage.body.data.account.today_requests).toBe(requests)
    await server.stop()
  })
})
