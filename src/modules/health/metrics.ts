import type { StateReaders } from '../../shared/metrics'
import type { SnapshotStatus } from '../snapshot/store'
import { pingDatabase } from './repo'
import { probe } from './routes'
import type { HealthDeps } from './service'

/**
 * What the metrics read of this node's state on each scrape: what `/ready` reads, from the same
 * places (the snapshot's status, the quota mode, Redis, a database ping bounded as /ready's is).
 */
export function nodeStateReaders(deps: HealthDeps & { quotaMode: () => 'shared' | 'local' | 'degraded'; snapshot: () => SnapshotStatus | null }): StateReaders {
  const { redis } = deps
  return {
    snapshot: deps.snapshot,
    quotaMode: deps.quotaMode,
    // ioredis's own view of its connection: no round trip per scrape.
    redisUp: redis ? () => (redis.status === 'ready' ? 1 : 0) : undefined,
    databaseUp: async () => ((await probe(deps.clock, async () => (await pingDatabase(deps.db), 'ok' as const))) === 'ok' ? 1 : 0),
  }
}
