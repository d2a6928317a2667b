import { randomUUID } from 'node:crypto'
import type Redis from 'ioredis'
import { utcDate } from '../../shared/clock'
import type { Logger } from '../../shared/logger'

/**
 * Daily quota counters (DESIGN decision 5): per account and UTC day, the units used, the requests
 * refused over quota, live refreshes, and units per key. Keys of the day vanish a while after it ends.
 */
export interface DayCounters {
  used: number
  rejected: number
  liveRefreshes: number
  /** Units charged today per key id. */
  byKey: Map<number, number>
}

export interface Charge {
  accountId: number
  keyId: number
  cost: number
  limit: number
  now: Date
}

export interface ChargeResult {
  admitted: boolean
  /** Units used today after this charge (unchanged when refused). */
  used: number
}

export interface QuotaStore {
  /** Atomically: if used + cost ≤ limit, add cost to the account and the key; else count one rejection. */
  charge(charge: Charge): Promise<ChargeResult>
  read(accountId: number, now: Date): Promise<DayCounters>
}

/** The next 00:00 UTC after `now`: when counters reset. */
export function nextUtcMidnight(now: Date): Date {
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1))
}

/** Counters outlive their day by this much, so a late flush or a usage read at 00:00:01 still finds them. */
const RETENTION_AFTER_DAY_S = 3_600

function emptyCounters(): DayCounters {
  return { used: 0, rejected: 0, liveRefreshes: 0, byKey: new Map() }
}

// One round trip, atomic in Redis: N concurrent charges against quota Q admit exactly min(N, Q).
// The TTL is relative (seconds to the end of the day by the service's clock), so a clock injected
// by tests cannot set an expiry that is already in the past for Redis.
const CHARGE_LUA = `
local used = tonumber(redis.call('HGET', KEYS[1], 'used') or '0')
local cost = tonumber(ARGV[1])
if used + cost > tonumber(ARGV[2]) then
  redis.call('HINCRBY', KEYS[1], 'rejected', 1)
  redis.call('EXPIRE', KEYS[1], ARGV[3])
  return {0, used}
end
used = redis.call('HINCRBY', KEYS[1], 'used', cost)
redis.call('HINCRBY', KEYS[1], ARGV[4], cost)
redis.call('EXPIRE', KEYS[1], ARGV[3])
return {1, used}
`

const dayKey = (accountId: number, day: string) => `quota:${day}:${accountId}`
const KEY_FIELD_PREFIX = 'k:'
const keyField = (keyId: number) => `${KEY_FIELD_PREFIX}${keyId}`

function ttlSeconds(now: Date): number {
  return Math.ceil((nextUtcMidnight(now).getTime() - now.getTime()) / 1000) + RETENTION_AFTER_DAY_S
}

function parseCounters(hash: Record<string, string>): DayCounters {
  const counters = emptyCounters()
  for (const [field, value] of Object.entries(hash)) {
    const n = Number(value)
    if (field === 'used') counters.used = n
    else if (field === 'rejected') counters.rejected = n
    else if (field === 'live') counters.liveRefreshes = n
    else if (field.startsWith(KEY_FIELD_PREFIX)) counters.byKey.set(Number(field.slice(KEY_FIELD_PREFIX.length)), n)
  }
  return counters
}

// KEYS[1] marks the batch as applied; KEYS[2..] are the day hashes, ARGV[2] their increments.
const ADD_BATCH_LUA = `
if not redis.call('SET', KEYS[1], '1', 'NX', 'EX', ARGV[1]) then return 0 end
for i, fields in ipairs(cjson.decode(ARGV[2])) do
  for field, n in pairs(fields) do
    if n ~= 0 then redis.call('HINCRBY', KEYS[i + 1], field, n) end
  end
  redis.call('EXPIRE', KEYS[i + 1], ARGV[1])
end
return 1
`

type ChargingRedis = Redis & {
  tcgChargeQuota(key: string, cost: number, limit: number, ttl: number, keyField: string): Promise<[number, number]>
  tcgAddQuotaBatch(numberOfKeys: number, ...keysThenArgs: (string | number)[]): Promise<number>
}

/** A day's counters per account: what local counting hands back to Redis. */
export type DayCountsByAccount = Map<number, DayCounters>

export function redisQuotaStore(redis: Redis): QuotaStore & {
  add(batchId: string, day: string, counts: DayCountsByAccount, now: Date): Promise<void>
} {
  const client = redis as ChargingRedis
  if (typeof client.tcgChargeQuota !== 'function') {
    client.defineCommand('tcgChargeQuota', { numberOfKeys: 1, lua: CHARGE_LUA })
    client.defineCommand('tcgAddQuotaBatch', { lua: ADD_BATCH_LUA })
  }
  return {
    async charge({ accountId, keyId, cost, limit, now }) {
      const [admitted, used] = await client.tcgChargeQuota(dayKey(accountId, utcDate(now)), cost, limit, ttlSeconds(now), keyField(keyId))
      return { admitted: admitted === 1, used }
    },
    async read(accountId, now) {
      return parseCounters(await client.hgetall(dayKey(accountId, utcDate(now))))
    },
    /**
     * Adds counts taken elsewhere (locally, while Redis was away), every account at once. `batchId`
     * makes it apply at most once: a hand-over that timed out may still have run, and its retry
     * (same id) must not count it twice.
     */
    async add(batchId, day, counts, now) {
      const keys = [...counts.keys()].map((accountId) => dayKey(accountId, day))
      const increments = [...counts.values()].map((delta) => {
        const fields: Record<string, number> = { used: delta.used, rejected: delta.rejected, live: delta.liveRefreshes }
        for (const [keyId, units] of delta.byKey) fields[keyField(keyId)] = units
        return fields
      })
      await client.tcgAddQuotaBatch(keys.length + 1, `quota-batch:${batchId}`, ...keys, ttlSeconds(now), JSON.stringify(increments))
    },
  }
}

