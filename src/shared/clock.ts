/**
 * Time as a dependency (docs/testing.md "Time"). Code that measures, waits or dates reads this
 * clock, never `Date.now()`, `new Date()`, `performance.now()` or the timer globals: tests give it
 * a fake clock they move by hand, so leases, TTLs, throttles, pacing and timeouts are tested by
 * advancing time instead of sleeping through it.
 */
export interface Clock {
  /** The wall-clock instant: dates, UTC days, timestamps written out. */
  now(): Date
  /** Milliseconds on a scale that never goes back: durations, deadlines, TTLs. Only differences mean anything. */
  monotonic(): number
  /** Resolves once `ms` of this clock's time has passed. */
  sleep(ms: number): Promise<void>
  /** Calls `fn` once `ms` of this clock's time has passed, unless cancelled first. */
  after(ms: number, fn: () => void, options?: TimerOptions): Timer
  /** Calls `fn` every `ms` of this clock's time until cancelled. */
  every(ms: number, fn: () => void, options?: TimerOptions): Timer
}

export interface Timer {
  cancel(): void
}

export interface TimerOptions {
  /** The timer alone does not keep the process alive (Node's `unref`). */
  unref?: boolean
}

const systemTimers: Omit<Clock, 'now'> = {
  monotonic: () => performance.now(),
  sleep: (ms) => Bun.sleep(Math.max(0, ms)),
  after(ms, fn, options) {
    const timer = setTimeout(fn, Math.max(0, ms))
    if (options?.unref) timer.unref()
    return { cancel: () => clearTimeout(timer) }
  },
  every(ms, fn, options) {
    const timer = setInterval(fn, ms)
    if (options?.unref) timer.unref()
    return { cancel: () => clearInterval(timer) }
  },
}

/** The machine's clocks and timers. */
export const systemClock: Clock = { ...systemTimers, now: () => new Date() }

/** The machine's monotonic clock and timers with another wall clock: a service standing at a chosen date. */
export function clockWithWall(now: () => Date): Clock {
  return { ...systemTimers, now }
}

/**
 * lru-cache options that measure its TTLs on `clock`. Its `ttlResolution` cache of the time is a
 * real 1 ms timer, which would let an entry outlive a fake clock's advance, so it is off. The time
 * is offset by 1 ms because lru-cache takes an entry stored at time 0 for one without a TTL.
 */
export function cacheTiming(clock: Clock) {
  return { perf: { now: () => clock.monotonic() + 1 }, ttlResolution: 0 }
}

/** Rejects with `error()` unless `promise` settles within `ms` of `clock`'s time; the timer goes either way. */
export function withTimeout<T>(clock: Clock, promise: Promise<T>, ms: number, error: () => Error): Promise<T> {
  let timer: Timer | undefined
  const timeout = new Promise<never>((_, reject) => {
    timer = clock.after(ms, () => reject(error()))
  })
  return Promise.race([promise, timeout]).finally(() => timer?.cancel())
}

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
