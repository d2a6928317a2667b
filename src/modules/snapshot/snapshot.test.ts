import { describe, expect, test } from 'bun:test'
import { rankByMove } from './snapshot'

/** The order rankByMove must give, by the plain comparator sort it replaces. */
function bySort(changes: Float64Array, sign: 1 | -1): number[] {
  const moved: number[] = []
  for (let i = 0; i < changes.length; i++) if (changes[i]! * sign > 0) moved.push(i)
  return moved.sort((a, b) => (changes[b]! - changes[a]!) * sign || a - b)
}

describe('rankByMove', () => {
  test('gains largest first and losses largest drop first, ties in position order, zero and NaN in neither', () => {
    const changes = Float64Array.from([0.5, -2, Number.NaN, 0, 0.5, -2, 3, -0, -0.25, 3, 0.5])
    const { up, down } = rankByMove(changes)
    expect([...up]).toEqual([6, 9, 0, 4, 10])
    expect([...down]).toEqual([1, 5, 8])
  })

  test.each([
    ['few distinct values, many ties', 20_000, () => Math.round((Math.random() - 0.5) * 20) / 4],
    ['all distinct', 20_000, () => (Math.random() - 0.5) * 1e3],
    ['tiny and huge magnitudes', 5_000, () => (Math.random() < 0.5 ? -1 : 1) * 10 ** (Math.random() * 40 - 20)],
  ])('%s: the same order as sorting positions with a comparator', (_, length, draw) => {
    const changes = Float64Array.from({ length }, () => (Math.random() < 0.1 ? Number.NaN : Math.random() < 0.1 ? 0 : draw()))
    const { up, down } = rankByMove(changes)
    expect([...up]).toEqual(bySort(changes, 1))
    expect([...down]).toEqual(bySort(changes, -1))
  })

  test('nothing moved, or nothing at all', () => {
    for (const changes of [new Float64Array(0), Float64Array.from([0, Number.NaN, -0])]) {
      const { up, down } = rankByMove(changes)
      expect(up.length + down.length).toBe(0)
    }
    const onlyGains = rankByMove(Float64Array.from([1, 2, 1]))
    expect([...onlyGains.up]).toEqual([1, 0, 2])
    expect(onlyGains.down.length).toBe(0)
  })
})
