import { and, desc, eq, lt, ne, sql } from 'drizzle-orm'
import { type Executor, selectRows } from '../db/client'
import { games, jobRuns } from '../db/schema'

export type JobRunOutcome = 'running' | 'succeeded' | 'failed'

/** The job name of a sync an operator ran from the CLI. */
export const MANUAL_SYNC_JOB = 'manual-sync'

export interface JobRun {
  id: number
  job: string
  scheduledFor: Date
  games: string[]
  outcome: JobRunOutcome
  rowsChanged: number | null
  error: string | null
  startedAt: Date
  finishedAt: Date | null
}

export async function startJobRun(
  db: Executor,
  run: { job: string; scheduledFor: Date; games: string[]; now: Date },
): Promise<number> {
  const [row] = await db
    .insert(jobRuns)
    .values({ job: run.job, scheduledFor: run.scheduledFor, games: run.games, outcome: 'running', startedAt: run.now })
    .returning({ id: jobRuns.id })
  return row!.id
}

export async function finishJobRun(
  db: Executor,
  id: number,
  result: { outcome: 'succeeded' | 'failed'; games?: string[]; rowsChanged?: number; rowsSkipped?: number; error?: string; now: Date },
): Promise<void> {
  await db
    .update(jobRuns)
    .set({
      outcome: result.outcome,
      ...(result.games && { games: result.games }),
      rowsChanged: result.rowsChanged ?? null,
      rowsSkipped: result.rowsSkipped ?? null,
      error: result.error ?? null,
      finishedAt: result.now,
    })
    .where(eq(jobRuns.id, id))
}

/**
 * Runs left `running` by a node that died mid-way are marked failed when a node starts leading:
 * only the leader runs scheduled jobs, so none of them can still be running elsewhere. (A CLI
 * sync may run beside the leader: its runs are left alone.)
 */
export async function failInterruptedRuns(db: Executor, now: Date): Promise<number> {
  const interrupted = await db
    .update(jobRuns)
    .set({ outcome: 'failed', error: 'interrupted: the node running it stopped before it finished', finishedAt: now })
    .where(and(eq(jobRuns.outcome, 'running'), ne(jobRuns.job, MANUAL_SYNC_JOB)))
    .returning({ id: jobRuns.id })
  return interrupted.length
}

/** The newest run of each job, by start. */
export async function latestRuns(db: Executor): Promise<Map<string, JobRun>> {
  const rows = await db
    .selectDistinctOn([jobRuns.job])
    .from(jobRuns)
    .orderBy(jobRuns.job, desc(jobRuns.startedAt), desc(jobRuns.id))
  return new Map(rows.map((row) => [row.job, { ...row, outcome: row.outcome as JobRunOutcome }]))
}

/** Every run of a job, oldest first (tests and the CLI read these). */
export async function runsOf(db: Executor, job: string): Promise<JobRun[]> {
  const rows = await db.select().from(jobRuns).where(eq(jobRuns.job, job)).orderBy(jobRuns.startedAt, jobRuns.id)
  return rows.map((row) => ({ ...row, outcome: row.outcome as JobRunOutcome }))
}

/** Drops a job's runs that started before `before`: the every-minute job would otherwise add 1,440 rows a day. */
export async function pruneRuns(db: Executor, job: string, before: Date): Promise<void> {
  await db.delete(jobRuns).where(and(eq(jobRuns.job, job), lt(jobRuns.startedAt, before), ne(jobRuns.outcome, 'running')))
}

/** Each game's last successful sync (null when never synced), by slug. */
export async function lastSyncedBySlug(db: Executor): Promise<Map<string, Date | null>> {
  const rows = await db.select({ slug: games.slug, lastSyncedAt: games.lastSyncedAt }).from(games)
  return new Map(rows.map((row) => [row.slug, row.lastSyncedAt]))
}

/**
 * Per update tier, the instant by which every game of the tier was last synced (its least
 * recently synced game's `last_synced_at`); null when one was never synced or the tier has no games.
 */
export async function lastSyncPerTier(db: Executor): Promise<Record<`tier_${0 | 1 | 2 | 3}`, string | null>> {
  const rows = await selectRows<{ priority: number; oldest: Date | string | null }>(
    db,
    sql`select priority, case when bool_or(last_synced_at is null) then null else min(last_synced_at) end as oldest
        from ${games} group by priority`,
  )
  const tiers: Record<string, string | null> = { tier_3: null, tier_2: null, tier_1: null, tier_0: null }
  for (const row of rows) {
    const tier = `tier_${row.priority}`
    if (row.oldest !== null && tier in tiers) tiers[tier] = new Date(row.oldest).toISOString()
  }
  return tiers as Record<`tier_${0 | 1 | 2 | 3}`, string | null>
}
