import type { Database } from '../../db/client'
import { utcDate } from '../../shared/clock'
import type { Logger } from '../../shared/logger'
import { type AccountDayDelta, addUsage, type KeyUsageDelta } from './repo'

const FLUSH_INTERVAL_MS = 5_000

export interface UsageRecorder {
  /** Counts one request made with a key: `units` charged (0 when free or refused), `rejected` over quota. */
  record(use: { keyId: number; accountId: number; units: number; rejected: boolean; at: Date }): void
  /** Requests counted here and not yet written, for a key: lists add them so totals are current. */
  pending(keyId: number): { requests: number; lastUsedAt: Date | null }
  flush(): Promise<void>
  /** Stops the timer and writes what is left. */
  close(): Promise<void>
}

/**
 * DESIGN section 5: per-key totals and per-account daily rows are summed in memory and written
 * every few seconds in one transaction (one statement per table), never once per request.
 * A failed write keeps the counts for the next attempt.
 */
export function usageRecorder(db: Database, logger: Logger): UsageRecorder {
  let keys = new Map<number, KeyUsageDelta>()
  let days = new Map<string, AccountDayDelta>()
  /** The batch being written: still counted by `pending` until it is in the database. */
  let writing = new Map<number, KeyUsageDelta>()
  let flushing: Promise<void> | undefined

  async function writeBatch() {
    if (keys.size === 0 && days.size === 0) return
    const batch = { keys, days }
    keys = new Map()
    days = new Map()
    writing = batch.keys
    try {
      await addUsage(db, [...batch.keys.values()], [...batch.days.values()])
      writing = new Map()
    } catch (error) {
      writing = new Map()
      logger.warn({ err: error, keys: batch.keys.size }, 'usage counters not written; retrying with the next batch')
      for (const delta of batch.keys.values()) addKey(delta.keyId, delta.requests, delta.lastUsedAt)
      for (const delta of batch.days.values()) addDay(delta.accountId, delta.day, delta.requests, delta.rejected)
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

  function addDay(accountId: number, day: string, requests: number, rejected: number) {
    const id = `${accountId}:${day}`
    const delta = days.get(id)
    if (!delta) days.set(id, { accountId, day, requests, rejected })
    else {
      delta.requests += requests
      delta.rejected += rejected
    }
  }

  const flush = () => {
    // One write at a time; a flush asked for meanwhile runs after it.
    flushing = (flushing ?? Promise.resolve()).then(writeBatch)
    return flushing
  }
  const timer = setInterval(() => void flush(), FLUSH_INTERVAL_MS)
  timer.unref?.()

  return {
    record({ keyId, accountId, units, rejected, at }) {
      addKey(keyId, 1, at)
      if (units > 0 || rejected) addDay(accountId, utcDate(at), units, rejected ? 1 : 0)
    },
    pending(keyId) {
      const queued = keys.get(keyId)
      const inFlight = writing.get(keyId)
      return {
        requests: (queued?.requests ?? 0) + (inFlight?.requests ?? 0),
        lastUsedAt: queued?.lastUsedAt ?? inFlight?.lastUsedAt ?? null,
      }
    },
    flush,
    async close() {
      clearInterval(timer)
      await flush()
    },
  }
}
