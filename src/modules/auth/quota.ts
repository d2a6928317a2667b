import { randomUUID } from 'node:crypto'
import type Redis from 'ioredis'
import { type Clock, type Timer, utcDate, utcDay } from '../../shared/clock'
import type { Logger } from '../../shared/logger'
import { HOT_CHARGES_PER_WINDOW, HOT_WINDOW_MS, LEASE_WAIT_LUA, leaseWorthAsking, quotaLeases } from './quota-leases'

/**
 * Daily quota counters (docs/decisions.md "Quota accounting"): per account and UTC day, the units used, the requests
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

export interface LiveRefreshClaim {
  accountId: number
  /** The tier's live refreshes per day. */
  limit: number
  now: Date
}

export interface QuotaStore {
  /** Atomically: if used + cost ≤ limit, add cost to the account and the key; else count one rejection. */
  charge(charge: Charge): Promise<ChargeResult>
  /**
   * The charge when it can be admitted without waiting (a quota lease or local counters cover it):
   * `used` after it. Undefined, with nothing counted, when it needs Redis or would be refused:
   * `charge` then judges it.
   */
  chargeAtOnce(charge: Charge): number | undefined
  read(accountId: number, now: Date): Promise<DayCounters>
  /**
   * Atomically: if today's live refreshes + 1 ≤ limit, count one (`used` = the count after it);
   * else refuse and count nothing. N concurrent claims against R left admit exactly min(N, R).
   */
  claimLiveRefresh(claim: LiveRefreshClaim): Promise<ChargeResult>
  /** Hands back a claimed live refresh that did not happen (the marketplace failed): it costs nothing. */
  refundLiveRefresh(accountId: number, now: Date): Promise<void>
  /**
   * Hands back an admitted charge whose request was then refused with a 429, and counts the
   * refusal (docs/decisions.md "A 429 never costs a unit"). Nothing on a missing day counter: the
   * seed that recreates it reads the usage recorder, which counts the hand-back too.
   */
  refund(charge: Omit<Charge, 'limit'>): Promise<void>
}

/** The next 00:00 UTC after `now`: when counters reset. */
export function nextUtcMidnight(now: Date): Date {
  return new Date(utcDay(now).end)
}

/** Counters outlive their day by this much, so a late flush or a usage read at 00:00:01 still finds them. */
const RETENTION_AFTER_DAY_S = 3_600

/**
 * Where a day's counters come from when Redis has none: after Redis lost its data, and on each
 * account's first request of a day. `complete` is false when only part of the day could be known
 * (the database could not be read, or was not asked: `readStored` false while it is away): the
 * hash is then provisional and seeded again later.
 */
export type DaySeed = (
  accountId: number,
  day: string,
  readStored: boolean,
) => Promise<{ used: number; rejected: number; liveRefreshes: number; complete: boolean }>

function emptyCounters(): DayCounters {
  return { used: 0, rejected: 0, liveRefreshes: 0, byKey: new Map() }
}

// Atomic in Redis: N concurrent charges against quota Q admit exactly min(N, Q). One call carries
// a batch of charges (see the group commit below; KEYS[i] is charge i's day hash, ARGV holds cost,
// limit and key field per charge); each is checked and counted in order, as if alone, and the
// answer is a flat list of (status, value) pairs: (1, used) admitted, (0, used) refused, (2, ms)
// not judged yet because a live lease of the account may still hand units back (quota-leases.ts):
// asked again after that wait; (3, 0) not judged because the day hash is missing: Redis lost its
// data or the day has just begun, and counting from zero would hand out a fresh quota, so the node
// seeds it (SEED_LUA) and asks again. Status + 4: the hash is provisional (seeded while the
// database was away), so the node seeds it again when it can. An admitted charge is two Redis
// calls: the increment (rolled back when over the limit) and the key's share. Only the seed
// creates the hash, so it alone sets the expiry.
const CHARGE_BATCH_LUA = `${LEASE_WAIT_LUA}
local out = {}
for i, key in ipairs(KEYS) do
  local a = (i - 1) * 3
  local state = redis.call('HMGET', key, 'used', 'unseeded')
  if not state[1] then
    out[#out + 1] = 3
    out[#out + 1] = 0
  else
    local flag = state[2] and 4 or 0
    local cost = tonumber(ARGV[a + 1])
    local used = redis.call('HINCRBY', key, 'used', cost)
    if used <= tonumber(ARGV[a + 2]) then
      redis.call('HINCRBY', key, ARGV[a + 3], cost)
      out[#out + 1] = 1 + flag
      out[#out + 1] = used
    else
      used = redis.call('HINCRBY', key, 'used', -cost)
      local wait = lease_wait(key)
      if wait then
        out[#out + 1] = 2 + flag
        out[#out + 1] = wait
      else
        redis.call('HINCRBY', key, 'rejected', 1)
        out[#out + 1] = 0 + flag
        out[#out + 1] = used
      end
    end
  end
end
return out
`

