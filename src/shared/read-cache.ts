import { LRUCache } from 'lru-cache'
import { type Clock, cacheTiming } from './clock'

/**
 * A bounded, short-lived cache of read results for data that changes only when a sync runs.
 * It holds the promise, so concurrent misses for one key share one query; a failed read is
 * forgotten at once. Staleness after a sync is at most `ttlMs` on every node, with no
 * invalidation traffic. The TTL runs on `clock`.
 *
 * @example const games = createReadCache(deps.clock, 5_000); games.get('page:1', () => listGames(db, page))
 */
export function createReadCache(clock: Clock, ttlMs: number, max = 1_000) {
  const entries = new LRUCache<string, Promise<unknown>>({ max, ttl: ttlMs, ...cacheTiming(clock) })
  return {
    get<T>(key: string, load: () => Promise<T>): Promise<T> {
      let entry = entries.get(key) as Promise<T> | undefined
      if (!entry) {
        entry = load()
        entries.set(key, entry)
        const pending = entry
        // Only if the key still holds this load: a newer one may have replaced it after expiry.
        pending.catch(() => entries.peek(key) === pending && entries.delete(key))
      }
      return entry
    },
  }
}
