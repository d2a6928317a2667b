import type { Database, Executor } from '../db/client'
import { interruptAbandonedGameSyncs } from '../modules/ingest/service'
import type { Clock } from '../shared/clock'
import type { Logger } from '../shared/logger'
import { finishJobRun, insertRunningJobRun, interruptUnlockedRuns, type JobRunResult, lockNewRunId, markRunInterrupted, oldestRunningStart } from './repo'

export { type JobRun, type JobRunOutcome, type JobRunResult, latestRuns, pruneRuns, runsOf } from './repo'

/** The job name of a sync an operator ran from the CLI. */
export const MANUAL_SYNC_JOB = 'manual-sync'

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
  const lock = await lockNewRunId(db)
  const { id } = lock
  try {
    await insertRunningJobRun(db, { id, ...run })
  } catch (error) {
    await lock.release()
    throw error
  }
  const started: StartedRun = {
    id,
    async finish(result) {
      try {
        await finishJobRun(db, id, result)
      } finally {
        activeRuns?.delete(started)
        await lock.release()
      }
    },
    async interrupt(now) {
      await markRunInterrupted(db, id, STOPPED, now)
    },
  }
  activeRuns?.add(started)
  return started
}

/**
 * Runs left `running` by a process that died, whichever node or CLI ran them, are marked
 * `interrupted`; so are the game syncs such a process left (`interruptAbandonedGameSyncs`), judged
 * only among those started before every run still alive, whose own game syncs they cannot be.
 */
export async function interruptAbandonedRuns(db: Executor, now: Date): Promise<{ runs: number; gameSyncs: number }> {
  const runs = await interruptUnlockedRuns(db, ABANDONED, now)
  const gameSyncs = await interruptAbandonedGameSyncs(db, { startedBefore: (await oldestRunningStart(db)) ?? now, now })
  return { runs, gameSyncs }
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
