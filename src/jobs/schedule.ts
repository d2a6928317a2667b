import { Cron } from 'croner'

/** Every schedule is read on New York's wall clock (docs/adr/0063-the-schedule.md); croner applies its daylight-saving changes. */
export const SCHEDULE_TIME_ZONE = 'America/New_York'

export type JobName = 'sync-tier-3' | 'sync-tier-2' | 'sync-tier-1' | 'sync-tier-0' | 'condition-recrawl'

export interface JobDefinition {
  name: JobName
  /** A cron pattern (minute hour day-of-month month day-of-week) on New York time. */
  pattern: string
  /** The schedule in words, for the `jobs` command. */
  schedule: string
  /** The games' update tier a sync job covers; absent for jobs that are not syncs. */
  tier?: 0 | 1 | 2 | 3
}

/**
 * The one table of scheduled jobs. On the spring-forward day (02:00 does not exist in New York)
 * croner fires a 02:00 job at 03:00 EDT, once; on the fall-back day 02:00 EST comes once, after
 * the repeated 01:00 hour. So each daily job runs exactly once per New York day.
 */
export const JOBS: readonly JobDefinition[] = [
  { name: 'sync-tier-3', pattern: '0 2 * * *', schedule: 'daily 02:00', tier: 3 },
  { name: 'sync-tier-2', pattern: '0 3 * * *', schedule: 'daily 03:00', tier: 2 },
  { name: 'sync-tier-1', pattern: '0 4 * * 1,4', schedule: 'Monday and Thursday 04:00', tier: 1 },
  { name: 'sync-tier-0', pattern: '0 4 * * 0', schedule: 'Sunday 04:00', tier: 0 },
  { name: 'condition-recrawl', pattern: '* * * * *', schedule: 'every minute' },
]

export const SYNC_TIERS = [3, 2, 1, 0] as const

export function syncJobName(tier: number): JobName {
  return `sync-tier-${tier}` as JobName
}

/** A croner schedule that never fires by itself: only for computing instants. */
function schedule(pattern: string): Cron {
  return new Cron(pattern, { timezone: SCHEDULE_TIME_ZONE, paused: true })
}

/** The pattern's first instant strictly after `after`. */
export function nextRunAfter(pattern: string, after: Date): Date | null {
  return schedule(pattern).nextRun(after)
}

/** The pattern's instants strictly after `after`, `count` of them. */
export function runsAfter(pattern: string, after: Date, count: number): Date[] {
  return schedule(pattern).nextRuns(count, after)
}

/** Windows searched back from `at` for the latest instant: a minute job finds one in the first, a weekly one in the last. */
const LOOKBACK_MS = [3_600_000, 86_400_000, 8 * 86_400_000]

/**
 * The pattern's most recent instant at or before `at` (croner only looks forward, so this walks
 * forward from a little before `at`). Null when the pattern has none within eight days.
 */
export function latestRunAtOrBefore(pattern: string, at: Date): Date | null {
  const cron = schedule(pattern)
  for (const lookback of LOOKBACK_MS) {
    let latest: Date | null = null
    // nextRun is strictly after its argument: start a millisecond early so `at` itself counts.
    let next = cron.nextRun(new Date(at.getTime() - lookback - 1))
    while (next && next.getTime() <= at.getTime()) {
      latest = next
      next = cron.nextRun(next)
    }
    if (latest) return latest
  }
  return null
}

/**
 * The instant as New York wall-clock time with its offset, e.g. `2026-11-25T02:00:00-05:00`
 * (what an operator in that zone reads on a clock).
 */
export function newYorkTime(instant: Date): string {
  const parts = Object.fromEntries(
    new Intl.DateTimeFormat('en-US', {
      timeZone: SCHEDULE_TIME_ZONE,
      hourCycle: 'h23',
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      hour: '2-digit',
      minute: '2-digit',
      second: '2-digit',
      timeZoneName: 'longOffset',
    })
      .formatToParts(instant)
      .map((part) => [part.type, part.value]),
  )
  const offset = parts.timeZoneName === 'GMT' ? '+00:00' : parts.timeZoneName!.replace('GMT', '')
  return `${parts.year}-${parts.month}-${parts.day}T${parts.hour}:${parts.minute}:${parts.second}${offset}`
}
