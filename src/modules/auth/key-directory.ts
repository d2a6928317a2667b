import type Redis from 'ioredis'
import { LRUCache } from 'lru-cache'
import type { Database } from '../../db/client'
import { type Clock, cacheTiming } from '../../shared/clock'
import type { Logger } from '../../shared/logger'
import type { CounterSeries } from '../../shared/metrics'
import { isDatabaseUnavailable } from '../../shared/unavailable'
import { findActiveKey } from './repo'
import { API_KEY_PATTERN, sha256Hex } from './secrets'
import type { KeyIdentity } from './types'

/** How long a node trusts what it read about a key when no revocation reaches it (Redis away). */
const VALID_TTL_MS = 30_000
/** Unknown keys are remembered briefly, so a flood of bad keys does not become a flood of queries. */
const INVALID_TTL_MS = 5_000
/**
 * While the database cannot be reached, a key it confirmed within this long is still trusted
 * (the snapshot-served routes need no database): the bound on trusting a key revoked while this
 * node missed the revocation (Redis away too).
 */
const LAST_KNOWN_TTL_MS = 3_600_000
/** During an outage a trusted key is read again this often, behind the requests it keeps answering. */
const OUTAGE_RECHECK_MS = 5_000
const MAX_ENTRIES = 100_000

/** What one node tells the others when a key stops working or an account changes tier. */
export type AuthEvent = { kind: 'key'; hash: string } | { kind: 'account'; accountId: number }

export const authEventsChannel = (redis: Redis) => `${redis.options.keyPrefix ?? ''}auth-events`

/** Tells every node (through Redis pub/sub) to forget what it cached. Best effort: the TTL bounds a miss. */
export async function publishAuthEvent(redis: Redis | undefined, event: AuthEvent, logger: Logger) {
  if (!redis) return
  try {
    await redis.publish(authEventsChannel(redis), JSON.stringify(event))
  } catch (error) {
    logger.warn({ err: error }, `could not broadcast an auth change; other nodes see it within ${VALID_TTL_MS / 1000} s`)
  }
}

export interface KeyDirectory {
  /**
   * The identity behind a raw `X-API-Key` value; undefined when unknown or revoked. No query on a
   * hit. Throws the database's error when it cannot be reached and the key was not seen recently.
   */
  lookup(rawKey: string): Promise<KeyIdentity | undefined>
  /**
   * The identity when this node already knows the key is valid (a settled cache entry), without
   * waiting; undefined when it does not know yet or the key is not valid (`lookup` then decides).
   */
  known(rawKey: string): KeyIdentity | undefined
  /** Forgets cached entries here and on every other node. */
  forget(event: AuthEvent): Promise<void>
  close(): void
}

export interface KeyDirectoryOptions {
  /** How long a key read from the database is trusted without asking again (default 30 s). */
  validTtlMs?: number
  /** Counted on each `lookup`: answered from the cache, or read from the database (`known` is counted by its caller). */
  lookups?: { hit: CounterSeries; miss: CounterSeries }
}

/**
 * docs/adr/0007-the-key-check.md: the key check is a SHA-256 and an in-process cache hit. Revocations and tier
 * changes reach every node through Redis pub/sub within a second; the cache TTL bounds how long
 * a node that missed the message can be wrong. A second, longer-lived record of the keys the
 * database confirmed keeps known keys working through a database outage.
 */
