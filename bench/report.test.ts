import { describe, expect, test } from 'bun:test'
import { type BudgetRow, mergeResults, type ResultSection } from './report'

const row = (bench: string, value: string, pass?: boolean): BudgetRow => ({ bench, measure: `${bench} measure`, value, budget: '≤ 1', pass })
const section = (bench: string, date: string, value: string): ResultSection => ({ bench, date, machine: `machine of ${date}`, rows: [row(bench, value, true)] })
const HEADER = '# Results\n'
const ORDER = ['a', 'b', 'c']

describe('bench/results.md', () => {
  test('a run of some benches replaces their sections and keeps the others with their own date and machine', () => {
    const first = mergeResults('', [section('a', '2026-01-01T00:00:00Z', 'a1'), section('b', '2026-01-01T00:00:00Z', 'b1')], ORDER, HEADER)
    const second = mergeResults(first, [section('b', '2026-02-02T00:00:00Z', 'b2')], ORDER, HEADER)
    expect(second).toContain('| a measure | a1 | ≤ 1 | PASS |')
    expect(second).toContain('2026-01-01 · machine of 2026-01-01T00:00:00Z')
    expect(second).toContain('| b measure | b2 | ≤ 1 | PASS |')
    expect(second).toContain('2026-02-02 · machine of 2026-02-02T00:00:00Z')
    expect(second).not.toContain('b1')
    expect(second.startsWith(HEADER)).toBe(true)
  })

  test('sections follow the bench order whatever order the runs came in, and a merge with nothing new changes nothing', () => {
    const merged = mergeResults(mergeResults('', [section('c', '2026-01-01T00:00:00Z', 'c1')], ORDER, HEADER), [section('a', '2026-01-02T00:00:00Z', 'a1')], ORDER, HEADER)
    expect(merged.indexOf('### a')).toBeLessThan(merged.indexOf('### c'))
    expect(mergeResults(merged, [], ORDER, HEADER)).toBe(merged)
  })

  test('a note is kept with its section until that bench runs again', () => {
    const noted = mergeResults('', [{ ...section('a', '2026-01-01T00:00:00Z', 'a1'), note: 'Measured by hand.' }], ORDER, HEADER)
    expect(mergeResults(noted, [section('b', '2026-01-02T00:00:00Z', 'b1')], ORDER, HEADER)).toContain('Measured by hand.')
    expect(mergeResults(noted, [section('a', '2026-01-03T00:00:00Z', 'a2')], ORDER, HEADER)).not.toContain('Measured by hand.')
  })
})
