import { and, desc, eq, is, lt, min, ne, sql } from 'drizzle-orm'
import { PostgresJsSession } from 'drizzle-orm/postgres-js/session'
import { type Database, type Executor, selectRows } from '../db/client'
import { jobRuns } from '../db/schema'

/** `interrupted`: the process running it stopped or died before it ended (docs/adr/0065-missed-and-interrupted-runs.md). */
export type JobRunOutcome = 'running' | 'succeeded' | 'failed' | 'interrupted'

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

/**
 * The advisory lock a run holds while its process runs it, `(7303, run id)`, apart from the game
 * locks (7301) and the leader's (7302). It is taken on a connection of the run's own, so it lasts
 * exactly as long as the process can still end the run: a `running` row without it was left by a
 * process that died.
 */
const RUN_LOCK_CLASS = 7303

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

/** A new run's id with its lock held on a connection of its own, until `release`. */
export interface RunLock {
  id: number
  /** Lets go of the lock (a failure to is ignored: the lock ends with its connection) and of the connection. */
  release(): Promise<void>
}

/** Takes the next job_runs id and its run lock, before any row with that id exists. */
export async function lockNewRunId(db: Database): Promise<RunLock> {
  const connection = await lockConnection(db)
  let id: number
  try {
    const [row] = await connection.run<{ id: number }>(
      `select id, pg_advisory_lock(${RUN_LOCK_CLASS}, id)::text from (select nextval(pg_get_serial_sequence('job_runs', 'id'))::int as id) as next`,
    )
    id = row!.id
  } catch (error) {
    connection.release()
    throw error
  }
  return {
    id,
    async release() {
      await connection.run(`select pg_advisory_unlock(${RUN_LOCK_CLASS}, ${id})::text`).catch(() => {})
      connection.release()
    },
  }
}

export async function insertRunningJobRun(db: Executor, run: { id: number; job: string; scheduledFor: Date; games: string[]; now: Date }): Promise<void> {
  await db.insert(jobRuns).values({ id: run.id, job: run.job, scheduledFor: run.scheduledFor, games: run.games, outcome: 'running', startedAt: run.now })
}

export async function finishJobRun(db: Executor, id: number, result: JobRunResult): Promise<void> {
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

/** Marks the run interrupted with `error` if it is still running. */
export async function markRunInterrupted(db: Executor, id: number, error: string, now: Date): Promise<void> {
  await db
    .update(jobRuns)
    .set({ outcome: 'interrupted', error, finishedAt: now })
    .where(and(eq(jobRuns.id, id), eq(jobRuns.outcome, 'running')))
}

/** Whether a run's lock is held (by any session of this database): its process can still end it. */
const runLockHeld = sql`exists (
  select 1 from pg_locks l
  where l.locktype = 'advisory' and l.database = (select oid from pg_database where datname = current_database())
    and l.classid = ${RUN_LOCK_CLASS} and l.objid = ${jobRuns.id}::oid and l.objsubid = 2 and l.granted)`

/** Marks the running runs whose lock nobody holds as interrupted with `error`; returns how many. */
export async function interruptUnlockedRuns(db: Executor, error: string, now: Date): Promise<number> {
  const rows = await db
    .update(jobRuns)
    .set({ outcome: 'interrupted', error, finishedAt: now })
    .where(and(eq(jobRuns.outcome, 'running'), sql`not ${runLockHeld}`))
    .returning({ id: jobRuns.id })
  return rows.length
}

/** When the oldest run still running started; undefined when none runs. */
export async function oldestRunningStart(db: Executor): Promise<Date | undefined> {
  const [alive] = await db
    .select({ since: min(jobRuns.startedAt) })
    .from(jobRuns)
    .where(eq(jobRuns.outcome, 'running'))
  return alive?.since ?? undefined
}

/** The newest run of each job, by start. */
export async function latestRuns(db: Executor): Promise<Map<string, JobRun>> {
  const rows = await db.selectDistinctOn([jobRuns.job]).from(jobRuns).orderBy(jobRuns.job, desc(jobRuns.startedAt), desc(jobRuns.id))
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