export function keyDirectory(db: Database, redis: Redis | undefined, logger: Logger, clock: Clock, options: KeyDirectoryOptions = {}): KeyDirectory {
  const timing = cacheTiming(clock)
  const cache = new LRUCache<string, Promise<KeyIdentity | null>>({ max: MAX_ENTRIES, ttl: options.validTtlMs ?? VALID_TTL_MS, ...timing })
  // The last identity the database gave for each key, used only while it cannot be reached.
  const lastKnown = new LRUCache<string, KeyIdentity>({ max: MAX_ENTRIES, ttl: LAST_KNOWN_TTL_MS, ...timing })
  // Bumped on every eviction: a lookup that started before one must not cache what it read.
  let generation = 0
  /** The identity each cache entry resolved to, once it has. */
  const settled = new WeakMap<Promise<KeyIdentity | null>, KeyIdentity | null>()
  const settling = (entry: Promise<KeyIdentity | null>) => {
    entry.then(
      (identity) => settled.set(entry, identity),
      () => {},
    )
    return entry
  }

  const evict = (event: AuthEvent) => {
    generation++
    if (event.kind === 'key') {
      cache.delete(event.hash)
      lastKnown.delete(event.hash)
    } else {
      for (const [hash, entry] of cache.entries()) {
        void entry.then((identity) => identity?.accountId === event.accountId && cache.delete(hash))
      }
      for (const [hash, identity] of lastKnown.entries()) if (identity.accountId === event.accountId) lastKnown.delete(hash)
    }
  }

  // Set when a key read finds the database unreachable, cleared by the next read it answers.
  let databaseAway = false

  /**
   * Reads the key from the database and caches the answer; when the database cannot be reached, a
   * key it confirmed within LAST_KNOWN_TTL_MS is the answer instead of the error, cached briefly. A
   * read in the foreground caches its promise at once, so concurrent lookups share it; one in the
   * background (`replacing` the entry requests are answered from meanwhile) caches only its answer.
   */
  function read(hash: string, replacing?: Promise<KeyIdentity | null>): Promise<KeyIdentity | null> {
    const startedAt = generation
    let fromDatabase = true
    const pending = settling(
      findActiveKey(db, hash).then(
        (identity) => {
          databaseAway = false
          return identity ?? null
        },
        (error) => {
          if (!isDatabaseUnavailable(error)) throw error
          databaseAway = true
          const known = lastKnown.get(hash)
          if (!known) throw error
          fromDatabase = false
          return known
        },
      ),
    )
    if (!replacing) cache.set(hash, pending)
    const own = replacing ?? pending
    pending.then(
      (identity) => {
        if (fromDatabase && !identity) lastKnown.delete(hash)
        // A read that started before an eviction may predate it: neither cached nor remembered.
        const current = startedAt === generation
        if (current && fromDatabase && identity) lastKnown.set(hash, identity)
        if (cache.peek(hash) !== own) return
        if (!current) cache.delete(hash)
        else if (!identity) cache.set(hash, pending, { ttl: INVALID_TTL_MS })
        else if (!fromDatabase) cache.set(hash, pending, { ttl: OUTAGE_RECHECK_MS })
        else if (replacing) cache.set(hash, pending)
      },
      () => !replacing && cache.peek(hash) === pending && cache.delete(hash),
    )
    return pending
  }

  let subscriber: Redis | undefined
  if (redis) {
    const channel = authEventsChannel(redis)
    subscriber = redis.duplicate({ lazyConnect: true })
    subscriber.on('error', () => {}) // the main connection already reports Redis trouble
    subscriber.on('message', (_channel, message) => {
      try {
        evict(JSON.parse(message) as AuthEvent)
      } catch (error) {
        logger.warn({ err: error }, 'ignored a malformed auth event')
      }
    })
    // On every (re)connection: subscribe, and drop what is cached, since events sent meanwhile were
    // lost: the last-known records too, so a key revoked meanwhile is not trusted in a database outage.
    subscriber.on('ready', () => {
      generation++
      cache.clear()
      lastKnown.clear()
      subscriber!.subscribe(channel).catch((error) => logger.warn({ err: error }, 'auth events subscription failed'))
    })
    subscriber.connect().catch(() => {})
  }

  return {
    lookup(rawKey) {
      if (!API_KEY_PATTERN.test(rawKey)) return Promise.resolve(undefined)
      const hash = sha256Hex(rawKey)
      let entry = cache.get(hash)
      options.lookups?.[entry ? 'hit' : 'miss'].inc()
      if (!entry) {
        const known = databaseAway ? lastKnown.get(hash) : undefined
        if (known) {
          // While the database is away a key seen recently is answered at once, not after a
          // connect timeout; the read behind it notices when the database is back.
          entry = settling(Promise.resolve(known))
          cache.set(hash, entry, { ttl: OUTAGE_RECHECK_MS })
          read(hash, entry).catch(() => {})
        } else entry = read(hash)
      }
      return entry.then((identity) => identity ?? undefined)
    },
    known(rawKey) {
      if (!API_KEY_PATTERN.test(rawKey)) return undefined
      const entry = cache.get(sha256Hex(rawKey))
      return (entry && settled.get(entry)) ?? undefined
    },
    async forget(event) {
      evict(event)
      await publishAuthEvent(redis, event, logger)
    },
    close() {
      subscriber?.disconnect()
    },
  }
}
