import { describe, expect, test } from 'bun:test'
import { createHash } from 'node:crypto'
import Redis from 'ioredis'
import { testRedis, testRedisPrefix } from '../../../test/helpers/auth'
import { TEST_REDIS_URL } from '../../../test/helpers/env'
import { createLogger } from '../../shared/logger'
import { HOT_CHARGES_PER_WINDOW, HOT_WINDOW_MS, LEASE_FIELD_PREFIX, LEASE_LIFETIME_MS } from './quota-leases'
import { failoverQuotaStore, memoryQuotaStore, nextUtcMidnight, type QuotaStore, redisQuotaStore } from './quota'
import { API_KEY_PATTERN, newApiKey, sha256Hex } from './secrets'
import { minimumTier, resolveCredits, TIER_POLICY } from './tiers'

const NOON = new Date('2026-11-20T12:00:00.000Z')
const charge = (store: QuotaStore, accountId: number, cost = 1, limit = 100, now = NOON, keyId = 1) =>
  store.charge({ accountId, keyId, cost, limit, now })

/** N charges in flight at once against a quota of 100: exactly 100 are admitted, whatever N. */
async function exactness(store: QuotaStore, accountId: number) {
  const results = await Promise.all(Array.from({ length: 300 }, (_, i) => charge(store, accountId, 1, 100, NOON, 1 + (i % 3))))
  const admitted = results.filter((r) => r.admitted)
  expect(admitted).toHaveLength(100)
  expect(new Set(admitted.map((r) => r.used))).toEqual(new Set(Array.from({ length: 100 }, (_, i) => i + 1)))
  const counters = await store.read(accountId, NOON)
  expect(counters.used).toBe(100)
  expect(counters.rejected).toBe(200)
  expect([...counters.byKey.values()].reduce((a, b) => a + b, 0)).toBe(100)
}

// One connection per failover test: each takes its Redis away. Their keys are wiped after the file.
const outageRedis = await testRedis()
const atOnceOutageRedis = await testRedis()
const handOverRedis = await testRedis()
const leaseOutageRedis = await testRedis()

/** Redis goes away for this client: it can no longer reach it until it reconnects. */
async function cutOff(redis: Redis) {
  const ended = new Promise((resolve) => redis.once('end', resolve))
  redis.disconnect()
  await ended
}

