import { afterAll, describe, expect, test } from 'bun:test'
import { sql } from 'drizzle-orm'
import Redis from 'ioredis'
import { openPostgres } from '../../src/db/client'
import { redisOptions } from '../../src/deps'
import { redisQuotaStore } from '../../src/modules/auth/quota'
import { findDailyUsage } from '../../src/modules/auth/repo'
import { usageRecorder } from '../../src/modules/auth/usage-recorder'
import { utcDate } from '../../src/shared/clock'
import { accountWithKey, manualClock, testRedis, testRedisPrefix } from '../helpers/auth'
import { fakeClock } from '../helpers/clock'
import { freshDatabase, selectRows, testLogger } from '../helpers/db'
import { TEST_DATABASE_URL, TEST_NOW, TEST_REDIS_URL } from '../helpers/env'
import { eventually } from '../helpers/eventually'
import { withProbes } from '../helpers/probes'
import { freePort, spawnRedisServer } from '../helpers/redis-server'
import { startServer } from '../helpers/server'
import { startTcpProxy } from '../helpers/tcp-proxy'

// Quotas survive Redis losing its data. A private redis-server that keeps nothing on
// disk is killed and started again empty mid-day; the day's counts come back from PostgreSQL's
// daily_usage (and the node's unwritten counts) before any request is admitted. Real HTTP, real
// PostgreSQL; outages of PostgreSQL go through a TCP proxy the test controls, never the shared server.
const runnable = Boolean(TEST_DATABASE_URL && TEST_REDIS_URL && Bun.which('redis-server'))

const DAY = utcDate(TEST_NOW)
const FREE_QUOTA = 100

/** A private redis-server with no persistence: a restart starts it empty, like the machine's own Redis. */
async function privateRedis() {
  const port = await freePort()
  let server: ReturnType<typeof Bun.spawn> | undefined
  const clients: Redis[] = []
  async function start() {
    server = await spawnRedisServer(port, ['--save', '', '--appendonly', 'no'])
  }
  async function kill() {
    server?.kill('SIGKILL')
    await server?.exited
  }
  afterAll(async () => {
    for (const client of clients) client.disconnect()
    await kill()
  }, 30_000)
  await start()
  const prefix = testRedisPrefix()
  return {
    prefix,
    /** A service's connection, as src/deps.ts makes it. */
    async client() {
      const client = new Redis(`redis://127.0.0.1:${port}`, redisOptions(prefix))
      client.on('error', () => {})
      await client.connect()
      clients.push(client)
      return client
    },
    kill,
    /** Killed (if it runs) and started again with nothing in it; resolves once `clients` are connected again. */
    async restartEmpty() {
      await kill()
      await start()
      await Promise.all(clients.map((client) => (client.status === 'ready' ? undefined : new Promise((resolve) => client.once('ready', resolve)))))
      const admin = new Redis({ port, host: '127.0.0.1' })
      expect(await admin.dbsize()).toBe(0)
      admin.disconnect()
    },
    async quotaHash(accountId: number, day = DAY) {
      const admin = new Redis({ port, host: '127.0.0.1', keyPrefix: prefix })
      try {
        return await admin.hgetall(`quota:${day}:${accountId}`)
      } finally {
        admin.disconnect()
      }
    },
    async ttl(accountId: number) {
      const admin = new Redis({ port, host: '127.0.0.1', keyPrefix: prefix })
      try {
        return await admin.ttl(`quota:${DAY}:${accountId}`)
      } finally {
        admin.disconnect()
      }
    },
  }
}

type Server = ReturnType<typeof startServer>
const statusOf = async (server: Server, key: string) => (await server.get('/probe/catalog', { headers: { 'x-api-key': key } })).status
const usageOf = async (server: Server, key: string) => (await server.json('/v1/usage', key)).body.data.account