/** Counters in this process: exact for one node; used when Redis is not configured or is away. */
export function memoryQuotaStore() {
  let day = ''
  let accounts = new Map<number, DayCounters>()
  const countersFor = (accountId: number, now: Date) => {
    const today = utcDate(now)
    if (today !== day) {
      // A new UTC day: yesterday's counters are gone, as Redis would expire them.
      day = today
      accounts = new Map()
    }
    let counters = accounts.get(accountId)
    if (!counters) accounts.set(accountId, (counters = emptyCounters()))
    return counters
  }
  return {
    async charge({ accountId, keyId, cost, limit, now }: Charge): Promise<ChargeResult> {
      const counters = countersFor(accountId, now)
      if (counters.used + cost > limit) {
        counters.rejected += 1
        return { admitted: false, used: counters.used }
      }
      counters.used += cost
      counters.byKey.set(keyId, (counters.byKey.get(keyId) ?? 0) + cost)
      return { admitted: true, used: counters.used }
    },
    async read(accountId: number, now: Date): Promise<DayCounters> {
      const counters = countersFor(accountId, now)
      return { ...counters, byKey: new Map(counters.byKey) }
    },
    /** Everything counted today, then forgotten: the hand-over back to Redis. */
    drain(): { day: string; counts: DayCountsByAccount } {
      const drained = { day, counts: accounts }
      accounts = new Map()
      return drained
    },
  } satisfies QuotaStore & Record<string, unknown>
}

export interface FailoverQuotaStore extends QuotaStore {
  /** True while Redis is away and this node counts on its own. */
  readonly degraded: boolean
  close(): void
}

const PROBE_INTERVAL_MS = 1_000

/**
 * Redis first; when a Redis call fails, this node serves on local counters (never a 500), logs it,
 * reports `degraded`, and probes Redis every second. Local counting starts from the last usage Redis
 * reported for the account, so an outage does not hand out a fresh quota; when Redis answers again
 * the counts taken meanwhile are added to it and Redis is authoritative again.
 */
export function failoverQuotaStore(redis: Redis, logger: Logger): FailoverQuotaStore {
  const primary = redisQuotaStore(redis)
  const local = memoryQuotaStore()
  /** The last `used` Redis reported per account, for today only. */
  let lastSeen = new Map<number, number>()
  let lastSeenDay = ''
  let degraded = false
  let probe: ReturnType<typeof setInterval> | undefined

  /** The baseline map for `day`; a baseline from another day is stale and starts over. */
  const lastSeenOn = (day: string) => {
    if (day !== lastSeenDay) {
      lastSeenDay = day
      lastSeen = new Map()
    }
    return lastSeen
  }
  const remember = (accountId: number, now: Date, used: number) => lastSeenOn(utcDate(now)).set(accountId, used)
  const baseline = (accountId: number, now: Date) => (utcDate(now) === lastSeenDay ? (lastSeen.get(accountId) ?? 0) : 0)

  /** Moves drained counts into the baseline local counting is measured against. */
  const shiftBaseline = (day: string, counts: DayCountsByAccount) => {
    const seen = lastSeenOn(day)
    for (const [accountId, delta] of counts) seen.set(accountId, (seen.get(accountId) ?? 0) + delta.used)
  }

  /** Counts drained from the local store and not yet confirmed in Redis, under one batch id. */
  let handOver: { id: string; day: string; counts: DayCountsByAccount } | undefined
  let recovering = false

  async function recover() {
    if (recovering) return
    recovering = true
    try {
      await redis.ping()
      // Hand over what was counted locally. Charges keep landing on the local counters meanwhile,
      // measured against a baseline that includes the batch in flight, so none is over-admitted;
      // the loop hands those over too, and the switch back to Redis happens in the same tick as
      // the check that nothing is left. A failed hand-over is retried with the same batch id.
      for (;;) {
        if (!handOver) {
          const { day, counts } = local.drain()
          if (counts.size === 0) break
          handOver = { id: randomUUID(), day, counts }
          shiftBaseline(day, counts)
        }
        await primary.add(handOver.id, handOver.day, handOver.counts, new Date())
        handOver = undefined
      }
      clearInterval(probe)
      probe = undefined
      degraded = false
      logger.info('redis is back: quota counters are shared again')
    } catch {
      // Still away, or failed again during the hand-over: the next probe tries again.
    } finally {
      recovering = false
    }
  }

  function degrade(error: unknown) {
    if (degraded) return
    degraded = true
    logger.error({ err: error }, 'redis failed: quotas are counted on this node only (degraded) until it returns')
    probe = setInterval(() => void recover(), PROBE_INTERVAL_MS)
    probe.unref?.()
  }

  return {
    get degraded() {
      return degraded
    },
    async charge(charge) {
      if (!degraded) {
        try {
          const result = await primary.charge(charge)
          remember(charge.accountId, charge.now, result.used)
          return result
        } catch (error) {
          degrade(error)
        }
      }
      const base = baseline(charge.accountId, charge.now)
      const result = await local.charge({ ...charge, limit: charge.limit - base })
      return { admitted: result.admitted, used: result.used + base }
    },
    async read(accountId, now) {
      if (!degraded) {
        try {
          const counters = await primary.read(accountId, now)
          remember(accountId, now, counters.used)
          return counters
        } catch (error) {
          degrade(error)
        }
      }
      const counters = await local.read(accountId, now)
      return { ...counters, used: counters.used + baseline(accountId, now) }
    },
    close() {
      clearInterval(probe)
    },
  }
}
