import type Redis from 'ioredis'
import { type Clock, utcDate } from '../../../shared/clock'
import type { Logger } from '../../../shared/logger'
import { chargingCommands } from './commands'
import { dayKey, ttlSeconds } from './day'
import { FIELD, keyField, keyIdOfField, parseCounters } from './fields'
import { groupCommit } from './group-commit'
import { quotaLeases } from './leases'
import { daySeeder } from './seeding'
import { ADMITTED, MISSING, UNSEEDED } from './status'
import type { ChargeResult, DayCountsByAccount, DaySeed, QuotaStore, SeedTotals } from './types'

/**
 * Counters shared by every node, in one Redis hash per account and UTC day (lua.ts). `seed` gives a
 * missing day hash its counts; without one (tests of the store alone) it starts from zero. `clock`
 * times the hot window, leases, lease waits and reseeds.
 */
export function redisQuotaStore(
  redis: Redis,
  clock: Clock,
  logger?: Logger,
  seed?: DaySeed,
): QuotaStore & {
  add(batchId: string, day: string, counts: DayCountsByAccount, now: Date): Promise<void>
  /** Hands back the quota leases this node holds (on shutdown). */
  close(): Promise<void>
} {
  const client = chargingCommands(redis)
  const leases = quotaLeases(redis, clock, logger)
  const seeder = daySeeder(seed, clock)
  /** Creates a missing day hash, or raises a provisional one to a complete seed (SEED_LUA). */
  const applySeed = (key: string, ttl: number) => (totals: SeedTotals) =>
    client.tcgSeedQuotaDay(1, key, totals.used, totals.rejected, totals.liveRefreshes, ttl, totals.complete ? 1 : 0)
  const seedDay = (key: string, accountId: number, day: string, ttl: number) => seeder.seed(key, accountId, day, applySeed(key, ttl))
  const reseed = (key: string, accountId: number, day: string, ttl: number) => seeder.reseed(key, accountId, day, applySeed(key, ttl))
  const charges = groupCommit(client, clock, leases, { seed: seedDay, reseed })
  return {
    charge({ accountId, keyId, cost, limit, now }) {
      const day = utcDate(now)
      const key = dayKey(accountId, day)
      const field = keyField(keyId)
      const used = charges.fromLease(key, field, cost, limit)
      if (used !== undefined) return Promise.resolve({ admitted: true, used })
      return new Promise<ChargeResult>((resolve, reject) => charges.send({ key, accountId, day, ttl: ttlSeconds(now), args: [cost, limit, field], resolve, reject }))
    },
    chargeAtOnce: ({ accountId, keyId, cost, limit, now }) => charges.fromLease(dayKey(accountId, utcDate(now)), keyField(keyId), cost, limit),
    async read(accountId, now) {
      const day = utcDate(now)
      const key = dayKey(accountId, day)
      await charges.leaseAnswered(key) // a lease granted meanwhile is in `used` and must be known here
      let hash = await client.hgetall(key)
      if (hash[FIELD.used] === undefined) {
        await seedDay(key, accountId, day, ttlSeconds(now))
        hash = await client.hgetall(key)
      } else if (hash[FIELD.unseeded] !== undefined) reseed(key, accountId, day, ttlSeconds(now))
      const counters = parseCounters(hash)
      // This node's live lease: its unused units are not used yet, its admissions not yet in Redis.
      const lease = leases.heldOn(key)
      if (lease) {
        counters.used -= lease.unused
        for (const [field, units] of lease.byKeyField) {
          const keyId = keyIdOfField(field)
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
        const fields: Record<string, number> = { [FIELD.used]: delta.used, [FIELD.rejected]: delta.rejected, [FIELD.live]: delta.liveRefreshes }
        for (const [keyId, units] of delta.byKey) fields[keyField(keyId)] = units
        return fields
      })
      await client.tcgAddQuotaBatch(keys.length + 1, `quota-batch:${batchId}`, ...keys, ttlSeconds(now), JSON.stringify(increments))
    },
    close: () => leases.settleAll(),
  }
}
