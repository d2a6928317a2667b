import { afterAll, describe, expect, test } from 'bun:test'
import { createHash } from 'node:crypto'
import Redis from 'ioredis'
import { testRedis, testRedisPrefix } from '../../../test/helpers/auth'
import { fakeClock } from '../../../test/helpers/clock'
import { TEST_REDIS_URL } from '../../../test/helpers/env'
import { eventually } from '../../../test/helpers/eventually'
import { startTcpProxy } from '../../../test/helpers/tcp-proxy'
import { redisOptions } from '../../deps'
import { systemClock } from '../../shared/clock'
import { createLogger } from '../../shared/logger'
import { type DaySeed, failoverQuotaStore, memoryQuotaStore, nextUtcMidnight, type QuotaStore, redisQuotaStore } from './quota'
import { chargingCommands } from './quota/commands'
import { PROBE_INTERVAL_MS } from './quota/failover-store'
import { LAPSED_LEASE, LEASE_FIELD_PREFIX } from './quota/fields'
import { MAX_LEASE_WAIT_MS } from './quota/group-commit'
import { HOT_CHARGES_PER_WINDOW, HOT_WINDOW_MS, LEASE_LIFETIME_MS, LOCAL_MARGIN_MS } from './quota/lease-policy'
import { quotaLeases } from './quota/leases'
import { writeMarkers } from './quota/outcomes'
import { RESEED_INTERVAL_MS } from './quota/seeding'
import { API_KEY_PATTERN, newApiKey, sha256Hex } from './secrets'
import { minimumTier, resolveCredits, TIER_POLICY } from './tiers'

const NOON = new Date('2026-11-20T12:00:00.000Z')
const charge = (store: QuotaStore, accountId: number, cost = 1, limit = 100, now = NOON, keyId = 1) => store.charge({ accountId, keyId, cost, limit, now })

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

/** Redis's TIME as ms since the epoch: the clock lease deadlines are kept by. */
const redisNow = ([seconds, micros]: (string | number)[]) => Number(seconds) * 1000 + Math.floor(Number(micros) / 1000)

/**
 * Redis is back for a degraded store: its probe runs on the fake clock, so nothing is handed over
 * until the test moves it one probe interval; then the hand-over is awaited.
 */
