import { randomBytes } from 'node:crypto'
import type Redis from 'ioredis'
import { type Clock, utcDate } from '../../../shared/clock'
import type { Logger } from '../../../shared/logger'
import { type ChargingRedis, chargingCommands } from './commands'
import { dayKey, ttlSeconds } from './day'
import { FIELD, keyField, keyIdOfField, parseCounters } from './fields'
import { groupCommit } from './group-commit'
import { quotaLeases } from './leases'
import { maySend, OutcomeUnknown, type WriteMarkers, writeMarkers } from './outcomes'
import { daySeeder } from './seeding'
import { ADMITTED, MISSING, REFUSED, UNSEEDED } from './status'
import type { ChargeResult, DayCountsByAccount, DaySeed, QuotaStore, SeedTotals } from './types'

/**
 * A write that counts, with its marker (outcomes.ts): its answer, or, when that was lost,
 * OutcomeUnknown whose `learn` says what `counted` makes of the recorded outcome.
 */
async function marked<A, T>(client: ChargingRedis, markers: WriteMarkers, ttl: number, write: (marker: string) => Promise<A>, counted: (recorded: string) => T): Promise<A> {
  const marker = markers.next()
  const sent = maySend(client)
  try {
    const answer = await write(marker)
    markers.answered(marker)
    return answer
  } catch (error) {
    if (!sent) throw error
    throw new OutcomeUnknown(error, async () => {
      const recorded = await markers.learn(marker, ttl)
      return recorded === undefined ? undefined : counted(recorded)
    })
  }
}

/** What a refund's marker records: 1 when it handed the units or the refresh back. */
const handedBack = (recorded: string) => recorded === '1'

/**
 * Counters shared by every node, in one Redis hash per account and UTC day (lua.ts). `seed` gives a
 * missing day hash its counts; without one (tests of the store alone) it starts from zero. `clock`
 * times the hot window, leases, lease waits and reseeds. A write whose answer is lost rejects with
 * OutcomeUnknown (outcomes.ts): `charge` and `claimLiveRefresh` learn true when Redis admitted it,
 * false when it refused it, undefined when it counted nothing; the refunds learn whether they
 * handed anything back.
 */
export function redisQuotaStore(
  redis: Redis,
  clock: Clock,
  logger?: Logger,
  seed?: DaySeed,
): QuotaStore & {
  add(batchId: string, day: string, counts: DayCountsByAccount, now: Date): Promise<void>
  /** Hands back what lease grants whose answer was lost took; rejects while Redis does not answer. */
  finish(): Promise<void>
  /** Hands back the quota leases this node holds (on shutdown). */
  close(): Promise<void>
} {
  const client = chargingCommands(redis)
  const node = randomBytes(6).toString('base64url')
  const markers = writeMarkers(client, node)
  const leases = quotaLeases(redis, clock, markers, node, logger)
  const seeder = daySeeder(seed, clock)
  /** Creates a missing day hash, or raises a provisional one to a complete seed (SEED_LUA). */
  const applySeed = (key: string, ttl: number) => (totals: SeedTotals) =>
    client.tcgSeedQuotaDay(1, key, totals.used, totals.rejected, totals.liveRefreshes, ttl, totals.complete ? 1 : 0)
  const seedDay = (key: string, accountId: number, day: string, ttl: number) => seeder.seed(key, accountId, day, applySeed(key, ttl))
  const reseed = (key: string, accountId: number, day: string, ttl: number) => seeder.reseed(key, accountId, day, applySeed(key, ttl))
  const charges = groupCommit(client, clock, leases, { seed: seedDay, reseed }, markers)
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
      const ttl = ttlSeconds(now)
      for (let attempt = 0; ; attempt++) {
        const [flagged, live] = await marked(
          client,
          markers,
          ttl,
          (marker) => client.tcgClaimLiveRefresh(2, marker, key, ttl, limit),
          (recorded) => (Number(recorded) === ADMITTED ? true : Number(recorded) === REFUSED ? false : undefined),
        )
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
      const ttl = ttlSeconds(now)
      await marked(client, markers, ttl, (marker) => client.tcgRefundLiveRefresh(2, marker, dayKey(accountId, utcDate(now)), ttl), handedBack)
    },
    async refund({ accountId, keyId, cost, now }) {
      const ttl = ttlSeconds(now)
      await marked(client, markers, ttl, (marker) => client.tcgRefundCharge(2, marker, dayKey(accountId, utcDate(now)), ttl, cost, keyField(keyId)), handedBack)
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
    finish: () => leases.finish(),
    close: () => leases.settleAll(),
  }
}
