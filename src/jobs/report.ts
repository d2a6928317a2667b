import type { Executor } from '../db/client'
import { interruptAbandonedRuns, type JobRun, latestRuns, MANUAL_SYNC_JOB } from './runs'
import { JOBS, newYorkTime, nextRunAfter, SCHEDULE_TIME_ZONE } from './schedule'

export interface JobStatus {
  job: string
  schedule: string
  pattern: string
  /** Null for `manual-sync`, which runs only when an operator starts it. */
  nextRun: Date | null
  lastRun: JobRun | undefined
}

/**
 * Every scheduled job (and the CLI's manual sync) with its next instant after `now` and its newest
 * run. Runs a dead process left `running` are recorded as interrupted first: none is listed as
 * running that is not.
 */
export async function jobStatuses(db: Executor, now: Date): Promise<JobStatus[]> {
  await interruptAbandonedRuns(db, now)
  const latest = await latestRuns(db)
  const scheduled = JOBS.map((job) => ({
    job: job.name,
    schedule: job.schedule,
    pattern: job.pattern,
    nextRun: nextRunAfter(job.pattern, now),
    lastRun: latest.get(job.name),
  }))
  return [...scheduled, { job: MANUAL_SYNC_JOB, schedule: 'by hand (cli sync)', pattern: '-', nextRun: null, lastRun: latest.get(MANUAL_SYNC_JOB) }]
}

function describeRun(run: JobRun | undefined): string {
  if (!run) return 'never run'
  const when = (run.finishedAt ?? run.startedAt).toISOString()
  const games = run.games.length > 0 ? `, ${run.games.length} game${run.games.length === 1 ? '' : 's'}` : ''
  const changed = run.rowsChanged !== null ? `, ${run.rowsChanged} changed` : ''
  const error = run.error ? `: ${run.error.length > 120 ? `${run.error.slice(0, 117)}...` : run.error}` : ''
  return `${run.outcome} ${when} (for ${run.scheduledFor.toISOString()}${games}${changed})${error}`
}

/** The `jobs` command's table: one line per job, columns padded to their widest cell. */
export function formatJobStatuses(statuses: JobStatus[]): string {
  const header = ['JOB', `SCHEDULE (${SCHEDULE_TIME_ZONE})`, 'PATTERN', 'NEXT RUN (UTC)', 'NEXT RUN (NEW YORK)', 'LAST RUN']
  const rows = statuses.map((status) => [
    status.job,
    status.schedule,
    status.pattern,
    status.nextRun ? status.nextRun.toISOString() : '-',
    status.nextRun ? newYorkTime(status.nextRun) : '-',
    describeRun(status.lastRun),
  ])
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => row[column]!.length)))
  const line = (cells: string[]) => cells.map((cell, column) => (column === cells.length - 1 ? cell : cell.padEnd(widths[column]!))).join('  ')
  return [line(header), ...rows.map(line)].join('\n')
}
