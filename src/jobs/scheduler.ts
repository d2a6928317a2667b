import { cron } from '@elysiajs/cron'
import type { Cron } from 'croner'
import { Elysia } from 'elysia'
import type { Deps } from '../deps'
import { recrawlConditions } from '../modules/conditions/recrawl'
import { lastSyncedBySlug } from '../modules/ingest/service'
import type { AlertHook } from '../modules/webhooks/alerts'
import { withTimeout } from '../shared/clock'
import { leaderElection } from './leader'
import { type LockSession, pgliteLockSession, postgresLockSession } from './leader-repo'
import { pruneRuns, recordAbandonedRuns, type StartedRun, startJobRun } from './runs'
import { JOBS, type JobDefinition, type JobName, latestRunAtOrBefore, SCHEDULE_TIME_ZONE } from './schedule'
import { runSyncJob } from './sync-job'

export type SchedulerDeps = Pick<Deps, 'config' | 'db' | 'database' | 'redis' | 'source' | 'clock' | 'logger'> & Partial<Pick<Deps, 'metrics'>>

/** The condition catalog re-crawl: refreshes up to `limit` cards, oldest first. */
export type RecrawlConditions = (deps: SchedulerDeps, options: { limit: number }) => Promise<{ refreshed: number; failed: number }>

export interface SchedulerOptions {
  /** Where changed prices go after a sync: the price-alert evaluation. */
  alertHook: AlertHook
  /** Rebuilds this node's price snapshot after a sync, before other nodes are told. */
  refreshSnapshot?: () => Promise<unknown>
  /**
   * Runs when this node starts leading, before the catch-up syncs: the price-alert catch-up, which
   * fires crossings a leader that died between a sync's commit and its evaluation left unfired.
   */
  onLead?: () => Promise<unknown>
  /** The condition re-crawl's body (default: `recrawlConditions`). */
  recrawl?: RecrawlConditions
  /** The leader lock's session (default: a dedicated PostgreSQL connection, or PGlite's one connection). */
  openLockSession?: () => Promise<LockSession>
  /** Tests only: other patterns for some jobs, so a cron fires within seconds. */
  patterns?: Partial<Record<JobName, string>>
}

export interface Scheduler {
  /** Registers the cron jobs and starts competing for leadership (nothing when JOBS_ENABLED is false). */
  start(): void
  /**
   * Stops the cron jobs, lets a running sync finish (up to a bound), records what is still running
   * as interrupted and releases the leader lock.
   */
  stop(): Promise<void>
  isLeader(): boolean
  /** Resolves when every job queued so far has finished (tests wait on it). */
  idle(): Promise<void>
}

/** Re-crawl runs are kept this long: the job runs every minute. */
const RECRAWL_RUNS_KEPT_MS = 86_400_000
/** How long `stop` waits for a running sync before it records it as interrupted and releases the lock (the next leader completes its games). */
export const STOP_WAIT_MS = 10_000
/**
 * How long `stop` then tries to record its unfinished runs as interrupted: under PGlite a game's
 * open transaction holds the only connection. Not recorded in time, they are by the next start.
 */
export const RECORD_WAIT_MS = 2_000

/**
 * The scheduled jobs of JOBS on `@elysiajs/cron`. Every node registers them, but a job's body
 * runs only on the node that holds the leader lock. A sync job runs the games of its tier whose
 * last sync is older than the job's latest scheduled instant: so a run missed while no node led
 * (or the service was down) runs once when a node starts leading, a repeated trigger finds
 * nothing to do, and a run killed mid-way is completed by the next one.
 */
