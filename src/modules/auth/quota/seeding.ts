import type { Clock } from '../../../shared/clock'
import type { DaySeed, SeedTotals } from './types'

/** While the database is away, a node asks it again this often (one seed at a time), not once per account. */
export const RESEED_INTERVAL_MS = 500

/**
 * Seeds of missing day counters, for either store (docs/adr/0038-quota-recovery.md): one seed of
 * a counter at a time, every charge and read that found it missing waiting for that one. Once a
 * seed finds the database away, the next ones do not wait for it (a request would stall for its
 * connect timeout): they seed provisionally from what the node knows, and one seed at a time asks
 * the database again every RESEED_INTERVAL_MS until it answers. Without `seed` a day starts from zero.
 */
export function daySeeder(seed: DaySeed | undefined, clock: Clock) {
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