describe('quota stores', () => {
  test('in-process: exact under concurrency, per key, by UTC day', async () => {
    const store = memoryQuotaStore()
    await exactness(store, 1)
    const next = await charge(store, 1, 1, 100, new Date('2026-11-21T00:00:00.000Z'))
    expect(next).toEqual({ admitted: true, used: 1 })
    expect((await store.read(2, NOON)).used).toBe(0)
  })

  test('in-process: a charge at once is admitted within the quota; one it would refuse is left to charge, uncounted', async () => {
    const store = memoryQuotaStore()
    const atOnce = (cost: number, keyId = 1) => store.chargeAtOnce({ accountId: 31, keyId, cost, limit: 10, now: NOON })
    expect([atOnce(4), atOnce(5, 2), atOnce(2), atOnce(1)]).toEqual([4, 9, undefined, 10])
    expect(atOnce(1)).toBeUndefined()
    expect(await store.read(31, NOON)).toEqual({ used: 10, rejected: 0, liveRefreshes: 0, byKey: new Map([[1, 5], [2, 5]]) })
    expect(await charge(store, 31, 1, 10)).toEqual({ admitted: false, used: 10 })
    expect((await store.read(31, NOON)).rejected).toBe(1)
  })

  test.skipIf(!TEST_REDIS_URL)('failover: while Redis is away a charge at once counts locally from the last value Redis gave', async () => {
    const redis = atOnceOutageRedis!
    const store = failoverQuotaStore(redis, createLogger('silent'))
    const atOnce = () => store.chargeAtOnce({ accountId: 32, keyId: 1, cost: 1, limit: 100, now: NOON })
    try {
      for (let i = 0; i < 97; i++) await charge(store, 32)
      expect(atOnce()).toBeUndefined() // no lease: Redis judges it
      await cutOff(redis)
      await charge(store, 32) // fails over: 98
      expect([atOnce(), atOnce(), atOnce()]).toEqual([99, 100, undefined])
      expect((await charge(store, 32)).admitted).toBe(false)
    } finally {
      store.close()
    }
  })

  const stores: [string, () => Promise<QuotaStore | undefined>][] = [
    ['in-process', async () => memoryQuotaStore()],
    ['Redis', async () => (TEST_REDIS_URL ? redisQuotaStore((await testRedis())!) : undefined)],
  ]
  for (const [name, makeStore] of stores) {
    test.skipIf(name === 'Redis' && !TEST_REDIS_URL)(`${name}: a charge costing more than what is left is refused, uses nothing, and the next one is judged on its own`, async () => {
      const store = (await makeStore())!
      // Issued together: on Redis they travel in one script call and are judged in order.
      const results = await Promise.all([charge(store, 11, 95), charge(store, 11, 6), charge(store, 12, 1), charge(store, 11, 5, 100, NOON, 2), charge(store, 11, 1)])
      expect(results).toEqual([
        { admitted: true, used: 95 },
        { admitted: false, used: 95 },
        { admitted: true, used: 1 },
        { admitted: true, used: 100 },
        { admitted: false, used: 100 },
      ])
      const counters = await store.read(11, NOON)
      expect(counters).toEqual({ used: 100, rejected: 2, liveRefreshes: 0, byKey: new Map([[1, 95], [2, 5]]) })
      // A first charge of the day that is refused still leaves counters that expire with the day.
      expect(await charge(store, 13, 101)).toEqual({ admitted: false, used: 0 })
      expect((await store.read(13, NOON)).rejected).toBe(1)
    })
  }

  test.skipIf(!TEST_REDIS_URL)('Redis: one atomic script, exact under concurrency, expiring after the day', async () => {
    const redis = (await testRedis())!
    const store = redisQuotaStore(redis)
    await exactness(store, 7)
    expect((await charge(store, 9, 101)).admitted).toBe(false) // a refused first charge seeds the day's hash too
    for (const accountId of [7, 9]) {
      const ttl = await redis.ttl(`quota:2026-11-20:${accountId}`)
      expect(ttl).toBeGreaterThan(12 * 3600) // noon: twelve hours left in the day, plus the retention margin
      expect(ttl).toBeLessThanOrEqual(13 * 3600)
    }
    // The script is reloaded by ioredis after a SCRIPT FLUSH (e.g. a Redis restart).
    await redis.script('FLUSH')
    expect((await charge(store, 8)).admitted).toBe(true)
  })

  test.skipIf(!TEST_REDIS_URL)('failover: counting continues locally from the last value Redis gave, then hands back', async () => {
    const redis = outageRedis!
    const logged: string[] = []
    const logger = createLogger('info', { write: (line: string) => void logged.push(line) })
    const store = failoverQuotaStore(redis, logger)
    try {
      for (let i = 0; i < 90; i++) await charge(store, 1)
      await cutOff(redis)
      const local = await Promise.all(Array.from({ length: 20 }, () => charge(store, 1)))
      expect(store.degraded).toBe(true)
      expect(local.filter((r) => r.admitted)).toHaveLength(10) // 90 used before, quota 100
      expect(Math.max(...local.map((r) => r.used))).toBe(100)
      expect(logged.some((line) => line.includes('degraded'))).toBe(true)

      // It comes back; the once-a-second probe notices and hands the local counts over.
      await redis.connect()
      for (let i = 0; i < 30 && store.degraded; i++) await Bun.sleep(100)
      expect(store.degraded).toBe(false)
      expect(await redis.hgetall('quota:2026-11-20:1')).toMatchObject({ used: '100', rejected: '10' })
    } finally {
      store.close()
    }
  }, 10_000)

  test.skipIf(!TEST_REDIS_URL)('failover: a hand-over that times out is retried once, and charges meanwhile are not over-admitted', async () => {
    const redis = handOverRedis!
    const admin = new Redis(TEST_REDIS_URL!)
    const store = failoverQuotaStore(redis, createLogger('silent'))
    try {
      for (let i = 0; i < 90; i++) await charge(store, 1)
      await cutOff(redis)
      const t0 = performance.now()
      for (let i = 0; i < 5; i++) expect((await charge(store, 1)).admitted).toBe(true) // degraded from here: 95 used
      // Redis returns but holds every write for 1.5 s: the first probe (at ~1 s) pings fine, then its
      // hand-over times out (500 ms) though Redis will still run it when the pause ends.
      await admin.client('PAUSE', 1500, 'WRITE')
      await redis.connect()
      await Bun.sleep(1300 - (performance.now() - t0))
      expect(store.degraded).toBe(true)
      const meanwhile = await Promise.all(Array.from({ length: 10 }, () => charge(store, 1)))
      expect(meanwhile.filter((r) => r.admitted)).toHaveLength(5) // 95 + 5 = 100, not 90 + 10
      for (let i = 0; i < 40 && store.degraded; i++) await Bun.sleep(100)
      expect(store.degraded).toBe(false)
      // The timed-out batch ran once when the pause ended; its retry was a no-op.
      expect(await redis.hgetall('quota:2026-11-20:1')).toMatchObject({ used: '100', rejected: '5' })
      expect((await charge(store, 1)).admitted).toBe(false)
    } finally {
      store.close()
      admin.disconnect()
    }
  }, 15_000)

  describe('quota leases (Redis)', () => {
    /** Counts the commands Redis receives from this connection, as MONITOR sees them. */
    async function commandsFrom(redis: Redis) {
      const address = /addr=(\S+)/.exec(String(await redis.client('INFO')))![1]
      const monitor = await new Redis(TEST_REDIS_URL!).monitor()
      const seen = { commands: 0 }
      monitor.on('monitor', (_time: string, _args: string[], source: string) => {
        if (source === address) seen.commands++
      })
      return { seen, stop: () => monitor.disconnect() }
    }
    /** n charges at once, alternately by keys 1 and 2. */
    const burst = (store: QuotaStore, accountId: number, n: number, limit: number) =>
      Promise.all(Array.from({ length: n }, (_, i) => charge(store, accountId, 1, limit, NOON, 1 + (i % 2))))
    /** Until the lease a hot account asked for has been granted (the grant is its own Redis call). */
    async function leased(redis: Redis, accountId: number) {
      for (let i = 0; i < 50; i++) {
        const fields = Object.keys(await redis.hgetall(`quota:2026-11-20:${accountId}`))
        if (fields.some((field) => field.startsWith(LEASE_FIELD_PREFIX))) return
        await Bun.sleep(10)
      }
      throw new Error('no lease was granted')
    }
    const admittedOf = (results: { admitted: boolean }[]) => results.filter((r) => r.admitted).length

    test.skipIf(!TEST_REDIS_URL)('a hot account is charged from a lease without a Redis call per charge, and its counts reach Redis when it ends', async () => {
      const redis = (await testRedis())!
      const store = redisQuotaStore(redis)
      const first = await burst(store, 21, HOT_CHARGES_PER_WINDOW, 100_000)
      expect(first.map((r) => r.used).sort((a, b) => a - b)).toEqual(Array.from({ length: HOT_CHARGES_PER_WINDOW }, (_, i) => i + 1))
      await leased(redis, 21)
      const monitor = await commandsFrom(redis)
      const fromLease = []
      for (let i = 0; i < 100; i++) fromLease.push(await charge(store, 21, 1, 100_000, NOON, 1 + (i % 2)))
      await redis.ping() // MONITOR shows this one, after any charge sent before it
      for (let i = 0; i < 50 && monitor.seen.commands === 0; i++) await Bun.sleep(10)
      monitor.stop()
      expect(monitor.seen.commands).toBe(1) // the ping alone: not one Redis call for those 100 charges
      // Each answer counts on from the last, as if charged in Redis one by one.
      expect(fromLease.map((r) => r.used)).toEqual(Array.from({ length: 100 }, (_, i) => HOT_CHARGES_PER_WINDOW + i + 1))
      // Read meanwhile: the lease's unused units are not counted, its charges are.
      const total = HOT_CHARGES_PER_WINDOW + 100
      expect(await store.read(21, NOON)).toMatchObject({ used: total, byKey: new Map([[1, total / 2], [2, total / 2]]) })
      // Redis alone counts the whole lease as used until it is handed back.
      expect(Number(await redis.hget('quota:2026-11-20:21', 'used'))).toBeGreaterThan(total)

      await store.close()
      const stored = await redis.hgetall('quota:2026-11-20:21')
      expect(stored).toEqual({ used: String(total), 'k:1': String(total / 2), 'k:2': String(total / 2) })
    })

    test.skipIf(!TEST_REDIS_URL)('a charge at once is answered from a lease only: none before it, none while it is asked for', async () => {
      const redis = (await testRedis())!
      const store = redisQuotaStore(redis)
      const atOnce = () => store.chargeAtOnce({ accountId: 27, keyId: 1, cost: 1, limit: 100_000, now: NOON })
      expect(atOnce()).toBeUndefined()
      const first = burst(store, 27, HOT_CHARGES_PER_WINDOW, 100_000)
      expect(atOnce()).toBeUndefined()
      await first
      await leased(redis, 27)
      for (let i = 0; i < 50 && atOnce() === undefined; i++) await Bun.sleep(10) // the grant reaches the node after Redis holds it
      const used = [atOnce(), atOnce(), (await charge(store, 27, 1, 100_000)).used, atOnce()]
      // The first call that found the lease charged too: it is the one before these.
      expect(used).toEqual([used[0], used[0]! + 1, used[0]! + 2, used[0]! + 3])
      expect(used[0]).toBeGreaterThan(HOT_CHARGES_PER_WINDOW)
      await store.close()
      expect(Number(await redis.hget('quota:2026-11-20:27', 'used'))).toBe(used[3]!)
    })

    test.skipIf(!TEST_REDIS_URL)('an account hammering past its quota asks for no lease: one Redis call per batch of refusals', async () => {
      const redis = (await testRedis())!
      const store = redisQuotaStore(redis)
      await burst(store, 26, 50, 50)
      const monitor = await commandsFrom(redis)
      for (let wave = 0; wave < 5; wave++) expect(admittedOf(await burst(store, 26, 20, 50))).toBe(0)
      await redis.ping()
      for (let i = 0; i < 50 && monitor.seen.commands < 6; i++) await Bun.sleep(10)
      monitor.stop()
      expect(monitor.seen.commands).toBe(6) // five charge calls and the ping
    })

    test.skipIf(!TEST_REDIS_URL)('Redis gone while a lease is held: the lease is used, the node goes on counting locally from there, and the quota still holds exactly', async () => {
      const redis = leaseOutageRedis!
      const logged: string[] = []
      const store = failoverQuotaStore(redis, createLogger('info', { write: (line: string) => void logged.push(line) }))
      try {
        const limit = 1_000
        await burst(store, 27, 16, limit)
        await leased(redis, 27)
        await cutOff(redis)
        const results = []
        for (let i = 0; i < 1_100; i++) results.push(await charge(store, 27, 1, limit))
        expect(admittedOf(results)).toBe(limit - 16)
        expect(Math.max(...results.map((r) => r.used))).toBe(limit)
        expect(store.degraded).toBe(true)
        // The lease was used up while Redis was away: its hand-back failed and says so.
        expect(logged.some((line) => line.includes('hand-back failed'))).toBe(true)

        await redis.connect()
        for (let i = 0; i < 30 && store.degraded; i++) await Bun.sleep(100)
        expect(store.degraded).toBe(false)
        expect(await redis.hget('quota:2026-11-20:27', 'used')).toBe(String(limit))
        expect((await charge(store, 27, 1, limit)).admitted).toBe(false)
      } finally {
        await store.close()
      }
    }, 10_000)

    test.skipIf(!TEST_REDIS_URL)('a lease ends on its own within a second and gives back what it did not use', async () => {
      const redis = (await testRedis())!
      const store = redisQuotaStore(redis)
      await burst(store, 22, HOT_CHARGES_PER_WINDOW, 100_000)
      await leased(redis, 22)
      await charge(store, 22, 1, 100_000)
      await Bun.sleep(LEASE_LIFETIME_MS)
      const half = HOT_CHARGES_PER_WINDOW / 2
      expect(await redis.hgetall('quota:2026-11-20:22')).toEqual({ used: String(HOT_CHARGES_PER_WINDOW + 1), 'k:1': String(half + 1), 'k:2': String(half) })
    })

    test.skipIf(!TEST_REDIS_URL)('an account charged steadily, one charge per call, leases once it passes the hot rate; one charged slowly never does', async () => {
      const redis = (await testRedis())!
      const store = redisQuotaStore(redis)
      const leaseFields = async (accountId: number) =>
        Object.keys(await redis.hgetall(`quota:2026-11-20:${accountId}`)).filter((field) => field.startsWith(LEASE_FIELD_PREFIX))
      // One at a time: every call carries a single charge, as with many accounts sharing a node.
      for (let i = 0; i < HOT_CHARGES_PER_WINDOW - 1; i++) await charge(store, 28, 1, 100_000)
      expect(await leaseFields(28)).toEqual([])
      await charge(store, 28, 1, 100_000)
      await leased(redis, 28)
      // A slow account: under the hot rate within each window, so every charge goes to Redis.
      for (let i = 0; i < HOT_CHARGES_PER_WINDOW - 1; i++) await charge(store, 29, 1, 100_000)
      await Bun.sleep(HOT_WINDOW_MS)
      await charge(store, 29, 1, 100_000)
      expect(await leaseFields(29)).toEqual([])
      await store.close()
      expect(await redis.hget('quota:2026-11-20:28', 'used')).toBe(String(HOT_CHARGES_PER_WINDOW))
    })

    test.skipIf(!TEST_REDIS_URL)('two nodes: a charge that would be refused while the other node holds a lease waits for its unused units, so exactly the quota is admitted', async () => {
      const prefix = testRedisPrefix()
      const [redisA, redisB] = [(await testRedis(prefix))!, (await testRedis(prefix))!]
      const [a, b] = [redisQuotaStore(redisA), redisQuotaStore(redisB)]
      const limit = 1_000
      const warm = await burst(a, 23, 16, limit)
      await leased(redisA, 23)
      // Node B asks for everything at once: Redis has the lease counted as used, so B's last charges
      // are told to wait until A's lease ends (about a second) and hands its unused units back.
      const started = performance.now()
      const fromB = await burst(b, 23, limit, limit)
      expect(performance.now() - started).toBeLessThan(3 * LEASE_LIFETIME_MS)
      expect(admittedOf(warm) + admittedOf(fromB)).toBe(limit)
      const counters = await b.read(23, NOON)
      expect(counters).toMatchObject({ used: limit, rejected: 16 })
      expect([...counters.byKey.values()].reduce((x, y) => x + y, 0)).toBe(limit)
      await Promise.all([a.close(), b.close()])
    })

    test.skipIf(!TEST_REDIS_URL)('two nodes under concurrent load admit exactly min(N, Q) between them', async () => {
      const prefix = testRedisPrefix()
      const [redisA, redisB] = [(await testRedis(prefix))!, (await testRedis(prefix))!]
      const [a, b] = [redisQuotaStore(redisA), redisQuotaStore(redisB)]
      const limit = 5_000
      const results: { admitted: boolean }[] = []
      // Waves of concurrent charges on both nodes: the first ones make leases, later ones use them,
      // run them out and take new ones, and the last reach the limit.
      for (let wave = 0; wave < 40; wave++) {
        const [fromA, fromB] = await Promise.all([burst(a, 24, 100, limit), burst(b, 24, 60, limit)])
        results.push(...fromA, ...fromB)
      }
      expect(admittedOf(results)).toBe(limit)
      await Promise.all([a.close(), b.close()])
      expect(await redisA.hgetall('quota:2026-11-20:24')).toMatchObject({ used: String(limit), rejected: String(40 * 160 - limit) })
    }, 15_000)

    test.skipIf(!TEST_REDIS_URL)('a lease its node never hands back (a crash) counts as used once its deadline passes: the quota is never exceeded and charges stop waiting', async () => {
      const prefix = testRedisPrefix()
      const [redisA, redisB] = [(await testRedis(prefix))!, (await testRedis(prefix))!]
      const [a, b] = [redisQuotaStore(redisA), redisQuotaStore(redisB)]
      const limit = 1_000
      await burst(a, 25, 16, limit)
      await leased(redisA, 25)
      const [, leaseDeadline] = Object.entries(await redisA.hgetall('quota:2026-11-20:25')).find(([field]) => field.startsWith(LEASE_FIELD_PREFIX))!
      const leaseUnits = Number(await redisA.hget('quota:2026-11-20:25', 'used')) - 16
      await cutOff(redisA) // node A is gone with its lease
      const fromB = await burst(b, 25, limit, limit)
      expect(admittedOf(fromB)).toBe(limit - 16 - leaseUnits)
      expect(Date.now()).toBeGreaterThanOrEqual(Number(leaseDeadline)) // the last refusals waited for the deadline
      const stored = await redisB.hgetall('quota:2026-11-20:25')
      expect(stored).toMatchObject({ used: String(limit), rejected: String(16 + leaseUnits) })
      expect(Object.entries(stored).filter(([field]) => field.startsWith(LEASE_FIELD_PREFIX)).map(([, value]) => value)).toEqual(['-1'])
      await a.close() // its hand-back fails: nothing more is admitted or returned
      expect(await redisB.hget('quota:2026-11-20:25', 'used')).toBe(String(limit))
    })
  })

  describe('live refresh allowance', () => {
    const claim = (store: QuotaStore, accountId: number, limit = 200, now = NOON) => store.claimLiveRefresh({ accountId, limit, now })

    for (const [name, makeStore] of stores) {
      test.skipIf(name === 'Redis' && !TEST_REDIS_URL)(`${name}: N concurrent claims against R left admit exactly min(N, R); a refund gives one back; requests are apart`, async () => {
        const store = (await makeStore())!
        await charge(store, 31) // the request asking for the refresh is charged first
        for (let i = 0; i < 195; i++) expect((await claim(store, 31)).admitted).toBe(true)
        const burst = await Promise.all(Array.from({ length: 12 }, () => claim(store, 31)))
        const admitted = burst.filter((result) => result.admitted)
        expect(admitted.map((result) => result.used).sort((a, b) => a - b)).toEqual([196, 197, 198, 199, 200])
        expect(burst.filter((result) => !result.admitted).every((result) => result.used === 200)).toBe(true)
        let counters = await store.read(31, NOON)
        expect(counters).toMatchObject({ used: 1, rejected: 0, liveRefreshes: 200 })
        await store.refundLiveRefresh(31, NOON)
        expect((await store.read(31, NOON)).liveRefreshes).toBe(199)
        expect(await claim(store, 31)).toEqual({ admitted: true, used: 200 })
        expect(await claim(store, 31)).toEqual({ admitted: false, used: 200 })
        // A new UTC day starts from zero.
        const tomorrow = new Date('2026-11-21T00:00:01.000Z')
        await charge(store, 31, 1, 100, tomorrow)
        expect(await claim(store, 31, 200, tomorrow)).toEqual({ admitted: true, used: 1 })
        counters = await store.read(31, NOON)
        expect(counters.liveRefreshes).toBe(name === 'Redis' ? 200 : 0) // in-process keeps today only
      })
    }

    test.skipIf(!TEST_REDIS_URL)('Redis: a day hash Redis lost is seeded with the stored live refreshes before a claim is judged', async () => {
      const redis = (await testRedis())!
      const store = redisQuotaStore(redis, undefined, async () => ({ used: 40, rejected: 0, liveRefreshes: 199, complete: true }))
      expect(await claim(store, 41)).toEqual({ admitted: true, used: 200 })
      expect(await claim(store, 41)).toEqual({ admitted: false, used: 200 })
      expect(await redis.hgetall('quota:2026-11-20:41')).toMatchObject({ used: '40', live: '200' })
    })

    test.skipIf(!TEST_REDIS_URL)('failover: claims continue locally from the last count Redis gave, and are handed back', async () => {
      const redis = (await testRedis())!
      const store = failoverQuotaStore(redis, createLogger('silent'))
      try {
        await charge(store, 51)
        for (let i = 0; i < 198; i++) await claim(store, 51)
        await cutOff(redis)
        const local = await Promise.all(Array.from({ length: 5 }, () => claim(store, 51)))
        expect(store.degraded).toBe(true)
        expect(local.filter((result) => result.admitted)).toHaveLength(2)
        expect((await store.read(51, NOON)).liveRefreshes).toBe(200)
        await store.refundLiveRefresh(51, NOON)
        await redis.connect()
        for (let i = 0; i < 30 && store.degraded; i++) await Bun.sleep(100)
        expect(store.degraded).toBe(false)
        expect(await redis.hget('quota:2026-11-20:51', 'live')).toBe('199')
        expect(await claim(store, 51)).toEqual({ admitted: true, used: 200 })
      } finally {
        store.close()
      }
    }, 10_000)
  })

  test('the reset is the next 00:00 UTC, whatever the time of day', () => {
    expect(nextUtcMidnight(new Date('2026-11-20T00:00:00.000Z')).toISOString()).toBe('2026-11-21T00:00:00.000Z')
    expect(nextUtcMidnight(new Date('2026-11-20T23:59:59.999Z')).toISOString()).toBe('2026-11-21T00:00:00.000Z')
    expect(nextUtcMidnight(new Date('2026-12-31T18:00:00.000Z')).toISOString()).toBe('2027-01-01T00:00:00.000Z')
  })
})