export function createScheduler(deps: SchedulerDeps, options: SchedulerOptions): Scheduler {
  const { config, logger } = deps
  const { alertHook } = options
  const patternOf = (job: JobDefinition) => options.patterns?.[job.name] ?? job.pattern
  const openLockSession =
    options.openLockSession ??
    (() =>
      config.databaseUrl && deps.database.driver === 'postgres'
        ? postgresLockSession(config.databaseUrl, { connectTimeoutSeconds: config.databaseConnectTimeoutSeconds, clock: deps.clock })
        : Promise.resolve(pgliteLockSession(deps.db)))

  let crons: Cron[] = []
  let stopping = false
  // Syncs run one after another (on the spring-forward day tiers 3 and 2 fall on the same
  // instant); a job already waiting is not queued twice.
  let syncLane: Promise<void> = Promise.resolve()
  const queuedSyncs = new Set<JobName>()
  let recrawling: Promise<void> | undefined
  let catchingUp: Promise<void> | undefined
  // The runs under way on this node, a sync's or the re-crawl's: what a stop finds here is recorded as interrupted.
  const activeRuns = new Set<StartedRun>()

  const election = leaderElection({
    openSession: openLockSession,
    retryMs: config.leaderRetrySeconds * 1000,
    clock: deps.clock,
    logger,
    onLead: () => {
      catchingUp = catchUp()
    },
  })

  const mayRun = () => !stopping && election.isLeader()

  async function catchUp() {
    // Runs a dead leader left are recorded as interrupted; their games, not synced since their instant, are synced below.
    await recordAbandonedRuns(deps)
    await options.onLead?.().catch((error) => logger.error({ err: error }, 'the work of taking the lead failed'))
    for (const job of JOBS) if (job.tier !== undefined) void queueSync(job)
  }

  function queueSync(job: JobDefinition): Promise<void> {
    if (queuedSyncs.has(job.name)) return syncLane
    queuedSyncs.add(job.name)
    syncLane = syncLane.then(async () => {
      queuedSyncs.delete(job.name)
      if (!mayRun()) return
      try {
        await runDueSync(job)
      } catch (error) {
        logger.error({ err: error, job: job.name }, 'scheduled sync failed')
      }
    })
    return syncLane
  }

  /** Syncs the games of the job's tier not synced since its latest scheduled instant, if any. */
  async function runDueSync(job: JobDefinition) {
    const scheduledFor = latestRunAtOrBefore(patternOf(job), deps.clock.now())
    if (!scheduledFor) return
    const tierGames = (await deps.source.listGames()).filter((game) => game.priority === job.tier)
    const lastSynced = await lastSyncedBySlug(deps.db)
    const due = tierGames
      .filter((game) => {
        const at = lastSynced.get(game.slug)
        return !at || at.getTime() < scheduledFor.getTime()
      })
      .map((game) => game.slug)
    if (due.length === 0) {
      logger.debug({ job: job.name, scheduledFor }, 'nothing due: every game of the tier is synced')
      return
    }
    logger.info({ job: job.name, scheduledFor, games: due.length }, 'sync run starting')
    await runSyncJob({ ...deps, alertHook, refreshSnapshot: options.refreshSnapshot, activeRuns }, { job: job.name, scheduledFor, gameSlugs: due })
  }

  async function runRecrawl(job: JobDefinition) {
    if (!mayRun() || recrawling || config.conditionRecrawlPerMinute === 0) return
    const recrawl = options.recrawl ?? recrawlConditions
    recrawling = (async () => {
      const now = deps.clock.now()
      const run = await startJobRun(deps.db, { job: job.name, scheduledFor: latestRunAtOrBefore(patternOf(job), now) ?? now, games: [], now }, activeRuns)
      // Each minute, so a run whose process died is recorded within a minute, even when its last
      // connection outlived the lead it lost (the new leader's start then found its lock still held).
      await recordAbandonedRuns(deps)
      try {
        const { refreshed, failed } = await recrawl(deps, { limit: config.conditionRecrawlPerMinute })
        await run.finish({
          // Some cards failing is the marketplace's trouble, retried next minute; all failing is the job's.
          outcome: failed > 0 && refreshed === 0 ? 'failed' : 'succeeded',
          rowsChanged: refreshed,
          error: failed > 0 ? `${failed} cards could not be refreshed` : undefined,
          now: deps.clock.now(),
        })
      } catch (error) {
        await run.finish({ outcome: 'failed', error: error instanceof Error ? error.message : String(error), now: deps.clock.now() })
        throw error
      }
      await pruneRuns(deps.db, job.name, new Date(now.getTime() - RECRAWL_RUNS_KEPT_MS))
    })()
      .catch((error) => logger.error({ err: error, job: job.name }, 'condition re-crawl failed'))
      .finally(() => {
        recrawling = undefined
      })
    await recrawling
  }

  function tick(job: JobDefinition): Promise<void> | undefined {
    if (!mayRun()) return
    return job.tier !== undefined ? queueSync(job) : runRecrawl(job)
  }

  return {
    start() {
      if (!config.jobsEnabled) {
        logger.info('JOBS_ENABLED is false: this node runs no scheduled jobs')
        return
      }
      if (crons.length > 0) return
      stopping = false
      let jobs = new Elysia({ name: 'scheduled-jobs' })
      for (const job of JOBS) {
        jobs = jobs.use(
          cron({
            name: job.name,
            pattern: patternOf(job),
            timezone: SCHEDULE_TIME_ZONE,
            catch: (error: unknown) => logger.error({ err: error, job: job.name }, 'scheduled job failed'),
            run: () => tick(job),
          }),
        ) as unknown as Elysia<'', { decorator: {}; store: {}; derive: {}; resolve: {} }>
      }
      crons = Object.values((jobs.store as { cron: Record<string, Cron> }).cron)
      election.start()
      logger.info({ jobs: JOBS.map((job) => job.name), timeZone: SCHEDULE_TIME_ZONE }, 'scheduled jobs registered; competing to lead them')
    },
    async stop() {
      stopping = true
      for (const job of crons) job.stop()
      crons = []
      // Only a sync is waited for: the re-crawl spreads its requests over a whole minute, and a
      // card it has not reached yet is simply taken by the next run.
      await withTimeout(deps.clock, syncLane, STOP_WAIT_MS, () => new Error('the running sync did not finish in time')).catch(() => {})
      // What still runs will not end before this process does. A run that ends after all still writes how.
      const runs = [...activeRuns].map((run) => run.id)
      if (runs.length > 0) {
        const now = deps.clock.now()
        const recording = Promise.all([...activeRuns].map((run) => run.interrupt(now)))
        await withTimeout(deps.clock, recording, RECORD_WAIT_MS, () => new Error(`not recorded within ${RECORD_WAIT_MS} ms`)).then(
          () => logger.warn({ runs }, 'stopping with runs under way: recorded as interrupted'),
          (error) => logger.warn({ err: error, runs }, 'stopping with runs under way that could not be recorded as interrupted; the next start records them'),
        )
      }
      await election.stop()
    },
    isLeader: () => election.isLeader(),
    async idle() {
      // A job may queue another while it runs (a catch-up): wait until the lane stands still.
      for (;;) {
        const lane = syncLane
        await Promise.all([catchingUp, lane, recrawling])
        if (lane === syncLane) return
      }
    },
  }
}
