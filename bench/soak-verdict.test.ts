import { describe, expect, test } from 'bun:test'
import type { SoakRecord } from './soak-client'
import { type AccountCheck, clientCounts, explainedByKill, type Kill, percentile, quotaVerdict, tallyErrors } from './soak-verdict'

const kill: Kill = { server: 'node-a', at: 10_000, downAt: 12_000 }
const record = (overrides: Partial<SoakRecord>): SoakRecord => ({ kind: 'GET /v1/search', at: 9_990, ms: 20, lag: 0, status: 200, units: 1, expected: true, ...overrides })

describe('which errors the kill explains', () => {
  test('a 502 or no answer on the killed node, in flight when it died, is explained', () => {
    expect(explainedByKill(record({ status: 502, server: 'node-a', expected: false }), kill)).toBe(true)
    expect(explainedByKill(record({ status: 0, error: 'ECONNRESET', expected: false }), kill)).toBe(true)
  })

  test('on the other node, before the kill, after the node was out, or an answer of the service itself, it is not', () => {
    expect(explainedByKill(record({ status: 502, server: 'node-b', expected: false }), kill)).toBe(false)
    expect(explainedByKill(record({ status: 502, server: 'node-a', at: 9_000, ms: 5, expected: false }), kill)).toBe(false)
    expect(explainedByKill(record({ status: 502, server: 'node-a', at: 12_500, expected: false }), kill)).toBe(false)
    expect(explainedByKill(record({ status: 500, server: 'node-a', expected: false }), kill)).toBe(false)
    expect(explainedByKill(record({ status: 502, server: 'node-a', expected: false }), undefined)).toBe(false)
  })

  test('the tally counts expected answers as no error and labels the rest', () => {
    const tally = tallyErrors([record({}), record({ status: 502, server: 'node-a', expected: false }), record({ status: 503, at: 5_000, expected: false })], kill)
    expect([...tally.explained]).toEqual([['502 from node-a: GET /v1/search', 1]])
    expect([...tally.unexplained]).toEqual([['503: GET /v1/search', 1]])
  })
})

describe('quota exactness', () => {
  const check = (overrides: Partial<AccountCheck>): AccountCheck => ({
    accountId: 1,
    admitted: 100,
    refused: 0,
    lostUnits: 0,
    lastSecondOnKilled: 0,
    used: 100,
    rejected: 0,
    perKey: 100,
    danglingLeases: 0,
    ...overrides,
  })

  test('an account the kill did not touch must match exactly', () => {
    expect(quotaVerdict(check({})).pass).toBe(true)
    expect(quotaVerdict(check({ used: 101, perKey: 101 })).pass).toBe(false)
    expect(quotaVerdict(check({ rejected: 1 })).pass).toBe(false)
  })

  test("a dead lease's unused units and lost requests are the kill's share, nothing more", () => {
    expect(quotaVerdict(check({ used: 180, perKey: 95, danglingLeases: 1, lastSecondOnKilled: 10 })).pass).toBe(true)
    expect(quotaVerdict(check({ used: 99, perKey: 99, lostUnits: 3 })).pass).toBe(false)
    expect(quotaVerdict(check({ used: 103, perKey: 103, lostUnits: 3 })).pass).toBe(true)
    expect(quotaVerdict(check({ used: 104, perKey: 104, lostUnits: 3 })).pass).toBe(false)
    expect(quotaVerdict(check({ used: 180, perKey: 80, danglingLeases: 1, lastSecondOnKilled: 10 })).pass).toBe(false)
  })

  test('the client counts admitted units, 429s, lost units and the killed node’s last second', () => {
    const counts = clientCounts(
      [
        record({ account: 1, units: 3, server: 'node-a', at: 9_500 }),
        record({ account: 1, status: 429 }),
        record({ account: 1, status: 502, units: 2 }),
        record({ account: 1, status: 401 }),
        record({ account: 1, status: 404, server: 'node-b' }),
      ],
      kill,
    )
    expect(counts.get(1)).toEqual({ admitted: 4, refused: 1, lostUnits: 2, lastSecondOnKilled: 3 })
  })
})

test('percentile is the nearest rank', () => {
  expect(percentile([5, 1, 3, 2, 4], 0.5)).toBe(3)
  expect(percentile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 0.99)).toBe(10)
  expect(percentile([], 0.99)).toBeNaN()
})
