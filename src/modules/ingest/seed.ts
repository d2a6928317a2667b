import { createProgress } from '../../shared/progress'
import { DEFAULT_BACKFILL } from './normalize'
import { type SyncDeps, type SyncSummary, syncGames } from './service'

/**
 * Fills an empty catalog from the source: history from 2025-03-02 (weekly, then daily for the last
 * 60 days) first, then today's prices, game by game with progress. The same source and date always
 * yield the same data.
 */
export async function seedCatalog(deps: SyncDeps, options: { gameSlugs?: string[] } = {}): Promise<SyncSummary> {
  const progress = createProgress(deps.logger, deps.clock, 'seed')
  const summary = await syncGames(deps, {
    gameSlugs: options.gameSlugs,
    backfill: DEFAULT_BACKFILL,
    onProgress: ({ game, done, total }) => progress.update(done, total, game),
  })
  progress.done(`seeded ${summary.games.length - summary.failed} games for ${summary.date} (${summary.failed} failed)`)
  return summary
}

/** A regular sync of today's prices, with progress; `tiers` limits it to games of those priority tiers. */
export async function syncCatalog(deps: SyncDeps, options: { gameSlugs?: string[]; tiers?: number[] } = {}): Promise<SyncSummary> {
  const progress = createProgress(deps.logger, deps.clock, 'sync')
  const summary = await syncGames(deps, {
    gameSlugs: options.gameSlugs,
    tiers: options.tiers,
    onProgress: ({ game, done, total }) => progress.update(done, total, game),
  })
  progress.done(`synced ${summary.games.length - summary.failed} games for ${summary.date} (${summary.failed} failed)`)
  return summary
}
