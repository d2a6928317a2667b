import { utcDay } from '../../../shared/clock'

/** The next 00:00 UTC after `now`: when counters reset. */
export function nextUtcMidnight(now: Date): Date {
  return new Date(utcDay(now).end)
}

/** Counters outlive their day by this much, so a late flush or a usage read at 00:00:01 still finds them. */
const RETENTION_AFTER_DAY_S = 3_600

/** Seconds until a day hash written at `now` may expire: the rest of the day, then the retention. */
export function ttlSeconds(now: Date): number {
  return Math.ceil((utcDay(now).end - now.getTime()) / 1000) + RETENTION_AFTER_DAY_S
}

/** The Redis key of an account's counters for one UTC day (YYYY-MM-DD). */
export const dayKey = (accountId: number, day: string) => `quota:${day}:${accountId}`
