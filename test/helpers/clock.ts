import type { Clock, Timer } from '../../src/shared/clock'
import { clockWithWall } from '../../src/shared/clock'
import { TEST_NOW } from './env'

interface Pending {
  at: number
  seq: number
  fn: () => void
  every?: number
}

/** Lets promise chains that a fired timer resumed run on until they wait on something else. */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve))

/**
 * A clock that moves only when the test says (docs/testing.md "Time"): `advance` runs every timer
 * that falls due on the way, in order, letting the code each one resumes run before the next.
 * Its wall clock starts at `start` and moves with it; `set` jumps the wall clock alone.
 */
export function fakeClock(start: Date = TEST_NOW) {
  let wallOffset = start.getTime()
  let elapsed = 0
  let seq = 0
  let timers: Pending[] = []
  const schedule = (ms: number, fn: () => void, every?: number): Timer => {
    const timer: Pending = { at: elapsed + Math.max(0, ms), seq: ++seq, fn, every }
    timers.push(timer)
    return { cancel: () => void (timers = timers.filter((t) => t !== timer)) }
  }
  const clock = {
    now: () => new Date(wallOffset + elapsed),
    monotonic: () => elapsed,
    sleep: (ms: number) => new Promise<void>((resolve) => schedule(ms, resolve)),
    after: (ms: number, fn: () => void) => schedule(ms, fn),
    every: (ms: number, fn: () => void) => schedule(ms, fn, Math.max(1, ms)),
    /** Moves time `ms` forward, firing what falls due on the way. */
    async advance(ms: number) {
      const target = elapsed + ms
      await settle()
      for (;;) {
        const next = timers.reduce<Pending | undefined>((a, t) => (t.at <= target && (!a || t.at < a.at || (t.at === a.at && t.seq < a.seq)) ? t : a), undefined)
        if (!next) break
        elapsed = next.at
        if (next.every) next.at += next.every
        else timers = timers.filter((t) => t !== next)
        next.fn()
        await settle()
      }
      elapsed = target
      await settle()
    },
    /** Timers waiting to fire: how a test knows the code has reached its wait before advancing past it. */
    pending: () => timers.length,
    /** Sets the wall clock to `instant`; the monotonic clock and timers stay where they are. */
    set(instant: Date | string) {
      wallOffset = new Date(instant).getTime() - elapsed
    },
  }
  return clock satisfies Clock
}

export type FakeClock = ReturnType<typeof fakeClock>

/**
 * A wall clock tests set by hand, with the machine's own monotonic clock and timers: for a real
 * server standing at a chosen instant (UTC day roll-overs, sync dates) whose waits stay real.
 */
export function manualClock(start: Date = TEST_NOW) {
  let now = start
  return {
    ...clockWithWall(() => now),
    set(instant: Date | string) {
      now = new Date(instant)
    },
  }
}

/** A service standing at TEST_NOW, with real timers. */
export const testClock: Clock = clockWithWall(() => TEST_NOW)
