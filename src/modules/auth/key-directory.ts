import type Redis from 'ioredis'
import { LRUCache } from 'lru-cache'
import type { Database } from '../../db/client'
import type { Logger } from '../../shared/logger'
import { findActiveKey, type KeyIdentity } from './repo'
import { API_KEY_PATTERN, sha256Hex } from './secrets'

/** How long a node trusts what it read about a key when no revocation reaches it (Redis away). */
const VALID_TTL_MS = 30_000
/** Unknown keys are remembered briefly, so a flood of bad keys does not become a flood of queries. */
const INVALID_TTL_MS = 5_000
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
  /** The identity behind a raw `X-API-Key` value; undefined when unknown or revoked. No query on a hit. */
  lookup(rawKey: string): Promise<KeyIdentity | undefined>
  /** Forgets cached entries here and on every other node. */
  forget(event: AuthEvent): Promise<void>
  close(): void
}

/**
 * DESIGN section 5: the key check is a SHA-256 and an in-process cache hit. Revocations and tier
 * changes reach every node through Redis pub/sub within a second; the cache TTL bounds how long
 * a node that missed the message can be wrong.
 */
export function keyDirectory(db: Database, redis: Redis | undefined, logger: Logger): KeyDirectory {
  const cache = new LRUCache<string, Promise<KeyIdentity | null>>({ max: MAX_ENTRIES, ttl: VALID_TTL_MS })
  // Bumped on every eviction: a lookup that started before one must not cache what it read.
  let generation = 0

  const evict = (event: AuthEvent) => {
    generation++
    if (event.kind === 'key') cache.delete(event.hash)
    else
      for (const [hash, entry] of cache.entries()) {
        void entry.then((identity) => identity?.accountId === event.accountId && cache.delete(hash))
      }
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
    // On every (re)connection: subscribe, and drop the cache, since events sent meanwhile were lost.
    subscriber.on('ready', () => {
      generation++
      cache.clear()
      subscriber!.subscribe(channel).catch((error) => logger.warn({ err: error }, 'auth events subscription failed'))
    })
    subscriber.connect().catch(() => {})
  }

  return {
    lookup(rawKey) {
      if (!API_KEY_PATTERN.test(rawKey)) return Promise.resolve(undefined)
      const hash = sha256Hex(rawKey)
      let entry = cache.get(hash)
      if (!entry) {
        const startedAt = generation
        const pending = findActiveKey(db, hash).then((identity) => identity ?? null)
        cache.set(hash, pending)
        pending.then(
          (identity) => {
            if (cache.peek(hash) !== pending) return
            if (startedAt !== generation) cache.delete(hash)
            else if (!identity) cache.set(hash, pending, { ttl: INVALID_TTL_MS })
          },
          () => cache.peek(hash) === pending && cache.delete(hash),
        )
        entry = pending
      }
      return entry.then((identity) => identity ?? undefined)
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
