import { type Clock, utcDate } from '../../../shared/clock'
import { dayKey } from './day'
import { daySeeder } from './seeding'
import {
  type Charge,
  type ChargeResult,
  type DayCounters,
  type DayCountsByAccount,
  type DaySeed,
  emptyCounters,
  type LiveRefreshClaim,
  type QuotaStore,
  type SeedTotals,
} from './types'

/** Counts to add to an account's day; a key's units as [key id, units]. */
export interface CountsDelta {
  used?: number
  rejected?: number
  liveRefreshes?: number
  byKey?: [number, number]
}

/** What a refund does to the counts (docs/adr/0090-a-429-never-costs-a-unit.md): the units back, one rejection more. */
export const refundDelta = (keyId: number, cost: number): CountsDelta => ({ used: -cost, rejected: 1, byKey: [keyId, -cost] })

const addTo = (counters: DayCounters, delta: CountsDelta) => {
  counters.used += delta.used ?? 0
  counters.rejected += delta.rejected ?? 0
  counters.liveRefreshes += delta.liveRefreshes ?? 0
  if (delta.byKey) counters.byKey.set(delta.byKey[0], (counters.byKey.get(delta.byKey[0]) ?? 0) + delta.byKey[1])
}

/**
 * Counters in this process: exact for one node; used when Redis is not configured or is away. With
 * `seeding` (embedded mode, no Redis) an account's day starts from what the database and the usage
 * recorder hold of it, as a Redis hash does (docs/adr/0038-quota-recovery.md), so a restart does
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
      if (counters) addTo(counters, refundDelta(keyId, cost))
    },
    /**
     * Adds to the account's counts of `now`'s day, if that is the day being counted (false
     * otherwise: that day's counts are gone). Local counting while Redis is away corrects by it
     * what Redis turned out to have counted too (failover-store.ts).
     */
    adjust(accountId: number, now: Date, delta: CountsDelta): boolean {
      if (utcDate(now) !== day) return false
      let counters = accounts.get(accountId)
      if (!counters) accounts.set(accountId, (counters = emptyCounters()))
      addTo(counters, delta)
      return true
    },
    /** Everything counted today, then forgotten: the hand-over back to Redis. */
    drain(): { day: string; counts: DayCountsByAccount } {
      const drained = { day, counts: accounts }
      accounts = new Map()
      return drained
    },
  } satisfies QuotaStore & Record<string, unknown>
}
