import { and, desc, eq, is, lt, min, ne, sql } from 'drizzle-orm'
import { PostgresJsSession } from 'drizzle-orm/postgres-js/session'
import { type Database, type Executor, selectRows } from '../db/client'
import { games, jobRuns } from '../db/schema'
import { interruptAbandonedSyncRuns } from '../modules/ingest/repo'
import type { Clock } from '../shared/clock'
import type { Logger } from '../shared/logger'

/** `interrupted`: the process running it stopped or died before it ended (docs/decisions.md "Missed and interrupted runs"). */
export type JobRunOutcome = 'running' | 'succeeded' | 'failed' | 'interrupted'

/** The job name of a sync an operator ran from the CLI. */
export const MANUAL_SYNC_JOB = 'manual-sync'

/**
 * The advisory lock a run holds while its process runs it, `(7303, run id)`, apart from the game
 * locks (7301) and the leader's (7302). It is taken on a connection of the run's own, so it lasts
 * exactly as long as the process can still end the run: a `running` row without it was left by a
 * process that died.
 */
const RUN_LOCK_CLASS = 7303

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

export interface JobRunResult {
  outcome: 'succeeded' | 'failed'
  games?: string[]
  rowsChanged?: number
  rowsSkipped?: number
  error?: string
  now: Date
}

/** A run this process has started: it holds the run's lock until `finish`. */
export interface StartedRun {
  id: number
  /** Writes how the run ended and lets go of its lock. The real end is written even over `interrupted`. */
  finish(result: JobRunResult): Promise<void>
  /** Records the run as interrupted while it still runs, when this node stops before it can end; it keeps its lock. */
  interrupt(now: Date): Promise<void>
}

const STOPPED = 'the node stopped before the run finished'
const ABANDONED = 'the process running it ended before it finished'

/**
 * The connection a run's lock is held on: one reserved from postgres.js's pool for the run's whole
 * length (a pooled statement may run on any connection, and the lock stays with the one it ran on),
 * or PGlite's only connection, which this process alone opens. It runs statements built here from
 * integers only.
 */
interface LockConnection {
  run<T>(statement: string): Promise<T[]>
  release(): void
}

async function lockConnection(db: Database): Promise<LockConnection> {
  const session = db._.session
  if (!is(session, PostgresJsSession)) return { run: (statement) => selectRows(db, sql.raw(statement)), release: () => {} }
  const reserved = await session.client.reserve()
  return { run: async <T>(statement: string) => [...(await reserved.unsafe(statement))] as T[], release: () => reserved.release() }
}

/**
 * Takes the run's id and its lock on the run's own connection, then records the run as `running`:
 * the row is never visible without its lock, so no other process can take a run that is just
 * starting for one left by a dead process.
 */
export async function startJobRun(
  db: Database,
  run: { job: string; scheduledFor: Date; games: string[]; now: Date },
  /** Where the run is listed until it is finished: the node's runs under way, which its stop records as interrupted. */
  activeRuns?: Set<StartedRun>,
): Promise<StartedRun> {
  const connection = await lockConnection(db)
  let id = 0
  const unlock = () => connection.run(`select pg_advisory_unlock(${RUN_LOCK_CLASS}, ${id})::text`).catch(() => {})
  try {
    const [row] = await connection.run<{ id: number }>(
      `select id, pg_advisory_lock(${RUN_LOCK_CLASS}, id)::text from (select nextval(pg_get_serial_sequence('job_runs', 'id'))::int as id) as next`,
    )
    id = row!.id
    await db.insert(jobRuns).values({ id, job: run.job, scheduledFor: run.scheduledFor, games: run.games, outcome: 'running', startedAt: run.now })
  } catch (error) {
    if (id) await unlock()
    connection.release()
    throw error
  }
  const started: StartedRun = {
    id,
    async finish(result) {
      try {
        await finishJobRun(db, id, result)
      } finally {
        activeRuns?.delete(started)
        await unlock()
        connection.release()
      }
    },
    async interrupt(now) {
      await db
        .update(jobRuns)
        .set({ outcome: 'interrupted', error: STOPPED, finishedAt: now })
        .where(and(eq(jobRuns.id, id), eq(jobRuns.outcome, 'running')))
    },
  }
  activeRuns?.add(started)
  return started
}

async function finishJobRun(db: Executor, id: number, result: JobRunResult): Promise<void> {
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

/** Whether a run's lock is held (by any session of this database): its process can still end it. */
const runLockHeld = sql`exists (
  select 1 from pg_locks l
  where l.locktype = 'advisory' and l.database = (select oid from pg_database where datname = current_database())
    and l.classid = ${RUN_LOCK_CLASS} and l.objid = ${jobRuns.id}::oid and l.objsubid = 2 and l.granted)`

/**
 * Runs left `running` by a process that died, whichever node or CLI ran them, are marked
 * `interrupted`; so are the game syncs such a process left (`interruptAbandonedSyncRuns`), judged
 * only among those started before every run still alive, whose own game syncs they cannot be.
 */
export async function interruptAbandonedRuns(db: Executor, now: Date): Promise<{ runs: number; gameSyncs: number }> {
  const runs = await db
    .update(jobRuns)
    .set({ outcome: 'interrupted', error: ABANDONED, finishedAt: now })
    .where(and(eq(jobRuns.outcome, 'running'), sql`not ${runLockHeld}`))
    .returning({ id: jobRuns.id })
  const [alive] = await db.select({ since: min(jobRuns.startedAt) }).from(jobRuns).where(eq(jobRuns.outcome, 'running'))
  const gameSyncs = await interruptAbandonedSyncRuns(db, { startedBefore: alive?.since ?? now, now })
  return { runs: runs.length, gameSyncs }
}

/** `interruptAbandonedRuns` for a node or a sync that goes on whatever it finds: what it marked, or why it could not, is logged. */
export async function recordAbandonedRuns(deps: { db: Executor; clock: Clock; logger: Logger }): Promise<void> {
  try {
    const marked = await interruptAbandonedRuns(deps.db, deps.clock.now())
    if (marked.runs + marked.gameSyncs > 0) deps.logger.warn(marked, 'marked runs and game syncs left by a process that ended mid-way as interrupted')
  } catch (error) {
    deps.logger.error({ err: error }, 'could not mark runs left by a process that ended mid-way')
  }
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
