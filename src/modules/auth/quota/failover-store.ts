import { randomUUID } from 'node:crypto'
import type Redis from 'ioredis'
import { type Clock, type Timer, utcDate } from '../../../shared/clock'
import type { Logger } from '../../../shared/logger'
import { type CountsDelta, memoryQuotaStore, refundDelta } from './memory-store'
import { OutcomeUnknown } from './outcomes'
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
 * the counts taken meanwhile are added to it and Redis is authoritative again. A write whose answer
 * was lost (a timeout: it may have run) is counted locally too, and before the hand-over Redis is
 * asked what it counted of it, which local counting then gives up: counted once, never lost
 * (docs/adr/0125-a-quota-write-whose-answer-was-lost-is-learnt-not-guessed.md).
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

  /** Writes whose answer was lost, in order: what Redis counted of each is taken off local counting. */
  const lost: { learn: () => Promise<boolean | undefined>; reconcile(counted: boolean | undefined): void }[] = []
  const whenLost = <T extends boolean>(error: unknown, reconcile: (counted: T | undefined) => void) => {
    if (error instanceof OutcomeUnknown) lost.push({ learn: error.learn, reconcile: reconcile as (counted: boolean | undefined) => void })
  }
  /**
   * Redis counted `delta` of a write local counting has counted too: local counting gives it up, and
   * its baseline takes it, so what this node sees stays the same and the hand-over leaves it out.
   */
  const countedInRedis = (accountId: number, now: Date, delta: CountsDelta) => {
    if (
      !local.adjust(accountId, now, {
        used: -(delta.used ?? 0),
        rejected: -(delta.rejected ?? 0),
        liveRefreshes: -(delta.liveRefreshes ?? 0),
        byKey: delta.byKey && [delta.byKey[0], -delta.byKey[1]],
      })
    )
      return
    if (utcDate(now) === lastSeenDay)
      shiftBaseline(lastSeenDay, new Map([[accountId, { used: delta.used ?? 0, rejected: 0, liveRefreshes: delta.liveRefreshes ?? 0, byKey: new Map() }]]))
  }

  /** Counts drained from the local store and not yet confirmed in Redis, under one batch id. */
  let handOver: { id: string; day: string; counts: DayCountsByAccount } | undefined
  let recovering = false

  async function recover() {
    if (recovering) return
    recovering = true
    try {
      await redis.ping()
      // What Redis made of writes whose answer was lost, before anything counted locally goes to it.
      while (lost.length > 0) {
        const write = lost[0]!
        write.reconcile(await write.learn())
        lost.shift()
      }
      await primary.finish()
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
      let failure: unknown
      if (!degraded) {
        try {
          const result = await primary.charge(charge)
          remember(charge.accountId, charge.now, result.used)
          return result
        } catch (error) {
          degrade(error)
          failure = error
        }
      }
      const base = baseline(charge.accountId, charge.now)
      const result = await local.charge({ ...charge, limit: charge.limit - base })
      whenLost<boolean>(failure, (admitted) => {
        if (admitted === true) countedInRedis(charge.accountId, charge.now, { used: charge.cost, byKey: [charge.keyId, charge.cost] })
        else if (admitted === false) countedInRedis(charge.accountId, charge.now, { rejected: 1 })
      })
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
      let failure: unknown
      if (!degraded) {
        try {
          const result = await primary.claimLiveRefresh(claim)
          rememberLive(claim.accountId, claim.now, result.used)
          return result
        } catch (error) {
          degrade(error)
          failure = error
        }
      }
      const base = liveBaseline(claim.accountId, claim.now)
      const result = await local.claimLiveRefresh({ ...claim, limit: claim.limit - base })
      whenLost<boolean>(failure, (admitted) => admitted && countedInRedis(claim.accountId, claim.now, { liveRefreshes: 1 }))
      return { admitted: result.admitted, used: result.used + base }
    },
    // A refund whose answer was lost is not counted locally until Redis says it never ran: counting
    // it meanwhile would hand it over twice when it did.
    async refundLiveRefresh(accountId, now) {
      if (!degraded) {
        try {
          return await primary.refundLiveRefresh(accountId, now)
        } catch (error) {
          degrade(error)
          if (error instanceof OutcomeUnknown) {
            return whenLost<boolean>(error, (ran) => ran === undefined && local.adjust(accountId, now, { liveRefreshes: -1 }))
          }
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
          if (error instanceof OutcomeUnknown) {
            return whenLost<boolean>(error, (ran) => ran === undefined && local.adjust(charge.accountId, charge.now, refundDelta(charge.keyId, charge.cost)))
          }
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
