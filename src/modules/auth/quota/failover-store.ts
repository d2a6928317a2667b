import { randomUUID } from 'node:crypto'
import type Redis from 'ioredis'
import { type Clock, type Timer, utcDate } from '../../../shared/clock'
import type { Logger } from '../../../shared/logger'
import { memoryQuotaStore } from './memory-store'
import { redisQuotaStore } from './redis-store'
import type { DayCountsByAccount, DaySeed, QuotaStore } from './types'

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