// KEYS[1] the day hash; ARGV: used, rejected, live refreshes, TTL, and 1 when complete or 0 when
// provisional. Creates the hash only if it is still missing, so concurrent seeds on any number of
// nodes apply once and never drop a charge counted in between. A complete seed of a provisional
// hash keeps the larger of each count: both are lower bounds of the day (the provisional hash
// counted from when it was made, the seed holds what was written before), and adding them would
// count twice whatever was written meanwhile. The TTL is relative (seconds to the end of the day
// by the service's clock), so a clock injected by tests cannot set an expiry already past for Redis.
const SEED_LUA = `
if redis.call('EXISTS', KEYS[1]) == 1 then
  if ARGV[5] == '0' or redis.call('HDEL', KEYS[1], 'unseeded') == 0 then return 0 end
  for j, field in ipairs({ 'used', 'rejected', 'live' }) do
    if tonumber(ARGV[j]) > tonumber(redis.call('HGET', KEYS[1], field) or '0') then redis.call('HSET', KEYS[1], field, ARGV[j]) end
  end
else
  redis.call('HSET', KEYS[1], 'used', ARGV[1])
  if ARGV[2] ~= '0' then redis.call('HSET', KEYS[1], 'rejected', ARGV[2]) end
  if ARGV[3] ~= '0' then redis.call('HSET', KEYS[1], 'live', ARGV[3]) end
  if ARGV[5] == '0' then redis.call('HSET', KEYS[1], 'unseeded', 1) end
end
redis.call('EXPIRE', KEYS[1], ARGV[4])
return 1
`

const ADMITTED = 1
const WAIT = 2
const MISSING = 3
const UNSEEDED = 4
/** While the database is away, a node asks it again this often (one seed at a time), not once per account. */
export const RESEED_INTERVAL_MS = 500
/** A charge told to wait for a lease asks again after this long at most: leases usually end early, when used up. */
export const MAX_LEASE_WAIT_MS = 50

interface QueuedCharge {
  key: string
  accountId: number
  day: string
  ttl: number
  /** Cost, limit and key field: the script's ARGV for this charge. */
  args: [number, number, string]
  resolve(result: ChargeResult): void
  reject(error: unknown): void
}

/** Bounds one script run, so a burst cannot hold Redis for long. */
const MAX_CHARGES_PER_CALL = 256

const dayKey = (accountId: number, day: string) => `quota:${day}:${accountId}`
const KEY_FIELD_PREFIX = 'k:'
const keyField = (keyId: number) => `${KEY_FIELD_PREFIX}${keyId}`