async function recovered(redis: Redis, store: { readonly degraded: boolean }, clock: ReturnType<typeof fakeClock>) {
  await redis.connect()
  expect(store.degraded).toBe(true)
  await clock.advance(PROBE_INTERVAL_MS)
  await eventually(() => !store.degraded, { what: 'the hand-over back to Redis' })
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
    expect(await store.read(31, NOON)).toEqual({
      used: 10,
      rejected: 0,
      liveRefreshes: 0,
      byKey: new Map([
        [1, 5],
        [2, 5],
      ]),
    })
    expect(await charge(store, 31, 1, 10)).toEqual({ admitted: false, used: 10 })
    expect((await store.read(31, NOON)).rejected).toBe(1)
  })

  test("in-process, seeded (no Redis): an account's day starts from its seed, one seed for concurrent charges; a new day seeds again", async () => {
    const asked: [number, string, boolean][] = []
    const seed: DaySeed = async (accountId, day, readStored) => {
      asked.push([accountId, day, readStored])
      return { used: 40, rejected: 3, liveRefreshes: 7, complete: true }
    }
    const store = memoryQuotaStore({ seed, clock: fakeClock() })
    // Not seeded yet: left to `charge`, nothing counted and nothing asked.
    expect(store.chargeAtOnce({ accountId: 41, keyId: 1, cost: 1, limit: 100, now: NOON })).toBeUndefined()
    expect(asked).toEqual([])
    const results = await Promise.all(Array.from({ length: 300 }, () => charge(store, 41)))
    const admitted = results.filter((r) => r.admitted)
    expect(admitted.map((r) => r.used).sort((a, b) => a - b)).toEqual(Array.from({ length: 60 }, (_, i) => 41 + i))
    expect(asked).toEqual([[41, '2026-11-20', true]])
    expect(await store.read(41, NOON)).toEqual({ used: 100, rejected: 243, liveRefreshes: 7, byKey: new Map([[1, 60]]) })
    expect(await store.claimLiveRefresh({ accountId: 41, limit: 8, now: NOON })).toEqual({ admitted: true, used: 8 })
    expect(await store.claimLiveRefresh({ accountId: 41, limit: 8, now: NOON })).toEqual({ admitted: false, used: 8 })
    // A free read and a claim seed too.
    expect((await store.read(42, NOON)).used).toBe(40)
    expect(await store.claimLiveRefresh({ accountId: 43, limit: 8, now: NOON })).toEqual({ admitted: true, used: 8 })
    expect(await charge(store, 41, 1, 100, new Date('2026-11-21T00:00:00.000Z'))).toEqual({ admitted: true, used: 41 })
    expect(asked.map(([accountId, day]) => `${accountId} ${day}`)).toEqual(['41 2026-11-20', '42 2026-11-20', '43 2026-11-20', '41 2026-11-21'])
  })

  test('in-process, seeded: seeded while the database is away, an account counts on provisionally, then takes the larger of each count', async () => {
    const clock = fakeClock()
    let away = true
    const asked: boolean[] = []
    // What the usage recorder answers: without the stored row, only the node's unwritten counts (none here).
    const seed: DaySeed = async (_accountId, _day, readStored) => {
      asked.push(readStored)
      return readStored && !away ? { used: 50, rejected: 1, liveRefreshes: 2, complete: true } : { used: 0, rejected: 0, liveRefreshes: 0, complete: false }
    }
    const store = memoryQuotaStore({ seed, clock })
    for (let i = 1; i <= 5; i++) expect(await charge(store, 51)).toEqual({ admitted: true, used: i })
    // A second account seeds without waiting for the database found away a moment ago.
    expect(await charge(store, 52)).toEqual({ admitted: true, used: 1 })
    expect(asked).toEqual([true, false])

    away = false
    await clock.advance(RESEED_INTERVAL_MS)
    // The next charge is counted at once and asks the database again behind it.
    expect(await charge(store, 51)).toEqual({ admitted: true, used: 6 })
    await eventually(() => asked.length === 3, { what: 'the seed asked again' })
    expect(asked[2]).toBe(true)
    expect(await store.read(51, NOON)).toEqual({ used: 50, rejected: 1, liveRefreshes: 2, byKey: new Map([[1, 6]]) })
    expect(await charge(store, 51, 50)).toEqual({ admitted: true, used: 100 })
    expect(await charge(store, 51)).toEqual({ admitted: false, used: 100 })
    // Complete now: no more seeds for it.
    await store.read(51, NOON)
    expect(asked).toHaveLength(3)
  })

  test('in-process, seeded: a refund never goes below zero, nor touches a day not seeded', async () => {
    const store = memoryQuotaStore({ seed: async () => ({ used: 0, rejected: 0, liveRefreshes: 1, complete: true }), clock: fakeClock() })
    await store.refundLiveRefresh(61, NOON)
    expect((await store.read(61, NOON)).liveRefreshes).toBe(1)
    expect(await store.claimLiveRefresh({ accountId: 61, limit: 5, now: NOON })).toEqual({ admitted: true, used: 2 })
    for (let i = 0; i < 3; i++) await store.refundLiveRefresh(61, NOON)
    expect((await store.read(61, NOON)).liveRefreshes).toBe(0)
  })

  // docs/adr/0090-a-429-never-costs-a-unit.md: a request refused with a 429 after its charge gets its units back.
  test("a refund hands back the units and the key's share, and counts a rejection; a day not counted is left alone", async () => {
    const redis = await testRedis()
    const stores: [string, QuotaStore][] = [
      ['in-process', memoryQuotaStore({ seed: async () => ({ used: 0, rejected: 0, liveRefreshes: 0, complete: true }), clock: fakeClock() })],
    ]
    if (redis) stores.push(['Redis', redisQuotaStore(redis, fakeClock())])
    for (const [name, store] of stores) {
      await store.refund({ accountId: 71, keyId: 1, cost: 1, now: NOON }) // no counter yet: nothing to hand back
      for (let i = 0; i < 3; i++) await charge(store, 71, 2, 100, NOON, 1 + (i % 2))
      await store.refund({ accountId: 71, keyId: 2, cost: 2, now: NOON })
      const counters = await store.read(71, NOON)
      expect({ name, used: counters.used, rejected: counters.rejected, byKey: counters.byKey }).toEqual({
        name,
        used: 4,
        rejected: 1,
        byKey: new Map([
          [1, 4],
          [2, 0],
        ]),
      })
      expect((await charge(store, 71, 96)).admitted).toBe(true) // the units handed back are usable again
    }
  })

  test.skipIf(!TEST_REDIS_URL)('a refund of a charge a quota lease admitted is exact once the lease is handed back', async () => {
    const redis = (await testRedis())!
    const store = redisQuotaStore(redis, fakeClock())
    await Promise.all(Array.from({ length: HOT_CHARGES_PER_WINDOW }, () => charge(store, 72, 1, 100_000)))
    await eventually(async () => Object.keys(await redis.hgetall('quota:2026-11-20:72')).some((field) => field.startsWith(LEASE_FIELD_PREFIX)), {
      what: 'a lease for account 72',
    })
    for (let i = 0; i < 10; i++) await charge(store, 72, 1, 100_000)
    for (let i = 0; i < 3; i++) await store.refund({ accountId: 72, keyId: 1, cost: 1, now: NOON })
    await store.close()
    const total = HOT_CHARGES_PER_WINDOW + 10 - 3
    expect(await redis.hgetall('quota:2026-11-20:72')).toEqual({ used: String(total), rejected: '3', 'k:1': String(total) })
  })

  test.skipIf(!TEST_REDIS_URL)('failover: while Redis is away a charge at once counts locally from the last value Redis gave', async () => {
    const redis = atOnceOutageRedis!
    const store = failoverQuotaStore(redis, fakeClock(), createLogger('silent'))
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
    ['Redis', async () => (TEST_REDIS_URL ? redisQuotaStore((await testRedis())!, fakeClock()) : undefined)],
  ]
  for (const [name, makeStore] of stores) {
    test.skipIf(name === 'Redis' && !TEST_REDIS_URL)(
      `${name}: a charge costing more than what is left is refused, uses nothing, and the next one is judged on its own`,
      async () => {
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
        expect(counters).toEqual({
          used: 100,
          rejected: 2,
          liveRefreshes: 0,
          byKey: new Map([
            [1, 95],
            [2, 5],
          ]),
        })
        // A first charge of the day that is refused still leaves counters that expire with the day.
        expect(await charge(store, 13, 101)).toEqual({ admitted: false, used: 0 })
        expect((await store.read(13, NOON)).rejected).toBe(1)
      },
    )
  }

  test.skipIf(!TEST_REDIS_URL)('Redis: one atomic script, exact under concurrency, expiring after the day', async () => {
    const redis = (await testRedis())!
    const store = redisQuotaStore(redis, fakeClock())
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
    const clock = fakeClock()
    const store = failoverQuotaStore(redis, clock, logger)
    try {
      for (let i = 0; i < 90; i++) await charge(store, 1)
      await cutOff(redis)
      const local = await Promise.all(Array.from({ length: 20 }, () => charge(store, 1)))
      expect(store.degraded).toBe(true)
      expect(local.filter((r) => r.admitted)).toHaveLength(10) // 90 used before, quota 100
      expect(Math.max(...local.map((r) => r.used))).toBe(100)
      expect(logged.some((line) => line.includes('degraded'))).toBe(true)

      // It comes back; the once-a-second probe notices and hands the local counts over.
      await recovered(redis, store, clock)
      expect(await redis.hgetall('quota:2026-11-20:1')).toMatchObject({ used: '100', rejected: '10' })
    } finally {
      store.close()
    }
  })

  test.skipIf(!TEST_REDIS_URL)('failover: a hand-over that times out is retried once, and charges meanwhile are not over-admitted', async () => {
    const redis = handOverRedis!
    const admin = new Redis(TEST_REDIS_URL!)
    const clock = fakeClock()
    const store = failoverQuotaStore(redis, clock, createLogger('silent'))
    // Every hand-over the store sends: its batch id and its outcome.
    const handOvers: { batch: unknown; result: Promise<unknown> }[] = []
    const client = redis as unknown as Record<string, (...args: unknown[]) => unknown>
    const addBatch = client.tcgAddQuotaBatch!
    client.tcgAddQuotaBatch = function (this: unknown, ...args: unknown[]) {
      const result = addBatch.apply(this, args)
      // Auto-pipelining calls it again on a pipeline, which copies the client's methods: not a second hand-over.
      if (this === client) {
        handOvers.push({ batch: args[1], result: result as Promise<unknown> })
        ;(result as Promise<unknown>).catch(() => {})
      }
      return result
    }
    try {
      for (let i = 0; i < 90; i++) await charge(store, 1)
      await cutOff(redis)
      for (let i = 0; i < 5; i++) expect((await charge(store, 1)).admitted).toBe(true) // degraded from here: 95 used
      // Redis returns but holds every write (for at most 10 s, should the test fail): the probe
      // pings fine, then its hand-over times out (the client's 500 ms) though Redis runs it later.
      await admin.client('PAUSE', 10_000, 'WRITE')
      await redis.connect()
      await clock.advance(PROBE_INTERVAL_MS)
      await eventually(() => handOvers.length === 1, { what: 'the first hand-over' })
      expect(
        await handOvers[0]!.result.then(
          () => 'applied',
          (error: Error) => error.message,
        ),
      ).toContain('timed out')
      expect(store.degraded).toBe(true)
      const meanwhile = await Promise.all(Array.from({ length: 10 }, () => charge(store, 1)))
      expect(meanwhile.filter((r) => r.admitted)).toHaveLength(5) // 95 + 5 = 100, not 90 + 10
      // Writes resume: the timed-out batch runs in Redis now, once.
      await admin.client('UNPAUSE')
      await eventually(async () => (await redis.hget('quota:2026-11-20:1', 'used')) === '95', { what: 'the timed-out batch applied' })
      await clock.advance(PROBE_INTERVAL_MS)
      await eventually(() => !store.degraded, { what: 'the hand-over back to Redis' })
      // The next probe sent the same batch again (a no-op), then what was counted meanwhile.
      const batches = handOvers.map((h) => h.batch)
      expect(batches).toHaveLength(3)
      expect(batches[1]).toBe(batches[0])
      expect(batches[2]).not.toBe(batches[0])
      expect(await redis.hgetall('quota:2026-11-20:1')).toMatchObject({ used: '100', rejected: '5' })
      expect((await charge(store, 1)).admitted).toBe(false)
    } finally {
      await admin.client('UNPAUSE')
      store.close()
      admin.disconnect()
    }
  })

  describe('quota leases (Redis)', () => {
    /**
     * The commands Redis receives from this connection, as MONITOR sees them, up to a PING sent
     * after the ones that matter: MONITOR shows them in order, so once it shows the ping, nothing
     * sent before it is still to come.
     */
    async function commandsFrom(redis: Redis) {
      const address = /addr=(\S+)/.exec(String(await redis.client('INFO')))![1]
      const monitor = await new Redis(TEST_REDIS_URL!).monitor()
      const seen: string[] = []
      monitor.on('monitor', (_time: string, args: string[], source: string) => {
        if (source === address) seen.push(String(args[0]).toLowerCase())
      })
      return {
        async untilPing() {
          await redis.ping()
          await eventually(() => seen.includes('ping'), { what: 'MONITOR showing the ping' })
          monitor.disconnect()
          return seen
        },
      }
    }
    /** n charges at once, alternately by keys 1 and 2. */
    const burst = (store: QuotaStore, accountId: number, n: number, limit: number) =>
      Promise.all(Array.from({ length: n }, (_, i) => charge(store, accountId, 1, limit, NOON, 1 + (i % 2))))
    const leaseFields = async (redis: Redis, accountId: number) =>
      Object.keys(await redis.hgetall(`quota:2026-11-20:${accountId}`)).filter((field) => field.startsWith(LEASE_FIELD_PREFIX))
    /** Until the lease a hot account asked for has been granted (the grant is its own Redis call). */
    const leased = (redis: Redis, accountId: number) => eventually(async () => (await leaseFields(redis, accountId)).length > 0, { what: `a lease for account ${accountId}` })
    const admittedOf = (results: { admitted: boolean }[]) => results.filter((r) => r.admitted).length

    test.skipIf(!TEST_REDIS_URL)('a hot account is charged from a lease without a Redis call per charge, and its counts reach Redis when it ends', async () => {
      const redis = (await testRedis())!
      // The lease ends only when this clock says: not in the middle of the test on a slow machine.
      const store = redisQuotaStore(redis, fakeClock())
      const first = await burst(store, 21, HOT_CHARGES_PER_WINDOW, 100_000)
      expect(first.map((r) => r.used).sort((a, b) => a - b)).toEqual(Array.from({ length: HOT_CHARGES_PER_WINDOW }, (_, i) => i + 1))
      await leased(redis, 21)
      const monitor = await commandsFrom(redis)
      const fromLease = []
      for (let i = 0; i < 100; i++) fromLease.push(await charge(store, 21, 1, 100_000, NOON, 1 + (i % 2)))
      expect(await monitor.untilPing()).toEqual(['ping']) // the ping alone: not one Redis call for those 100 charges
      // Each answer counts on from the last, as if charged in Redis one by one.
      expect(fromLease.map((r) => r.used)).toEqual(Array.from({ length: 100 }, (_, i) => HOT_CHARGES_PER_WINDOW + i + 1))
      // Read meanwhile: the lease's unused units are not counted, its charges are.
      const total = HOT_CHARGES_PER_WINDOW + 100
      expect(await store.read(21, NOON)).toMatchObject({
        used: total,
        byKey: new Map([
          [1, total / 2],
          [2, total / 2],
        ]),
      })
      // Redis alone counts the whole lease as used until it is handed back.
      expect(Number(await redis.hget('quota:2026-11-20:21', 'used'))).toBeGreaterThan(total)

      await store.close()
      const stored = await redis.hgetall('quota:2026-11-20:21')
      expect(stored).toEqual({ used: String(total), 'k:1': String(total / 2), 'k:2': String(total / 2) })
    })

    test.skipIf(!TEST_REDIS_URL)('a charge at once is answered from a lease only: none before it, none while it is asked for', async () => {
      const redis = (await testRedis())!
      const store = redisQuotaStore(redis, fakeClock())
      const atOnce = () => store.chargeAtOnce({ accountId: 27, keyId: 1, cost: 1, limit: 100_000, now: NOON })
      expect(atOnce()).toBeUndefined()
      const first = burst(store, 27, HOT_CHARGES_PER_WINDOW, 100_000)
      expect(atOnce()).toBeUndefined()
      await first
      await leased(redis, 27)
      // The grant reaches the node after Redis holds it; the first call that finds the lease charges too.
      const found = await eventually(() => atOnce(), { what: 'a charge at once from the lease' })
      const used = [atOnce(), atOnce(), (await charge(store, 27, 1, 100_000)).used, atOnce()]
      expect(used).toEqual([found + 1, found + 2, found + 3, found + 4])
      expect(found).toBeGreaterThan(HOT_CHARGES_PER_WINDOW)
      await store.close()
      expect(Number(await redis.hget('quota:2026-11-20:27', 'used'))).toBe(used[3]!)
    })

    test.skipIf(!TEST_REDIS_URL)('an account hammering past its quota asks for no lease: one Redis call per batch of refusals', async () => {
      const redis = (await testRedis())!
      const store = redisQuotaStore(redis, fakeClock())
      await burst(store, 26, 50, 50)
      const monitor = await commandsFrom(redis)
      for (let wave = 0; wave < 5; wave++) expect(admittedOf(await burst(store, 26, 20, 50))).toBe(0)
      expect(await monitor.untilPing()).toEqual([...Array(5).fill('evalsha'), 'ping']) // five charge calls and the ping
    })

    test.skipIf(!TEST_REDIS_URL)(
      'Redis gone while a lease is held: the lease is used, the node goes on counting locally from there, and the quota still holds exactly',
      async () => {
        const redis = leaseOutageRedis!
        const logged: string[] = []
        const clock = fakeClock()
        const store = failoverQuotaStore(redis, clock, createLogger('info', { write: (line: string) => void logged.push(line) }))
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

          await recovered(redis, store, clock)
          expect(await redis.hget('quota:2026-11-20:27', 'used')).toBe(String(limit))
          // The lease was never handed back: once its deadline passes by Redis's clock, it counts as
          // wholly used and a charge over the quota no longer waits for it.
          const [lease] = await leaseFields(redis, 27)
          const deadline = Number(await redis.hget('quota:2026-11-20:27', lease!))
          await eventually(async () => redisNow(await redis.time()) > deadline, { what: "the lease's deadline by Redis's clock" })
          expect((await charge(store, 27, 1, limit)).admitted).toBe(false)
          expect(await redis.hget('quota:2026-11-20:27', lease!)).toBe('-1')
        } finally {
          await store.close()
        }
      },
    )

    test.skipIf(!TEST_REDIS_URL)('a lease ends on its own within a second and gives back what it did not use', async () => {
      const redis = (await testRedis())!
      const clock = fakeClock()
      const store = redisQuotaStore(redis, clock)
      await burst(store, 22, HOT_CHARGES_PER_WINDOW, 100_000)
      await leased(redis, 22)
      await eventually(() => clock.pending() > 0, { what: 'the node holding the lease' }) // its end is a timer
      await charge(store, 22, 1, 100_000)
      // The node stops using it a margin before Redis's deadline: held until then, handed back at once after.
      await clock.advance(LEASE_LIFETIME_MS - LOCAL_MARGIN_MS - 1)
      expect(await leaseFields(redis, 22)).toHaveLength(1)
      await clock.advance(1)
      const settled = await eventually(async () => (await leaseFields(redis, 22)).length === 0 && redis.hgetall('quota:2026-11-20:22'), { what: 'the lease handed back' })
      const half = HOT_CHARGES_PER_WINDOW / 2
      expect(settled).toEqual({ used: String(HOT_CHARGES_PER_WINDOW + 1), 'k:1': String(half + 1), 'k:2': String(half) })
    })

    test.skipIf(!TEST_REDIS_URL)('an account charged steadily, one charge per call, leases once it passes the hot rate; one charged slowly never does', async () => {
      const redis = (await testRedis())!
      const clock = fakeClock()
      const store = redisQuotaStore(redis, clock)
      // One at a time: every call carries a single charge, as with many accounts sharing a node.
      for (let i = 0; i < HOT_CHARGES_PER_WINDOW - 1; i++) await charge(store, 28, 1, 100_000)
      expect(await leaseFields(redis, 28)).toEqual([])
      await charge(store, 28, 1, 100_000)
      await leased(redis, 28)
      // A slow account: under the hot rate within each window, so every charge goes to Redis.
      for (let i = 0; i < HOT_CHARGES_PER_WINDOW - 1; i++) await charge(store, 29, 1, 100_000)
      await clock.advance(HOT_WINDOW_MS)
      await charge(store, 29, 1, 100_000)
      // A lease is asked for on this connection as the charge is answered: this read comes after it.
      expect(await leaseFields(redis, 29)).toEqual([])
      await store.close()
      expect(await redis.hget('quota:2026-11-20:28', 'used')).toBe(String(HOT_CHARGES_PER_WINDOW))
    })

    test.skipIf(!TEST_REDIS_URL)(
      'two nodes: a charge that would be refused while the other node holds a lease waits for its unused units, so exactly the quota is admitted',
      async () => {
        const prefix = testRedisPrefix()
        const [redisA, redisB] = [(await testRedis(prefix))!, (await testRedis(prefix))!]
        const [clockA, clockB] = [fakeClock(), fakeClock()]
        const [a, b] = [redisQuotaStore(redisA, clockA), redisQuotaStore(redisB, clockB)]
        const limit = 1_000
        const warm = await burst(a, 23, 16, limit)
        await leased(redisA, 23)
        await eventually(() => clockA.pending() > 0, { what: 'node A holding the lease' })
        // Node B asks for everything at once: Redis has the lease counted as used, so B's last charges
        // are told to wait until A's lease ends and hands its unused units back. (Redis ends the lease
        // by its own clock a second after the grant: A hands it back well before.)
        let answered = false
        const fromBAll = burst(b, 23, limit, limit).finally(() => void (answered = true))
        await eventually(() => clockB.pending() > 0, { what: "B's charges waiting for A's lease" })
        expect(answered).toBe(false)
        await clockA.advance(LEASE_LIFETIME_MS)
        // B asks again after each wait (on its clock) until A's units are back in Redis.
        const fromB = await eventually(
          async () => {
            if (clockB.pending() > 0) await clockB.advance(MAX_LEASE_WAIT_MS)
            return answered && fromBAll
          },
          { what: "B's charges judged" },
        )
        // B asked again every MAX_LEASE_WAIT_MS, so it went on a wait or two after A's hand-back, not at the lease's deadline.
        expect(clockB.monotonic()).toBeLessThanOrEqual(4 * MAX_LEASE_WAIT_MS)
        expect(admittedOf(warm) + admittedOf(fromB)).toBe(limit)
        const counters = await b.read(23, NOON)
        expect(counters).toMatchObject({ used: limit, rejected: 16 })
        expect([...counters.byKey.values()].reduce((x, y) => x + y, 0)).toBe(limit)
        await Promise.all([a.close(), b.close()])
      },
    )

    test.skipIf(!TEST_REDIS_URL)('two nodes under concurrent load admit exactly min(N, Q) between them', async () => {
      const prefix = testRedisPrefix()
      const [redisA, redisB] = [(await testRedis(prefix))!, (await testRedis(prefix))!]
      // The machine's clock: a node's leases must end by it, before Redis's deadline for them passes.
      const [a, b] = [redisQuotaStore(redisA, systemClock), redisQuotaStore(redisB, systemClock)]
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
    })

    test.skipIf(!TEST_REDIS_URL)(
      'a lease its node never hands back (a crash) counts as used once its deadline passes: the quota is never exceeded and charges stop waiting',
      async () => {
        const prefix = testRedisPrefix()
        const [redisA, redisB] = [(await testRedis(prefix))!, (await testRedis(prefix))!]
        // A's clock never moves: a crashed node's timers never run. B waits on Redis's own deadline, in real time.
        const [a, b] = [redisQuotaStore(redisA, fakeClock()), redisQuotaStore(redisB, systemClock)]
        const limit = 1_000
        await burst(a, 25, 16, limit)
        await leased(redisA, 25)
        const [, leaseDeadline] = Object.entries(await redisA.hgetall('quota:2026-11-20:25')).find(([field]) => field.startsWith(LEASE_FIELD_PREFIX))!
        const leaseUnits = Number(await redisA.hget('quota:2026-11-20:25', 'used')) - 16
        await cutOff(redisA) // node A is gone with its lease
        const fromB = await burst(b, 25, limit, limit)
        expect(admittedOf(fromB)).toBe(limit - 16 - leaseUnits)
        expect(systemClock.now().getTime()).toBeGreaterThanOrEqual(Number(leaseDeadline)) // the last refusals waited for the deadline
        const stored = await redisB.hgetall('quota:2026-11-20:25')
        expect(stored).toMatchObject({ used: String(limit), rejected: String(16 + leaseUnits) })
        expect(
          Object.entries(stored)
            .filter(([field]) => field.startsWith(LEASE_FIELD_PREFIX))
            .map(([, value]) => value),
        ).toEqual(['-1'])
        await a.close() // its hand-back fails: nothing more is admitted or returned
        expect(await redisB.hget('quota:2026-11-20:25', 'used')).toBe(String(limit))
      },
    )
  })

  // docs/adr/0125-a-quota-write-whose-answer-was-lost-is-learnt-not-guessed.md: Redis runs the write, its reply
  // is held in a TCP proxy until the client's command timeout (500 ms, as the service's) has fired.
  describe('writes whose answer was lost', () => {
    /** A service's connection to the test Redis through a proxy that can hold Redis's replies, and one straight to it. */
    async function heldRedis() {
      const target = new URL(TEST_REDIS_URL!)
      const proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port || 6379) })
      const prefix = testRedisPrefix()
      const admin = (await testRedis(prefix))!
      const redis = new Redis(proxy.via(TEST_REDIS_URL!), redisOptions(prefix))
      redis.on('error', () => {})
      await redis.connect()
      afterAll(async () => {
        redis.disconnect()
        await proxy.close()
      })
      return { proxy, admin, redis }
    }

    test.skipIf(!TEST_REDIS_URL)('failover: a charge, a refund, a claim and a refresh handed back, each run in Redis with its answer lost, count once', async () => {
      const { proxy, admin, redis } = await heldRedis()
      const clock = fakeClock()
      const store = failoverQuotaStore(redis, clock, createLogger('silent'))
      const hash = 'quota:2026-11-20:81'
      /** `write` runs in Redis (seen by `ran`) while its reply is held; it is answered from local counts; then Redis comes back. */
      async function lostAnswer<T>(write: () => Promise<T>, ran: (stored: Record<string, string>) => boolean): Promise<T> {
        proxy.holdReplies()
        const answer = write()
        await eventually(async () => ran(await admin.hgetall(hash)), { what: 'the write run in Redis' })
        const result = await answer
        expect(store.degraded).toBe(true)
        proxy.releaseReplies()
        await clock.advance(PROBE_INTERVAL_MS)
        await eventually(() => !store.degraded, { what: 'the hand-over back to Redis' })
        return result
      }
      try {
        for (let i = 0; i < 3; i++) await charge(store, 81, 1, 5)
        // Admitted in Redis and locally: one unit, not two.
        expect(
          await lostAnswer(
            () => charge(store, 81, 1, 5),
            (stored) => stored.used === '4',
          ),
        ).toEqual({ admitted: true, used: 4 })
        expect(await admin.hgetall(hash)).toEqual({ used: '4', 'k:1': '4' })
        // Refused in Redis and locally: one rejection.
        expect(
          await lostAnswer(
            () => charge(store, 81, 2, 5),
            (stored) => stored.rejected === '1',
          ),
        ).toEqual({ admitted: false, used: 4 })
        // Handed back in Redis: not again by the hand-over.
        await lostAnswer(
          () => store.refund({ accountId: 81, keyId: 1, cost: 1, now: NOON }),
          (stored) => stored.used === '3',
        )
        expect(await admin.hgetall(hash)).toEqual({ used: '3', rejected: '2', 'k:1': '3' })
        // A live refresh claimed in Redis and locally: one.
        expect(
          await lostAnswer(
            () => store.claimLiveRefresh({ accountId: 81, limit: 5, now: NOON }),
            (stored) => stored.live === '1',
          ),
        ).toEqual({ admitted: true, used: 1 })
        expect(await admin.hget(hash, 'live')).toBe('1')
        await lostAnswer(
          () => store.refundLiveRefresh(81, NOON),
          (stored) => stored.live === '0',
        )
        expect(await admin.hgetall(hash)).toEqual({ used: '3', rejected: '2', 'k:1': '3', live: '0' })
        // The quota goes on from the exact count.
        expect(await charge(store, 81, 2, 5)).toEqual({ admitted: true, used: 5 })
      } finally {
        await store.close()
      }
    })

    test.skipIf(!TEST_REDIS_URL)('a lease grant run in Redis with its answer lost gives its units back whole, lapsed or not', async () => {
      const { proxy, admin, redis } = await heldRedis()
      const store = redisQuotaStore(redis, fakeClock())
      const hash = 'quota:2026-11-20:82'
      await charge(store, 82, 1, 100_000)
      const leases = quotaLeases(redis, fakeClock(), writeMarkers(chargingCommands(redis), 'test'), 'test')
      proxy.holdReplies()
      const asked = leases.request(hash, 100_000, 3_600)
      const granted = await eventually(async () => Object.keys(await admin.hgetall(hash)).find((field) => field.startsWith(LEASE_FIELD_PREFIX)), { what: 'the grant run in Redis' })
      expect(Number(await admin.hget(hash, 'used'))).toBeGreaterThan(1)
      await asked
      expect(leases.heldOn(hash)).toBeUndefined() // the node never learnt it held it
      // Lapsed meanwhile: a charge refused by Redis marks it so.
      await admin.hset(hash, granted, LAPSED_LEASE)
      proxy.releaseReplies()
      const back = await eventually(
        async () => {
          await leases.finish().catch(() => {})
          const stored = await admin.hgetall(hash)
          return stored[granted] === undefined && stored
        },
        { what: "the grant's units handed back" },
      )
      expect(back).toEqual({ used: '1', 'k:1': '1' })
      await store.close()
    })
  })

  describe('live refresh allowance', () => {
    const claim = (store: QuotaStore, accountId: number, limit = 200, now = NOON) => store.claimLiveRefresh({ accountId, limit, now })

    for (const [name, makeStore] of stores) {
      test.skipIf(name === 'Redis' && !TEST_REDIS_URL)(
        `${name}: N concurrent claims against R left admit exactly min(N, R); a refund gives one back; requests are apart`,
        async () => {
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
        },
      )
    }

    test.skipIf(!TEST_REDIS_URL)('Redis: a day hash Redis lost is seeded with the stored live refreshes before a claim is judged', async () => {
      const redis = (await testRedis())!
      const store = redisQuotaStore(redis, fakeClock(), undefined, async () => ({ used: 40, rejected: 0, liveRefreshes: 199, complete: true }))
      expect(await claim(store, 41)).toEqual({ admitted: true, used: 200 })
      expect(await claim(store, 41)).toEqual({ admitted: false, used: 200 })
      expect(await redis.hgetall('quota:2026-11-20:41')).toMatchObject({ used: '40', live: '200' })
    })

    test.skipIf(!TEST_REDIS_URL)('failover: claims continue locally from the last count Redis gave, and are handed back', async () => {
      const redis = (await testRedis())!
      const clock = fakeClock()
      const store = failoverQuotaStore(redis, clock, createLogger('silent'))
      try {
        await charge(store, 51)
        for (let i = 0; i < 198; i++) await claim(store, 51)
        await cutOff(redis)
        const local = await Promise.all(Array.from({ length: 5 }, () => claim(store, 51)))
        expect(store.degraded).toBe(true)
        expect(local.filter((result) => result.admitted)).toHaveLength(2)
        expect((await store.read(51, NOON)).liveRefreshes).toBe(200)
        await store.refundLiveRefresh(51, NOON)
        await recovered(redis, store, clock)
        expect(await redis.hget('quota:2026-11-20:51', 'live')).toBe('199')
        expect(await claim(store, 51)).toEqual({ admitted: true, used: 200 })
      } finally {
        store.close()
      }
    })
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
    expect([TIER_POLICY.starter.resolve, TIER_POLICY.pro.resolve, TIER_POLICY.business.resolve].map((r) => r?.maxItems)).toEqual([100, 500, 1000])
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
