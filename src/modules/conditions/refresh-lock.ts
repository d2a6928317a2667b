import { randomUUID } from 'node:crypto'
import type Redis from 'ioredis'
import type { Database } from '../../db/client'
import type { Clock } from '../../shared/clock'
import type { Logger } from '../../shared/logger'

/**
 * Single flight for the refresh of one card's condition rows: concurrent requests (and the
 * re-crawl) for a card trigger one marketplace request, not one each.
 *
 * - In a process: one promise per card; whoever comes while it runs waits for it.
 * - Across nodes (with Redis): a short lock, `SET NX PX`, released only by its holder (token
 *   checked in one script); a node that finds it held waits for it to go, then reads what the
 *   holder wrote. The lock outlives no refresh by much: its lifetime is the marketplace timeout
 *   plus time for the write, so a node that died holding it delays the card's refresh by that.
 *
 * The flights of a process are kept per database, so every part of a node (the app's routes, the
 * re-crawl) shares them whatever object it was handed.
 */
export interface RefreshLocks {
  /**
   * Runs `refresh` as the card's only refresh, or joins the one already running here. Answers
   * `{ ran: true, value }` when this call ran it, `{ ran: false, value }` when it joined one in this
   * process, and `{ ran: false, busy: true }` after waiting for another node's refresh to end.
   */
  run<T>(cardId: number, refresh: () => Promise<T>): Promise<FlightResult<T>>
  /** Whether a refresh of the card is running in this process. */
  inFlight(cardId: number): boolean
}

export type FlightResult<T> = { ran: true; value: T } | { ran: false; value: T } | { ran: false; busy: true }

const RELEASE_LUA = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`
const POLL_MS = 25

type LockingRedis = Redis & { tcgReleaseRefreshLock(numberOfKeys: 1, key: string, token: string): Promise<number> }

const flightsByDatabase = new WeakMap<Database, Map<number, Promise<unknown>>>()

const lockKey = (cardId: number) => `condition-refresh:${cardId}`

export function refreshLocks(options: { db: Database; redis: Redis | undefined; logger: Logger; clock: Clock; lockMs: number }): RefreshLocks {
  let flights = flightsByDatabase.get(options.db)
  if (!flights) flightsByDatabase.set(options.db, (flights = new Map()))
  const local = flights
  const redis = options.redis as LockingRedis | undefined
  if (redis && typeof redis.tcgReleaseRefreshLock !== 'function') redis.defineCommand('tcgReleaseRefreshLock', { lua: RELEASE_LUA })

  /** The token when taken, false when another node holds it, undefined when there is no Redis to ask. */
  async function acquire(cardId: number): Promise<string | false | undefined> {
    if (!redis) return undefined
    const token = randomUUID()
    try {
      return (await redis.set(lockKey(cardId), token, 'PX', options.lockMs, 'NX')) === 'OK' ? token : false
    } catch (error) {
      // Redis away: nodes may refresh a card twice meanwhile, which costs a marketplace request, not correctness.
      options.logger.warn({ err: error, cardId }, 'refresh lock unavailable (redis): refreshing without it')
      return undefined
    }
  }

  async function release(cardId: number, token: string | undefined) {
    if (!redis || !token) return
    await redis.tcgReleaseRefreshLock(1, lockKey(cardId), token).catch(() => {})
  }

  /** Until the other node's lock is gone (released, or expired with its holder), at most its lifetime. */
  async function waitForRelease(cardId: number) {
    const deadline = options.clock.monotonic() + options.lockMs
    while (options.clock.monotonic() < deadline) {
      const held = await redis!.exists(lockKey(cardId)).catch(() => 0)
      if (!held) return
      await options.clock.sleep(POLL_MS)
    }
  }

  return {
    inFlight: (cardId) => local.has(cardId),
    async run<T>(cardId: number, refresh: () => Promise<T>): Promise<FlightResult<T>> {
      const running = local.get(cardId) as Promise<FlightResult<T>> | undefined
      if (running) {
        const result = await running
        return result.ran ? { ran: false, value: result.value } : result
      }
      const flight = (async (): Promise<FlightResult<T>> => {
        const token = await acquire(cardId)
        if (token === false) {
          await waitForRelease(cardId)
          return { ran: false, busy: true }
        }
        try {
          return { ran: true, value: await refresh() }
        } finally {
          await release(cardId, token)
        }
      })()
      local.set(cardId, flight)
      try {
        return await flight
      } finally {
        local.delete(cardId)
      }
    },
  }
}