describe('tier policy', () => {
  test('bulk resolve credits are ceil(items × multiplier) per the spec table', () => {
    expect(resolveCredits('pro', 200)).toBe(100) // the spec's example
    expect(resolveCredits('starter', 100)).toBe(100)
    expect(resolveCredits('pro', 1)).toBe(1)
    expect(resolveCredits('business', 30)).toBe(3)
    expect(resolveCredits('business', 31)).toBe(4)
    expect(resolveCredits('business', 1000)).toBe(100)
    expect(() => resolveCredits('hobby', 1)).toThrow()
    expect([TIER_POLICY.starter.resolve, TIER_POLICY.pro.resolve, TIER_POLICY.business.resolve].map((r) => r?.maxItems)).toEqual([
      100, 500, 1000,
    ])
  })

  test('history windows and the cheapest tier per capability', () => {
    expect(Object.values(TIER_POLICY).map((p) => p.historyDays)).toEqual([7, 30, 90, null, null])
    expect(minimumTier('catalog')).toBe('free')
    expect(minimumTier('set_prices')).toBe('pro')
    expect(minimumTier('set_export')).toBe('business')
  })
})

describe('key material', () => {
  test('keys are tcg_live_ + 32 base62 characters, distinct, stored as their SHA-256', () => {
    const keys = Array.from({ length: 1000 }, () => newApiKey())
    expect(new Set(keys.map((k) => k.raw)).size).toBe(1000)
    for (const key of keys) {
      expect(key.raw).toMatch(API_KEY_PATTERN)
      expect(key.hash).toBe(sha256Hex(key.raw))
      expect(key.raw.startsWith(key.displayPrefix)).toBe(true)
    }
    // Every base62 character turns up: the alphabet is used whole.
    expect(new Set(keys.flatMap((k) => [...k.raw.slice(9)])).size).toBe(62)
  })

  test('the stored hash is standard SHA-256 in hex, so hashes stored by earlier versions still match', () => {
    expect(sha256Hex('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad')
    for (const value of ['', 'tcg_live_0123456789abcdefghijABCDEFGHIJ01', 'sessión ✓']) {
      expect(sha256Hex(value)).toBe(createHash('sha256').update(value).digest('hex'))
    }
  })
})