function ttlSeconds(now: Date): number {
  return Math.ceil((utcDay(now).end - now.getTime()) / 1000) + RETENTION_AFTER_DAY_S
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
// A missing hash is left missing: the counts were recorded for the database too, and the seed that
// recreates the hash takes them from there; creating it here would drop the rest of the day.
const ADD_BATCH_LUA = `
if not redis.call('SET', KEYS[1], '1', 'NX', 'EX', ARGV[1]) then return 0 end
for i, fields in ipairs(cjson.decode(ARGV[2])) do
  if redis.call('EXISTS', KEYS[i + 1]) == 1 then
    for field, n in pairs(fields) do
      if n ~= 0 then redis.call('HINCRBY', KEYS[i + 1], field, n) end
    end
    redis.call('EXPIRE', KEYS[i + 1], ARGV[1])
  end
end
return 1
`

// KEYS[1] the day hash; ARGV[1] the live refresh limit. Answers (status, live refreshes) with the
// charge script's statuses: 1 admitted, 0 refused, 3 the hash is missing (seed, then ask again),
// + 4 when the hash is provisional. The request that wants the refresh was charged first, so the
// hash is normally there.
const CLAIM_LIVE_LUA = `
local state = redis.call('HMGET', KEYS[1], 'used', 'unseeded')
if not state[1] then return { 3, 0 } end
local flag = state[2] and 4 or 0
local live = redis.call('HINCRBY', KEYS[1], 'live', 1)
if live <= tonumber(ARGV[1]) then return { 1 + flag, live } end
return { flag, redis.call('HINCRBY', KEYS[1], 'live', -1) }
`

// KEYS[1] the day hash. Never below zero, and never on a missing hash: one seeded since the claim
// took its counts from the database, where only refreshes that happened are recorded.
const REFUND_LIVE_LUA = `
if redis.call('EXISTS', KEYS[1]) == 0 or tonumber(redis.call('HGET', KEYS[1], 'live') or '0') <= 0 then return 0 end
return redis.call('HINCRBY', KEYS[1], 'live', -1)
`

// KEYS[1] the day hash; ARGV: the units, the key's field. Only on an existing hash (see `refund`).
// A quota lease of this node may hold the charge's units: they are in `used` already, and its
// hand-back adds its per-key counts, this one included, so taking them off here is exact.
const REFUND_CHARGE_LUA = `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HINCRBY', KEYS[1], 'used', -tonumber(ARGV[1]))
redis.call('HINCRBY', KEYS[1], ARGV[2], -tonumber(ARGV[1]))
redis.call('HINCRBY', KEYS[1], 'rejected', 1)
return 1
`

type ChargingRedis = Redis & {
  tcgRefundCharge(numberOfKeys: 1, key: string, cost: number, keyField: string): Promise<number>
  tcgClaimLiveRefresh(numberOfKeys: 1, key: string, limit: number): Promise<[number, number]>
  tcgRefundLiveRefresh(numberOfKeys: 1, key: string): Promise<number>
  tcgChargeQuotaBatch(numberOfKeys: number, ...keysThenArgs: (string | number)[]): Promise<number[]>
  tcgAddQuotaBatch(numberOfKeys: number, ...keysThenArgs: (string | number)[]): Promise<number>
  tcgSeedQuotaDay(numberOfKeys: 1, key: string, used: number, rejected: number, live: number, ttl: number, complete: 0 | 1): Promise<number>
}

/** A day's counters per account: what local counting hands back to Redis. */
export type DayCountsByAccount = Map<number, DayCounters>

type SeedTotals = Awaited<ReturnType<DaySeed>>

/**
 * Seeds of missing day counters, for either store (docs/decisions.md "Quota recovery"): one seed of
 * a counter at a time, every charge and read that found it missing waiting for that one. Once a
 * seed finds the database away, the next ones do not wait for it (a request would stall for its
 * connect timeout): they seed provisionally from what the node knows, and one seed at a time asks
 * the database again every RESEED_INTERVAL_MS until it answers. Without `seed` a day starts from zero.
 */
function daySeeder(seed: DaySeed | undefined, clock: Clock) {
  const seeding = new Map<string, Promise<void>>()
  let storedAwayUntil = 0
  let probing = false
  const storedAway = () => storedAwayUntil > 0 && (probing || clock.monotonic() < storedAwayUntil)
  /** `apply` stores the totals in counter `key`: creating it when missing, raising it when provisional. */
  const seedOnce = (key: string, accountId: number, day: string, apply: (totals: SeedTotals) => unknown) => {
    let seeded = seeding.get(key)
    if (!seeded) {
      seeded = (async () => {
        const readStored = !storedAway()
        const probe = readStored && storedAwayUntil > 0
        if (probe) probing = true
        try {
          const totals = seed ? await seed(accountId, day, readStored) : { used: 0, rejected: 0, liveRefreshes: 0, complete: true }
          if (readStored) storedAwayUntil = totals.complete ? 0 : clock.monotonic() + RESEED_INTERVAL_MS
          await apply(totals)
        } finally {
          if (probe) probing = false
        }
      })().finally(() => seeding.delete(key))
      seeding.set(key, seeded)
    }
    return seeded
  }
  return {
    seed: seedOnce,
    /** Seeds a provisional counter again in the background, unless the database is known away; its charges go on meanwhile. */
    reseed(key: string, accountId: number, day: string, apply: (totals: SeedTotals) => unknown) {
      if (seeding.has(key) || storedAway()) return
      // Only storing the seed can fail here (Redis), and the charges that follow report it.
      seedOnce(key, accountId, day, apply).catch(() => {})
    },
  }
}

/**
 * `seed` gives a missing day hash its counts; without one (tests of the store alone) it starts from
 * zero. `clock` times the hot window, leases, lease waits and reseeds.
 */
export function redisQuotaStore(redis: Redis, clock: Clock, logger?: Logger, seed?: DaySeed): QuotaStore & {
  add(batchId: string, day: string, counts: DayCountsByAccount, now: Date): Promise<void>
  /** Hands back the quota leases this node holds (on shutdown). */
  close(): Promise<void>
} {
  const client = redis as ChargingRedis
  if (typeof client.tcgChargeQuotaBatch !== 'function') {
    client.defineCommand('tcgChargeQuotaBatch', { lua: CHARGE_BATCH_LUA })
    client.defineCommand('tcgAddQuotaBatch', { lua: ADD_BATCH_LUA })
    client.defineCommand('tcgSeedQuotaDay', { lua: SEED_LUA })
    client.defineCommand('tcgClaimLiveRefresh', { lua: CLAIM_LIVE_LUA })
    client.defineCommand('tcgRefundLiveRefresh', { lua: REFUND_LIVE_LUA })
    client.defineCommand('tcgRefundCharge', { lua: REFUND_CHARGE_LUA })
  }
  const leases = quotaLeases(redis, clock, logger)
  // Group commit: at most one charge call is in flight; charges made meanwhile wait for it and go
  // together in the next call (and those of one event-loop turn always go together). Each request
  // still waits for one script run that carries its charge. Why: per command, the client's
  // parsing, timer and promise and Redis's script run and socket work cost more than the rest of
  // the key guard, so under load fewer, larger calls are what keeps the guard cheap
  // (docs/decisions.md, "Group commit of charges"); when idle, a charge goes at the end of its own
  // turn. An account with HOT_CHARGES_PER_WINDOW admitted charges within HOT_WINDOW_MS, and enough
  // left, is charged often enough to lease its quota (quota-leases.ts); one refused over its quota
  // never asks.
  let queue: QueuedCharge[] = []
  /** Admitted charges per day hash since `recentSince` (a tumbling window): who is hot. */
  const recent = new Map<string, number>()
  let recentSince = 0
  let sending = false
  let scheduled = false
  /** Charges of accounts whose lease request is out, held until it is answered (see `leases.request`). */
  const parked = new Map<string, { charges: QueuedCharge[]; answered: Promise<void> }>()
  /** The account's `used` when this node's lease covers the charge; not while a lease request is out. */
  const fromLease = (key: string, field: string, cost: number, limit: number) =>
    parked.has(key) ? undefined : leases.take(key, field, cost, limit)
  /** Held with its account's charges while a lease request is out, else into Redis's next call. */
  const send = (queued: QueuedCharge) => {
    const waiting = parked.get(queued.key)
    if (waiting) return void waiting.charges.push(queued)
    queue.push(queued)
    if (!sending && !scheduled) {
      scheduled = true
      setImmediate(sendQueued)
    }
  }
  const dispatch = (queued: QueuedCharge) => {
    const [cost, limit, field] = queued.args
    const used = fromLease(queued.key, field, cost, limit)
    if (used === undefined) send(queued)
    else queued.resolve({ admitted: true, used })
  }
  const requestLease = (key: string, limit: number, ttl: number) => {
    if (parked.has(key) || leases.heldOn(key)) return
    const charges: QueuedCharge[] = []
    // Charges queued for the next call would reach Redis after the grant: they wait with the others.
    queue = queue.filter((queued) => queued.key !== key || (charges.push(queued), false))
    const answered = leases.request(key, limit, ttl).finally(() => {
      parked.delete(key)
      charges.forEach(dispatch)
    })
    parked.set(key, { charges, answered })
  }
  const seeder = daySeeder(seed, clock)
  /** Creates a missing day hash, or raises a provisional one to a complete seed (SEED_LUA). */
  const applySeed = (key: string, ttl: number) => (totals: SeedTotals) =>
    client.tcgSeedQuotaDay(1, key, totals.used, totals.rejected, totals.liveRefreshes, ttl, totals.complete ? 1 : 0)
  const seedDay = (key: string, accountId: number, day: string, ttl: number) => seeder.seed(key, accountId, day, applySeed(key, ttl))
  const reseed = (key: string, accountId: number, day: string, ttl: number) => seeder.reseed(key, accountId, day, applySeed(key, ttl))
  const sendQueued = () => {
    scheduled = false
    if (sending || queue.length === 0) return
    const batch = queue.length <= MAX_CHARGES_PER_CALL ? queue : queue.slice(0, MAX_CHARGES_PER_CALL)
    queue = batch === queue ? [] : queue.slice(MAX_CHARGES_PER_CALL)
    const keys: string[] = []
    const args: (string | number)[] = []
    for (const queued of batch) {
      keys.push(queued.key)
      args.push(...queued.args)
    }
    sending = true
    client
      .tcgChargeQuotaBatch(keys.length, ...keys, ...args)
      .then(
        (pairs) => {
          // Per account: its last admitted charge in this call, to see if it is worth a lease.
          const admitted = new Map<string, { used: number; queued: QueuedCharge }>()
          const now = clock.monotonic()
          if (now - recentSince >= HOT_WINDOW_MS) {
            recent.clear()
            recentSince = now
          }
          batch.forEach((queued, i) => {
            const [flagged, value] = [pairs[2 * i]!, pairs[2 * i + 1]!]
            if (flagged === MISSING) {
              return void seedDay(queued.key, queued.accountId, queued.day, queued.ttl).then(() => dispatch(queued), queued.reject)
            }
            if (flagged & UNSEEDED) reseed(queued.key, queued.accountId, queued.day, queued.ttl)
            const status = flagged & ~UNSEEDED
            if (status === WAIT) return void clock.after(Math.min(value, MAX_LEASE_WAIT_MS), () => dispatch(queued))
            queued.resolve({ admitted: status === ADMITTED, used: value })
            if (status !== ADMITTED) return
            recent.set(queued.key, (recent.get(queued.key) ?? 0) + 1)
            admitted.set(queued.key, { used: value, queued })
          })
          for (const [key, { used, queued }] of admitted) {
            const [, limit] = queued.args
            if (recent.get(key)! >= HOT_CHARGES_PER_WINDOW && leaseWorthAsking(used, limit)) requestLease(key, limit, queued.ttl)
          }
        },
        (error) => batch.forEach((queued) => queued.reject(error)),
      )
      .finally(() => {
        sending = false
        sendQueued()
      })
  }
  return {
    charge({ accountId, keyId, cost, limit, now }) {
      const day = utcDate(now)
      const key = dayKey(accountId, day)
      const field = keyField(keyId)
      const used = fromLease(key, field, cost, limit)
      if (used !== undefined) return Promise.resolve({ admitted: true, used })
      return new Promise<ChargeResult>((resolve, reject) =>
        send({ key, accountId, day, ttl: ttlSeconds(now), args: [cost, limit, field], resolve, reject }),
      )
    },
    chargeAtOnce: ({ accountId, keyId, cost, limit, now }) => fromLease(dayKey(accountId, utcDate(now)), keyField(keyId), cost, limit),
    async read(accountId, now) {
      const day = utcDate(now)
      const key = dayKey(accountId, day)
      await parked.get(key)?.answered // a lease granted meanwhile is in `used` and must be known here
      let hash = await client.hgetall(key)
      if (hash.used === undefined) {
        await seedDay(key, accountId, day, ttlSeconds(now))
        hash = await client.hgetall(key)
      } else if (hash.unseeded !== undefined) reseed(key, accountId, day, ttlSeconds(now))
      const counters = parseCounters(hash)
      // This node's live lease: its unused units are not used yet, its admissions not yet in Redis.
      const lease = leases.heldOn(key)
      if (lease) {
        counters.used -= lease.unused
        for (const [field, units] of lease.byKeyField) {
          const keyId = Number(field.slice(KEY_FIELD_PREFIX.length))
          counters.byKey.set(keyId, (counters.byKey.get(keyId) ?? 0) + units)
        }
      }
      return counters
    },
    async claimLiveRefresh({ accountId, limit, now }) {
      const day = utcDate(now)
      const key = dayKey(accountId, day)
      for (let attempt = 0; ; attempt++) {
        const [flagged, live] = await client.tcgClaimLiveRefresh(1, key, limit)
        if (flagged === MISSING && attempt < 3) {
          await seedDay(key, accountId, day, ttlSeconds(now))
          continue
        }
        if (flagged === MISSING) throw new Error(`quota day hash ${key} vanished while a live refresh was claimed`)
        if (flagged & UNSEEDED) reseed(key, accountId, day, ttlSeconds(now))
        return { admitted: (flagged & ~UNSEEDED) === ADMITTED, used: live }
      }
    },
    async refundLiveRefresh(accountId, now) {
      await client.tcgRefundLiveRefresh(1, dayKey(accountId, utcDate(now)))
    },
    async refund({ accountId, keyId, cost, now }) {
      await client.tcgRefundCharge(1, dayKey(accountId, utcDate(now)), cost, keyField(keyId))
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
    close: () => leases.settleAll(),
  }
}

/**
 * Counters in this process: exact for one node; used when Redis is not configured or is away. With
 * `seeding` (embedded mode, no Redis) an account's day starts from what the database and the usage
 * recorder hold of it, as a Redis hash does (docs/decisions.md "Quota recovery"), so a restart does
 * not hand the day out again; without it (local counting while Redis is away) it starts from zero.
 */
export function memoryQuotaStore(seeding?: { seed: DaySeed; clock: Clock }) {
  let day = ''
  let accounts = new Map<number, DayCounters>()
  /** Accounts of `day` seeded while the database was away: seeded again when it answers. */
  let provisional = new Set<number>()
  const seeder = seeding && daySeeder(seeding.seed, seeding.clock)
  const accountsOn = (today: string) => {
    if (today !== day) {
      // A new UTC day: yesterday's counters are gone, as Redis would expire them.
      day = today
      accounts = new Map()
      provisional = new Set()
    }
    return accounts
  }
  /** Stores a seed: creates the account's counters, or raises provisional ones to a complete seed. */
  const applySeed = (accountId: number, today: string) => (totals: SeedTotals) => {
    const counters = accountsOn(today).get(accountId)
    if (!counters) {
      accounts.set(accountId, { used: totals.used, rejected: totals.rejected, liveRefreshes: totals.liveRefreshes, byKey: new Map() })
      if (!totals.complete) provisional.add(accountId)
    } else if (totals.complete && provisional.delete(accountId)) {
      // Both are lower bounds of the day: the larger of each, as SEED_LUA keeps them.
      counters.used = Math.max(counters.used, totals.used)
      counters.rejected = Math.max(counters.rejected, totals.rejected)
      counters.liveRefreshes = Math.max(counters.liveRefreshes, totals.liveRefreshes)
    }
  }
  /**
   * The account's counters of the day, at once. With a seed they are missing until seeded (see
   * `seeded`); without one they are created empty, so the failover store's local counting never
   * waits between its baseline and its count.
   */
  const countersFor = (accountId: number, now: Date): DayCounters | undefined => {
    const today = utcDate(now)
    let counters = accountsOn(today).get(accountId)
    if (!seeder) {
      if (!counters) accounts.set(accountId, (counters = emptyCounters()))
    } else if (provisional.has(accountId)) seeder.reseed(dayKey(accountId, today), accountId, today, applySeed(accountId, today))
    return counters
  }
  /** Seeds the account's day, then its counters. */
  const seeded = async (accountId: number, now: Date): Promise<DayCounters> => {
    const today = utcDate(now)
    for (;;) {
      await seeder!.seed(dayKey(accountId, today), accountId, today, applySeed(accountId, today))
      // Missing again only when another day's request started that day over meanwhile.
      const counters = countersFor(accountId, now)
      if (counters) return counters
    }
  }
  const chargeAtOnce = ({ accountId, keyId, cost, limit, now }: Charge): number | undefined => {
    const counters = countersFor(accountId, now)
    if (!counters || counters.used + cost > limit) return undefined
    counters.used += cost
    counters.byKey.set(keyId, (counters.byKey.get(keyId) ?? 0) + cost)
    return counters.used
  }
  return {
    async charge(charge: Charge): Promise<ChargeResult> {
      const counters = countersFor(charge.accountId, charge.now) ?? (await seeded(charge.accountId, charge.now))
      const used = chargeAtOnce(charge)
      if (used !== undefined) return { admitted: true, used }
      counters.rejected += 1
      return { admitted: false, used: counters.used }
    },
    chargeAtOnce,
    async read(accountId: number, now: Date): Promise<DayCounters> {
      const counters = countersFor(accountId, now) ?? (await seeded(accountId, now))
      return { ...counters, byKey: new Map(counters.byKey) }
    },
    async claimLiveRefresh({ accountId, limit, now }: LiveRefreshClaim): Promise<ChargeResult> {
      const counters = countersFor(accountId, now) ?? (await seeded(accountId, now))
      if (counters.liveRefreshes + 1 > limit) return { admitted: false, used: counters.liveRefreshes }
      counters.liveRefreshes += 1
      return { admitted: true, used: counters.liveRefreshes }
    },
    // While degraded a refund may follow a claim Redis counted: the local count then goes below
    // zero, which is what the hand-over must add to Redis. Seeded counters, like a Redis hash, are
    // never refunded below zero nor when missing: a seed counts only refreshes that happened.
    async refundLiveRefresh(accountId: number, now: Date): Promise<void> {
      const counters = countersFor(accountId, now)
      if (counters && (!seeder || counters.liveRefreshes > 0)) counters.liveRefreshes -= 1
    },
    // Local counting while Redis is away may go below zero here (the charge was Redis's): the
    // hand-over adds that to Redis, as it does a live refresh refunded.
    async refund({ accountId, keyId, cost, now }: Omit<Charge, 'limit'>): Promise<void> {
      const counters = countersFor(accountId, now)
      if (!counters) return
      counters.used -= cost
      counters.byKey.set(keyId, (counters.byKey.get(keyId) ?? 0) - cost)
      counters.rejected += 1
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
  /** Stops probing and hands back the quota leases held. */
  close(): Promise<void>
}

export const PROBE_INTERVAL_MS = 1_000

/**
 * Redis first; when a Redis call fails, this node serves on local counters (never a 500), logs it,
 * reports `degraded`, and probes Redis every second. Local counting starts from the last usage Redis
 * reported for the account, so an outage does not hand out a fresh quota; when Redis answers again
 * the counts taken meanwhile are added to it and Redis is authoritative again.
 */
export function failoverQuotaStore(redis: Redis, clock: Clock, logger: Logger, seed?: DaySeed): FailoverQuotaStore {
  const primary = redisQuotaStore(redis, clock, logger, seed)
  const local = memoryQuotaStore()
  /** The last `used` and live refresh count Redis reported per account, for today only. */
  let lastSeen = new Map<number, { used: number; live: number }>()
  let lastSeenDay = ''
  let degraded = false
  let probe: Timer | undefined

  /** The baseline map for `day`; a baseline from another day is stale and starts over. */
  const lastSeenOn = (day: string) => {
    if (day !== lastSeenDay) {
      lastSeenDay = day
      lastSeen = new Map()
    }
    return lastSeen
  }
  const seenOf = (accountId: number, now: Date) => {
    const seen = lastSeenOn(utcDate(now))
    let counts = seen.get(accountId)
    if (!counts) seen.set(accountId, (counts = { used: 0, live: 0 }))
    return counts
  }
  const remember = (accountId: number, now: Date, used: number) => void (seenOf(accountId, now).used = used)
  const rememberLive = (accountId: number, now: Date, live: number) => void (seenOf(accountId, now).live = live)
  const baseline = (accountId: number, now: Date) => (utcDate(now) === lastSeenDay ? (lastSeen.get(accountId)?.used ?? 0) : 0)
  const liveBaseline = (accountId: number, now: Date) => (utcDate(now) === lastSeenDay ? (lastSeen.get(accountId)?.live ?? 0) : 0)

  /** Moves drained counts into the baseline local counting is measured against. */
  const shiftBaseline = (day: string, counts: DayCountsByAccount) => {
    const seen = lastSeenOn(day)
    for (const [accountId, delta] of counts) {
      const before = seen.get(accountId) ?? { used: 0, live: 0 }
      seen.set(accountId, { used: before.used + delta.used, live: before.live + delta.liveRefreshes })
    }
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
        await primary.add(handOver.id, handOver.day, handOver.counts, clock.now())
        handOver = undefined
      }
      probe?.cancel()
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
    probe = clock.every(PROBE_INTERVAL_MS, () => void recover(), { unref: true })
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
    chargeAtOnce(charge) {
      if (!degraded) {
        const used = primary.chargeAtOnce(charge)
        if (used !== undefined) remember(charge.accountId, charge.now, used)
        return used
      }
      const base = baseline(charge.accountId, charge.now)
      const used = local.chargeAtOnce({ ...charge, limit: charge.limit - base })
      return used === undefined ? undefined : used + base
    },
    async read(accountId, now) {
      if (!degraded) {
        try {
          const counters = await primary.read(accountId, now)
          remember(accountId, now, counters.used)
          rememberLive(accountId, now, counters.liveRefreshes)
          return counters
        } catch (error) {
          degrade(error)
        }
      }
      const counters = await local.read(accountId, now)
      return { ...counters, used: counters.used + baseline(accountId, now), liveRefreshes: counters.liveRefreshes + liveBaseline(accountId, now) }
    },
    async claimLiveRefresh(claim) {
      if (!degraded) {
        try {
          const result = await primary.claimLiveRefresh(claim)
          rememberLive(claim.accountId, claim.now, result.used)
          return result
        } catch (error) {
          degrade(error)
        }
      }
      const base = liveBaseline(claim.accountId, claim.now)
      const result = await local.claimLiveRefresh({ ...claim, limit: claim.limit - base })
      return { admitted: result.admitted, used: result.used + base }
    },
    async refundLiveRefresh(accountId, now) {
      if (!degraded) {
        try {
          return await primary.refundLiveRefresh(accountId, now)
        } catch (error) {
          degrade(error)
        }
      }
      await local.refundLiveRefresh(accountId, now)
    },
    async refund(charge) {
      if (!degraded) {
        try {
          return await primary.refund(charge)
        } catch (error) {
          degrade(error)
        }
      }
      await local.refund(charge)
    },
    async close() {
      probe?.cancel()
      await primary.close()
    },
  }
}