describe.skipIf(!runnable)('quotas survive Redis losing its data', async () => {
  const database = runnable ? await freshDatabase('empty') : undefined
  const db = database?.db!

  /** Until the account's daily_usage row says `used` (the recorder writes every 5 s). */
  const flushed = (accountId: number, used: number, day = DAY) =>
    eventually(async () => (await findDailyUsage(db, accountId, day)).requests >= used, {
      timeout: 20_000,
      interval: 100,
      what: `daily_usage at ${used} for account ${accountId}`,
    })

  test('an exhausted Free account is still refused after Redis restarts empty, and /v1/usage shows the day', async () => {
    const redis = await privateRedis()
    const server = startServer({ db, redis: await redis.client(), logger: testLogger }, withProbes)
    const { accountId, key, publicKeyId } = await accountWithKey(db, 'free')
    for (let i = 0; i < FREE_QUOTA; i++) expect(await statusOf(server, key)).toBe(200)
    for (let i = 0; i < 3; i++) expect(await statusOf(server, key)).toBe(429)
    await flushed(accountId, FREE_QUOTA)
    // Refused after the write: maybe still in this node's memory only, which the seed adds too.
    for (let i = 0; i < 2; i++) expect(await statusOf(server, key)).toBe(429)

    await redis.restartEmpty()
    // The free read seeds the day from PostgreSQL before it answers.
    expect(await usageOf(server, key)).toMatchObject({ today_requests: 100, daily_remaining: 0, rejected_today: 5 })
    const refused = await server.get('/probe/catalog', { headers: { 'x-api-key': key } })
    expect(refused.status).toBe(429)
    expect(((await refused.json()) as any).error.code).toBe('RATE_LIMIT_EXCEEDED')
    expect(refused.headers.get('x-ratelimit-remaining')).toBe('0')
    expect(await usageOf(server, key)).toMatchObject({ today_requests: 100, daily_remaining: 0, rejected_today: 6 })
    // Seeded once, with the day's expiry; per-key counts start again (daily_usage has none per key).
    expect(await redis.quotaHash(accountId)).toEqual({ used: '100', rejected: '6' })
    expect(await redis.ttl(accountId)).toBeGreaterThan(12 * 3600) // noon: the rest of the day and the retention margin
    expect((await server.json('/v1/usage', key)).body.data.keys).toMatchObject([{ id: publicKeyId, requests_today: 0 }])
  }, 60_000)

  test('requests refused on local counters while Redis is down are handed back without starting the day over', async () => {
    const redis = await privateRedis()
    const server = startServer({ db, redis: await redis.client(), logger: testLogger }, withProbes)
    const { accountId, key } = await accountWithKey(db, 'free')
    for (let i = 0; i < FREE_QUOTA; i++) expect(await statusOf(server, key)).toBe(200)
    await flushed(accountId, FREE_QUOTA)

    await redis.kill()
    expect(await statusOf(server, key)).toBe(429) // degraded: counted on from the last `used` Redis gave
    await redis.restartEmpty()
    // The once-a-second probe finds Redis back and hands the refusal over.
    await eventually(async () => (await server.json('/ready')).body.checks?.quota === 'shared', { what: 'the quota shared again' })
    // The hand-over found no hash to add its one refusal to: the day comes back from PostgreSQL.
    expect(await statusOf(server, key)).toBe(429)
    expect(await usageOf(server, key)).toMatchObject({ today_requests: 100, rejected_today: 2 })
  }, 60_000)

  test('right after an empty restart, concurrent requests on two nodes admit exactly what is left of the quota', async () => {
    const redis = await privateRedis()
    const first = startServer({ db, redis: await redis.client(), logger: testLogger }, withProbes)
    const { accountId, key } = await accountWithKey(db, 'free')
    for (let i = 0; i < 70; i++) expect(await statusOf(first, key)).toBe(200)
    await first.stop() // a node leaving writes its counts out
    expect((await findDailyUsage(db, accountId, DAY)).requests).toBe(70)

    const [a, b] = [
      startServer({ db, redis: await redis.client(), logger: testLogger }, withProbes),
      startServer({ db, redis: await redis.client(), logger: testLogger }, withProbes),
    ]
    // Both nodes know the key already: the burst below goes straight to the quota.
    expect(await usageOf(a, key)).toMatchObject({ today_requests: 70 })
    expect(await usageOf(b, key)).toMatchObject({ today_requests: 70 })
    await redis.restartEmpty()

    const statuses = await Promise.all(Array.from({ length: 120 }, (_, i) => statusOf(i % 2 ? a : b, key)))
    expect(statuses.filter((status) => status === 200)).toHaveLength(30)
    expect(statuses.filter((status) => status === 429)).toHaveLength(90)
    expect(await redis.quotaHash(accountId)).toMatchObject({ used: '100', rejected: '90' })
    for (const server of [a, b]) expect(await usageOf(server, key)).toMatchObject({ today_requests: 100, rejected_today: 90 })
  }, 60_000)

  test('a seed that arrives after another node seeded and charged changes nothing: no charge is lost', async () => {
    const prefix = testRedisPrefix()
    const [redisA, redisB] = [(await testRedis(prefix))!, (await testRedis(prefix))!]
    const { accountId, keyId } = await accountWithKey(db, 'free')
    await db.execute(sql`insert into daily_usage (account_id, day, requests) values (${accountId}, ${DAY}, 70)`)
    // No timer of the recorder's or the stores' matters here: a clock that never moves.
    const clock = fakeClock()
    const recorder = usageRecorder(db, testLogger, clock)
    // Node B read PostgreSQL at the same time as node A, but its seed reaches Redis only after A's charges.
    const late = Promise.withResolvers<void>()
    const a = redisQuotaStore(redisA, clock, testLogger, recorder.dayTotals)
    const b = redisQuotaStore(redisB, clock, testLogger, async (...args: Parameters<typeof recorder.dayTotals>) => {
      const totals = await recorder.dayTotals(...args)
      await late.promise
      return totals
    })
    try {
      const fromB = b.charge({ accountId, keyId, cost: 1, limit: FREE_QUOTA, now: TEST_NOW })
      const fromA = []
      for (let i = 0; i < 10; i++) fromA.push(await a.charge({ accountId, keyId, cost: 1, limit: FREE_QUOTA, now: TEST_NOW }))
      expect(fromA.map((r) => r.used)).toEqual(Array.from({ length: 10 }, (_, i) => 71 + i))
      late.resolve()
      expect(await fromB).toEqual({ admitted: true, used: 81 })
      expect(await redisA.hgetall(`quota:${DAY}:${accountId}`)).toEqual({ used: '81', [`k:${keyId}`]: '11' })
    } finally {
      await Promise.all([a.close(), b.close(), recorder.close()])
    }
  })

  test('a day started while PostgreSQL is away is counted provisionally, then raised to what PostgreSQL says once it answers', async () => {
    const proxy = await startTcpProxy({ host: new URL(TEST_DATABASE_URL!).hostname, port: Number(new URL(TEST_DATABASE_URL!).port || 5432) })
    const viaProxy = await openPostgres(proxy.via(database!.url!), { max: 4, connectTimeoutSeconds: 1 })
    afterAll(async () => {
      await viaProxy.close()
      await proxy.close()
    }, 30_000)
    const redis = await privateRedis()
    const clock = manualClock(new Date(`${DAY}T23:59:00.000Z`))
    const server = startServer({ db: viaProxy.db, redis: await redis.client(), logger: testLogger, clock }, withProbes)
    const { accountId, key, keyId } = await accountWithKey(db, 'free')
    expect(await statusOf(server, key)).toBe(200) // the key is known to the node from here
    // Another node counted 90 of the next day and wrote them out; this node's Redis has none of it.
    const nextDay = '2026-11-21'
    await db.execute(sql`insert into daily_usage (account_id, day, requests) values (${accountId}, ${nextDay}, 90)`)

    await proxy.refuse()
    proxy.cut()
    clock.set(`${nextDay}T00:00:01.000Z`)
    // PostgreSQL cannot say what the day holds: admitted on the Redis count, marked provisional.
    for (let i = 0; i < 3; i++) expect(await statusOf(server, key)).toBe(200)
    expect(await redis.quotaHash(accountId, nextDay)).toEqual({ used: '3', unseeded: '1', [`k:${keyId}`]: '3' })

    await proxy.resume()
    // Free reads of the day ask for it too: the node asks PostgreSQL again every half second, and
    // once it answers the provisional hash is raised to its 90 and this node's 3.
    const seeded = await eventually(
      async () => {
        expect((await server.json('/v1/usage', key)).status).toBe(200)
        const hash = await redis.quotaHash(accountId, nextDay)
        return hash.unseeded === undefined && hash
      },
      { what: 'the day seeded from PostgreSQL' },
    )
    expect(Number(seeded.used)).toBe(93)
    // What is left is the 7 of the day, never the 97 a fresh count would leave.
    const statuses: number[] = []
    for (let i = 0; i < FREE_QUOTA - 90; i++) statuses.push(await statusOf(server, key))
    expect(statuses).toEqual([...Array(FREE_QUOTA - 93).fill(200), ...Array(3).fill(429)])
    expect(Number((await redis.quotaHash(accountId, nextDay)).used)).toBe(FREE_QUOTA)
  }, 60_000)

  test('the usage recorder keeps a batch PostgreSQL refused and writes it with the next one', async () => {
    const proxy = await startTcpProxy({ host: new URL(TEST_DATABASE_URL!).hostname, port: Number(new URL(TEST_DATABASE_URL!).port || 5432) })
    const viaProxy = await openPostgres(proxy.via(database!.url!), { max: 2, connectTimeoutSeconds: 1 })
    // Flushed by hand only: its 5 s timer runs on a clock that never moves.
    const recorder = usageRecorder(viaProxy.db, testLogger, fakeClock())
    try {
      const { accountId, keyId } = await accountWithKey(db, 'free')
      const at = TEST_NOW
      for (let i = 0; i < 4; i++) recorder.record({ keyId, accountId, units: 1, rejected: false, at })
      await proxy.refuse()
      proxy.cut()
      await recorder.flush() // fails: kept
      recorder.record({ keyId, accountId, units: 0, rejected: true, at })
      expect(recorder.pending(keyId).requests).toBe(5)
      // What the node knows of the day while PostgreSQL is away: its unwritten counts, flagged incomplete.
      expect(await recorder.dayTotals(accountId, DAY)).toEqual({ used: 4, rejected: 1, liveRefreshes: 0, complete: false })
      await recorder.flush() // fails again: still kept, merged
      expect(await findDailyUsage(db, accountId, DAY)).toMatchObject({ requests: 0, rejected: 0 })

      await proxy.resume()
      await recorder.flush()
      expect(await findDailyUsage(db, accountId, DAY)).toMatchObject({ requests: 4, rejected: 1 })
      const [key] = await selectRows<{ total_requests: string }>(db, sql`select total_requests from api_keys where id = ${keyId}`)
      expect(Number(key!.total_requests)).toBe(5)
      expect(recorder.pending(keyId).requests).toBe(0)
      expect(await recorder.dayTotals(accountId, DAY)).toEqual({ used: 4, rejected: 1, liveRefreshes: 0, complete: true })
    } finally {
      await recorder.close()
      await viaProxy.close()
      await proxy.close()
    }
  }, 60_000)
})
