/** Time as a dependency, so tests can stand at any instant (UTC midnight roll-overs, sync dates). */
export interface Clock {
  now(): Date
}

export const systemClock: Clock = { now: () => new Date() }

/** YYYY-MM-DD of the instant in UTC. */
export function utcDate(instant: Date): string {
  return instant.toISOString().slice(0, 10)
}

/** The UTC date `days` after `date` (YYYY-MM-DD); negative goes back. */
export function addDays(date: string, days: number): string {
  const ms = Date.parse(`${date}T00:00:00Z`) + days * 86_400_000
  return new Date(ms).toISOString().slice(0, 10)
}
