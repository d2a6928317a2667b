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
const keyField = (keyId: number) => `k:${keyId}`

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
    else if (field.startsWith('k:')) counters.byKey.set(Number(field.slice(2)), n)
  }
  return counters
}

type ChargingRedis = Redis & {
  tcgChargeQuota(key: string, cost: number, limit: number, ttl: number, keyField: string): Promise<[number, number]>
}

export function redisQuotaStore(redis: Redis): QuotaStore & { addCounters(accountId: number, day: string, delta: DayCounters, now: Date): Promise<void> } {
  const client = redis as ChargingRedis
  if (typeof client.tcgChargeQuota !== 'function') client.defineCommand('tcgChargeQuota', { numberOfKeys: 1, lua: CHARGE_LUA })
  return {
    async charge({ accountId, keyId, cost, limit, now }) {
      const [admitted, used] = await client.tcgChargeQuota(dayKey(accountId, utcDate(now)), cost, limit, ttlSeconds(now), keyField(keyId))
      return { admitted: admitted === 1, used }
    },
    async read(accountId, now) {
      return parseCounters(await client.hgetall(dayKey(accountId, utcDate(now))))
    },
    /** Adds counts taken elsewhere (on local counters while Redis was away) to a day's counters. */
    async addCounters(accountId, day, delta, now) {
      const key = dayKey(accountId, day)
      const multi = client.multi()
      if (delta.used) multi.hincrby(key, 'used', delta.used)
      if (delta.rejected) multi.hincrby(key, 'rejected', delta.rejected)
      if (delta.liveRefreshes) multi.hincrby(key, 'live', delta.liveRefreshes)
      for (const [keyId, units] of delta.byKey) multi.hincrby(key, keyField(keyId), units)
      multi.expire(key, ttlSeconds(now))
      await multi.exec()
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
    drain(): { day: string; accounts: Map<number, DayCounters> } {
      const drained = { day, accounts }
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

  const remember = (accountId: number, now: Date, used: number) => {
    const today = utcDate(now)
    if (today !== lastSeenDay) {
      lastSeenDay = today
      lastSeen = new Map()
    }
    lastSeen.set(accountId, used)
  }
  const baseline = (accountId: number, now: Date) => (utcDate(now) === lastSeenDay ? (lastSeen.get(accountId) ?? 0) : 0)

  async function recover() {
    try {
      await redis.ping()
      const { day, accounts } = local.drain()
      const now = new Date()
      await Promise.all([...accounts].map(([accountId, delta]) => primary.addCounters(accountId, day, delta, now)))
      clearInterval(probe)
      probe = undefined
      degraded = false
      logger.info({ accounts: accounts.size }, 'redis is back: quota counters are shared again')
    } catch {
      // Still away; the next probe tries again.
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
