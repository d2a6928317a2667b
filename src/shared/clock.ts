/** Time as a dependency, so tests can stand at any instant (UTC midnight roll-overs, sync dates). */
export interface Clock {
  now(): Date
}

export const systemClock: Clock = { now: () => new Date() }

const DAY_MS = 86_400_000

/** A UTC day: its date, and when it starts and ends (ms since the epoch; the end as ISO 8601 too). */
export interface UtcDay {
  date: string
  start: number
  end: number
  endIso: string
}

// The day of the last instant asked about. Every keyed request asks (its quota counts per day and
// its answer names the reset), so the formatting happens once a day, not once a request.
let lastDay: UtcDay = { date: '', start: 0, end: 0, endIso: '' }

/** The UTC day an instant falls in. Throws RangeError for an invalid date, as toISOString does. */
export function utcDay(instant: Date): UtcDay {
  const ms = instant.getTime()
  if (ms >= lastDay.start && ms < lastDay.end) return lastDay
  const start = ms - (((ms % DAY_MS) + DAY_MS) % DAY_MS)
  const date = new Date(start).toISOString().slice(0, 10)
  lastDay = { date, start, end: start + DAY_MS, endIso: new Date(start + DAY_MS).toISOString() }
  return lastDay
}

/** YYYY-MM-DD of the instant in UTC. */
export function utcDate(instant: Date): string {
  return utcDay(instant).date
}

/** The UTC date `days` after `date` (YYYY-MM-DD); negative goes back. */
export function addDays(date: string, days: number): string {
  const ms = Date.parse(`${date}T00:00:00Z`) + days * 86_400_000
  return new Date(ms).toISOString().slice(0, 10)
}
