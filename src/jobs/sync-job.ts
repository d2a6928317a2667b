import type { Deps } from '../deps'
import { type PriceChange, type SyncDeps, type SyncOptions, type SyncSummary, syncGames } from '../modules/ingest/service'
import { publishSnapshotChanged } from '../modules/snapshot/store'
import type { AlertHook } from '../modules/webhooks/alerts'
import { recordAbandonedRuns, type StartedRun, startJobRun } from './runs'

export interface SyncJobDeps extends SyncDeps, Pick<Deps, 'redis'>, Partial<Pick<Deps, 'metrics'>> {
  alertHook: AlertHook
  /** Rebuilds this process's own price snapshot (a server's; the CLI has none). */
  refreshSnapshot?: () => Promise<unknown>
  /** The node's runs under way, which its stop records as interrupted: the run is listed until it ends. */
  activeRuns?: Set<StartedRun>
}

export interface SyncJobRequest {
  /** `sync-tier-3`, …, or `manual-sync`. */
  job: string
  /** The schedule instant the run stands for (its start when run by hand). */
  scheduledFor: Date
  /** The games to sync; every game when absent. */
  gameSlugs?: string[]
  /** How the games are synced: `syncGames`, or a wrapper of it that shows progress. */
  sync?: (deps: SyncDeps, options: Pick<SyncOptions, 'gameSlugs'>) => Promise<SyncSummary>
}

export interface SyncJobResult {
  runId: number
  summary: SyncSummary
  changes: PriceChange[]
}

/**
 * One recorded sync: a `job_runs` row from start to end, then (when any game synced) the new
 * prices go out: this node's snapshot is rebuilt at once, every other node is told through Redis,
 * and the changed prices go to the alert hook. The sync itself is per game transactional and
 * idempotent, so a run killed mid-way leaves the previous data and the next run completes it; as it
 * starts, a run records the runs and game syncs a dead process left `running` as interrupted.
 */
export async function runSyncJob(deps: SyncJobDeps, request: SyncJobRequest): Promise<SyncJobResult> {
  const { db, clock, logger } = deps
  const started = clock.monotonic()
  const counted = (outcome: 'succeeded' | 'failed' | 'error') => deps.metrics?.syncRun(request.job, outcome, (clock.monotonic() - started) / 1000, clock.now())
  const run = await startJobRun(db, { job: request.job, scheduledFor: request.scheduledFor, games: request.gameSlugs ?? [], now: clock.now() }, deps.activeRuns)
  await recordAbandonedRuns(deps)
  let summary: SyncSummary
  try {
    summary = await (request.sync ?? syncGames)(deps, { gameSlugs: request.gameSlugs })
  } catch (error) {
    counted('error')
    await run.finish({ outcome: 'failed', error: error instanceof Error ? error.message : String(error), now: clock.now() })
    throw error
  }
  const { changes } = summary
  // A game synced in part counts as failed here: the run did not bring every price up to date.
  const failed = summary.games.filter((game) => game.status !== 'succeeded')
  const rowsSkipped = summary.games.reduce((sum, game) => sum + (game.stats?.rows_skipped ?? 0), 0)
  counted(failed.length > 0 ? 'failed' : 'succeeded')
  await run.finish({
    outcome: failed.length > 0 ? 'failed' : 'succeeded',
    games: summary.games.map((game) => game.slug),
    rowsChanged: changes.length,
    rowsSkipped,
    error: failed.length > 0 ? failed.map((game) => `${game.slug}: ${game.error}`).join('; ') : undefined,
    now: clock.now(),
  })
  const runId = run.id
  logger.info(
    { job: request.job, runId, games: summary.games.length, failed: summary.failed, partial: summary.partial, changes: changes.length, rowsSkipped },
    failed.length > 0 ? 'sync run finished with failed or partly synced games (what failed keeps its previous data)' : 'sync run succeeded',
  )
  if (summary.games.some((game) => game.stats)) {
    if (deps.refreshSnapshot) {
      await deps.refreshSnapshot().catch((error) => logger.error({ err: error }, 'rebuilding the price snapshot after a sync failed'))
    }
    await publishSnapshotChanged(deps.redis, logger)
    try {
      await deps.alertHook({ job: request.job, runId, changes })
    } catch (error) {
      logger.error({ err: error, job: request.job, runId }, 'price alert evaluation failed; the synced prices stand')
    }
  }
  return { runId, summary, changes }
}
