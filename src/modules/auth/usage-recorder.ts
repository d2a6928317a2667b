import type { Database } from '../../db/client'
import { type Clock, utcDate } from '../../shared/clock'
import type { Logger } from '../../shared/logger'
import { type AccountDayDelta, addUsage, findDailyUsage, type KeyUsageDelta } from './repo'

const FLUSH_INTERVAL_MS = 5_000

export interface UsageRecorder {
  /** Counts one request made with a key: `units` charged (0 when free or refused), `rejected` over quota. */
  record(use: { keyId: number; accountId: number; units: number; rejected: boolean; at: Date }): void
  /**
   * A charge handed back after its request was refused with a 429 (docs/adr/0090-a-429-never-costs-a-unit.md):
   * its units leave the day's requests and it counts as rejected. The key's total keeps it.
   */
  refund(use: { accountId: number; units: number; at: Date }): void
  /** Counts one live refresh of condition prices that happened (refused or failed ones are not counted). */
  recordLiveRefresh(accountId: number, at: Date): void
  /** Requests counted here and not yet written, for a key: lists add them so totals are current. */
  pending(keyId: number): { requests: number; lastUsedAt: Date | null }
  /**
   * An account's day as far as this node can know it without Redis: the stored daily row plus
   * what this node counted and has not written yet. `complete` is false when the database could
   * not be read, or `readStored` is false: then only this node's unwritten counts are in it.
   */
  dayTotals(accountId: number, day: string, readStored?: boolean): Promise<DayTotals>
  flush(): Promise<void>
  /** Stops the timer and writes what is left. */
  close(): Promise<void>
}

export interface DayTotals {
  used: number
  rejected: number
  liveRefreshes: number
  complete: boolean
}

/**
 * docs/adr/0039-usage-counters-in-postgresql.md: per-key totals and per-account daily rows are summed in memory and written
 * every few seconds in one transaction (one statement per table), never once per request.
 * A failed write keeps the counts for the next attempt: they are merged into the next batch, so
 * memory grows with the keys and account-days counted during an outage, never with its requests.
 */
export function usageRecorder(db: Database, logger: Logger, clock: Clock): UsageRecorder {
  let keys = new Map<number, KeyUsageDelta>()
  let days = new Map<string, AccountDayDelta>()
  /** The batch being written: still counted by `pending` until it is in the database. */
  let writing = new Map<number, KeyUsageDelta>()
  /** Its daily rows: empty whenever the stored ones are read (see `dayTotals`). */
  let writingDays = new Map<string, AccountDayDelta>()
  let flushing: Promise<void> | undefined
  // A day's totals add the stored row to the unwritten counts, so no batch may move from one to the
  // other while they are read: reads wait for the write in flight, a write waits for the reads.
  let written: Promise<unknown> | undefined
  const reads = new Set<Promise<DayTotals>>()

  async function writeBatch() {
    while (reads.size > 0) await Promise.allSettled(reads)
    if (keys.size === 0 && days.size === 0) return
    const batch = { keys, days }
    keys = new Map()
    days = new Map()
    writing = batch.keys
    writingDays = batch.days
    const write = addUsage(db, [...batch.keys.values()], [...batch.days.values()])
    written = write.catch(() => {})
    try {
      await write
    } catch (error) {
      logger.warn({ err: error, keys: batch.keys.size }, 'usage counters not written; retrying with the next batch')
      for (const delta of batch.keys.values()) addKey(delta.keyId, delta.requests, delta.lastUsedAt)
      for (const delta of batch.days.values()) addDay(delta.accountId, delta.day, delta.requests, delta.rejected, delta.liveRefreshes)
    } finally {
      writing = new Map()
      writingDays = new Map()
      written = undefined
    }
  }

  /** Said once per outage: every account's first request of the day would say it again. */
  let readsFailing = false

  async function readDay(accountId: number, day: string, readStored: boolean): Promise<DayTotals> {
    let stored = { requests: 0, rejected: 0, liveRefreshes: 0 }
    let complete = readStored
    if (readStored) {
      try {
        stored = await findDailyUsage(db, accountId, day)
        if (readsFailing) logger.info('stored usage readable again: provisional quota counters are being seeded')
        readsFailing = false
      } catch (error) {
        complete = false
        if (!readsFailing) logger.warn({ err: error }, "stored usage unreadable: today's quota counters missing in Redis start from this node's unwritten counts (provisional)")
        readsFailing = true
      }
    }
    const id = `${accountId}:${day}`
    const unwritten = [days.get(id), writingDays.get(id)]
    return {
      used: stored.requests + unwritten.reduce((sum, delta) => sum + (delta?.requests ?? 0), 0),
      rejected: stored.rejected + unwritten.reduce((sum, delta) => sum + (delta?.rejected ?? 0), 0),
      liveRefreshes: stored.liveRefreshes + unwritten.reduce((sum, delta) => sum + (delta?.liveRefreshes ?? 0), 0),
      complete,
    }
  }

  function addKey(keyId: number, requests: number, at: Date) {
    const delta = keys.get(keyId)
    if (!delta) keys.set(keyId, { keyId, requests, lastUsedAt: at })
    else {
      delta.requests += requests
      if (at > delta.lastUsedAt) delta.lastUsedAt = at
    }
  }

  function addDay(accountId: number, day: string, requests: number, rejected: number, liveRefreshes = 0) {
    const id = `${accountId}:${day}`
    const delta = days.get(id)
    if (!delta) days.set(id, { accountId, day, requests, rejected, liveRefreshes })
    else {
      delta.requests += requests
      delta.rejected += rejected
      delta.liveRefreshes += liveRefreshes
    }
  }

  const flush = () => {
    // One write at a time; a flush asked for meanwhile runs after it.
    flushing = (flushing ?? Promise.resolve()).then(writeBatch)
    return flushing
  }
  const timer = clock.every(FLUSH_INTERVAL_MS, () => void flush(), { unref: true })

  return {
    record({ keyId, accountId, units, rejected, at }) {
      addKey(keyId, 1, at)
      if (units > 0 || rejected) addDay(accountId, utcDate(at), units, rejected ? 1 : 0)
    },
    refund({ accountId, units, at }) {
      addDay(accountId, utcDate(at), -units, 1)
    },
    recordLiveRefresh(accountId, at) {
      addDay(accountId, utcDate(at), 0, 0, 1)
    },
    pending(keyId) {
      const queued = keys.get(keyId)
      const inFlight = writing.get(keyId)
      return {
        requests: (queued?.requests ?? 0) + (inFlight?.requests ?? 0),
        lastUsedAt: queued?.lastUsedAt ?? inFlight?.lastUsedAt ?? null,
      }
    },
    async dayTotals(accountId, day, readStored = true) {
      // Without the stored row nothing can be counted twice: the batch in flight is counted as
      // unwritten, and a request need not wait for a write to a database that is away.
      while (readStored && written) await written
      const read = readDay(accountId, day, readStored)
      reads.add(read)
      try {
        return await read
      } finally {
        reads.delete(read)
      }
    },
    flush,
    async close() {
      timer.cancel()
      await flush()
    },
  }
}
