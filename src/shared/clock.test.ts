import { describe, expect, test } from 'bun:test'
import fc from 'fast-check'
import { utcDate, utcDay } from './clock'

const MIN = Date.UTC(1970, 0, 1) - 400 * 86_400_000
const MAX = Date.UTC(2200, 0, 1)

describe('utcDay', () => {
  test('any sequence of instants: the same date and bounds as formatting each one afresh', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: MIN, max: MAX }), { minLength: 1, maxLength: 20 }), (instants) => {
        for (const ms of instants) {
          const instant = new Date(ms)
          const day = utcDay(instant)
          const expected = instant.toISOString().slice(0, 10)
          expect(day.date).toBe(expected)
          expect(utcDate(instant)).toBe(expected)
          expect(new Date(day.start).toISOString()).toBe(`${expected}T00:00:00.000Z`)
          expect(day.end - day.start).toBe(86_400_000)
          expect(day.endIso).toBe(new Date(day.end).toISOString())
          expect(ms >= day.start && ms < day.end).toBe(true)
        }
      }),
    )
  })

  test('the last millisecond of a day and the first of the next, in either order', () => {
    const midnight = Date.UTC(2026, 10, 25)
    expect(utcDate(new Date(midnight - 1))).toBe('2026-11-24')
    expect(utcDate(new Date(midnight))).toBe('2026-11-25')
    expect(utcDate(new Date(midnight - 1))).toBe('2026-11-24')
    expect(utcDay(new Date(midnight - 1)).endIso).toBe('2026-11-25T00:00:00.000Z')
  })

  test('an invalid date throws, as toISOString does, even right after a valid one', () => {
    utcDay(new Date(Date.UTC(2026, 10, 24, 12)))
    expect(() => utcDay(new Date(Number.NaN))).toThrow(RangeError)
  })
})
