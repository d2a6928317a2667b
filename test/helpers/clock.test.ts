import { describe, expect, test } from 'bun:test'
import { withTimeout } from '../../src/shared/clock'
import { fakeClock } from './clock'
import { TEST_NOW } from './env'
import { eventually } from './eventually'

describe('fakeClock', () => {
  test('time moves only on advance; the wall clock moves with it', async () => {
    const clock = fakeClock()
    expect(clock.monotonic()).toBe(0)
    expect(clock.now()).toEqual(TEST_NOW)
    await clock.advance(1_500)
    expect(clock.monotonic()).toBe(1_500)
    expect(clock.now().getTime()).toBe(TEST_NOW.getTime() + 1_500)
  })

  test('advance fires due timers in order at their own instants, and not the ones beyond', async () => {
    const clock = fakeClock()
    const fired: [string, number][] = []
    clock.after(300, () => fired.push(['b', clock.monotonic()]))
    clock.after(100, () => fired.push(['a', clock.monotonic()]))
    const late = clock.after(1_000, () => fired.push(['late', clock.monotonic()]))
    const cancelled = clock.after(200, () => fired.push(['cancelled', clock.monotonic()]))
    cancelled.cancel()
    await clock.advance(500)
    expect(fired).toEqual([
      ['a', 100],
      ['b', 300],
    ])
    expect(clock.pending()).toBe(1)
    late.cancel()
    expect(clock.pending()).toBe(0)
  })

  test('a sleeper resumed by advance can sleep again within the same advance', async () => {
    const clock = fakeClock()
    const wakes: number[] = []
    void (async () => {
      for (let i = 0; i < 3; i++) {
        await clock.sleep(100)
        wakes.push(clock.monotonic())
      }
    })()
    await clock.advance(250)
    expect(wakes).toEqual([100, 200])
    await clock.advance(50)
    expect(wakes).toEqual([100, 200, 300])
  })

  test('every repeats until cancelled', async () => {
    const clock = fakeClock()
    let ticks = 0
    const timer = clock.every(100, () => ticks++)
    await clock.advance(350)
    expect(ticks).toBe(3)
    timer.cancel()
    await clock.advance(1_000)
    expect(ticks).toBe(3)
  })

  test('set jumps the wall clock alone', async () => {
    const clock = fakeClock()
    clock.set('2026-11-21T00:00:00Z')
    expect(clock.now().toISOString()).toBe('2026-11-21T00:00:00.000Z')
    expect(clock.monotonic()).toBe(0)
  })

  test('withTimeout rejects once the clock passes the limit, and not before', async () => {
    const clock = fakeClock()
    let outcome = 'pending'
    withTimeout(clock, new Promise(() => {}), 1_000, () => new Error('too slow')).catch((error) => (outcome = error.message))
    await clock.advance(999)
    expect(outcome).toBe('pending')
    await clock.advance(1)
    expect(outcome).toBe('too slow')
    expect(clock.pending()).toBe(0)
  })
})

describe('eventually', () => {
  test('returns the first truthy answer', async () => {
    let asks = 0
    expect(await eventually(() => ++asks >= 3 && asks, { interval: 1 })).toBe(3)
  })

  test('fails with what was awaited, or with the last error the check threw', async () => {
    await expect(eventually(() => false, { timeout: 30, what: 'the impossible' })).rejects.toThrow('the impossible not reached within 30 ms')
    await expect(
      eventually(
        () => {
          throw new Error('still 3')
        },
        { timeout: 30 },
      ),
    ).rejects.toThrow('still 3')
  })
})
