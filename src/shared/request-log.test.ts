import { describe, expect, test } from 'bun:test'
import { fakeClock } from '../../test/helpers/clock'
import { createLogger, type LogLevel } from './logger'
import { accessLog } from './request-log'
import type { RequestRecord } from './request-record'

// The access line is built by hand (docs/adr/0121-request-ids-and-the-access-log.md): what pino
// would write for the same fields, JSON whatever the values, and scrubbed of keys like every line.

function captured(level: LogLevel = 'info') {
  const lines: string[] = []
  const clock = fakeClock()
  const log = accessLog(createLogger(level, { write: (line: string) => void lines.push(line) }), clock)
  return { lines, clock, log, parsed: () => lines.map((line) => JSON.parse(line)) }
}

const RECORD: RequestRecord = {
  method: 'GET',
  route: '/v1/cards/:id/prices',
  status: 200,
  durationMs: 0.123456,
  bytes: 1234,
  accountId: 42,
  tier: 'pro',
  requestId: 'abc-123',
}

describe('the access line', () => {
  test('the fields pino would write, in one line, its time from the clock', () => {
    const { lines, clock, log } = captured()
    log.done!(RECORD)
    expect(lines).toHaveLength(1)
    expect(lines[0]!.endsWith('}\n')).toBe(true)
    expect(lines[0]!.slice(0, -1)).not.toContain('\n')
    expect(JSON.parse(lines[0]!)).toEqual({
      level: 30,
      time: clock.now().getTime(),
      method: 'GET',
      route: '/v1/cards/:id/prices',
      status: 200,
      duration_ms: 0.123,
      bytes: 1234,
      account_id: 42,
      request_id: 'abc-123',
      msg: 'request',
    })
  })

  test('unknown bytes and account are left out, as is a length that is no number', () => {
    const { log, parsed } = captured()
    log.done!({ ...RECORD, bytes: undefined, accountId: undefined, tier: undefined })
    log.done!({ ...RECORD, bytes: Number.NaN })
    const [unknown, notANumber] = parsed()
    expect(Object.keys(unknown)).toEqual(['level', 'time', 'method', 'route', 'status', 'duration_ms', 'request_id', 'msg'])
    expect('bytes' in notANumber).toBe(false)
  })

  test('odd values stay JSON: quotes, backslashes, control characters, line separators, non-ASCII', () => {
    const { lines, log, parsed } = captured()
    const odd = ['M"E\\T', 'a\nb\r\tc\u0000d', '/v1/\u2028\u2029', '/ünï/çødé/🃏', '{"msg":"forged"}']
    for (const value of odd) log.done!({ ...RECORD, method: value, route: value, requestId: value })
    expect(lines.every((line) => line.indexOf('\n') === line.length - 1)).toBe(true)
    expect(parsed().map(({ method, route, request_id, msg }) => [method, route, request_id, msg])).toEqual(odd.map((value) => [value, value, value, 'request']))
  })

  test('numbers as JSON writes them: whole ones digit by digit, others as String gives them', () => {
    const { log, parsed } = captured()
    const numbers = [0, 7, 10, 99, 100, 1_000_000, 2 ** 53 - 1, -3, 1.5, 1e21]
    for (const value of numbers) log.done!({ ...RECORD, status: value, bytes: value, accountId: value, durationMs: value })
    expect(parsed().map(({ status, bytes, account_id, duration_ms }) => [status, bytes, account_id, duration_ms])).toEqual(
      numbers.map((value) => [value, value, value, Math.round(value * 1000) / 1000]),
    )
  })

  test('a line longer than the buffer is written whole, and the next one after it', () => {
    const { lines, log, parsed } = captured()
    const long = `/v1/${'ü"'.repeat(20_000)}`
    log.done!({ ...RECORD, route: long })
    log.done!(RECORD)
    expect(lines).toHaveLength(2)
    expect(parsed().map(({ route }) => route)).toEqual([long, RECORD.route])
  })

  test('a key-shaped value in any field is redacted, the display prefix kept', () => {
    const { lines, log, parsed } = captured()
    const key = 'tcg_live_0123456789abcdefghijABCDEFGHIJ01'
    log.done!({ ...RECORD, requestId: key })
    log.done!({ ...RECORD, route: `/v1/games/${key.toUpperCase()}` })
    log.done!({ ...RECORD, method: `tcg%5Flive%5F${key.slice(9)}` })
    log.done!({ ...RECORD, requestId: 'tcg_live_AbCd' })
    expect(lines.join('')).not.toContain('0123456789')
    expect(parsed().map(({ method, route, request_id }) => [method, route, request_id])).toEqual([
      ['GET', '/v1/cards/:id/prices', 'tcg_live_[redacted]'],
      ['GET', '/v1/games/tcg_live_[redacted]', 'abc-123'],
      ['tcg_live_[redacted]', '/v1/cards/:id/prices', 'abc-123'],
      ['GET', '/v1/cards/:id/prices', 'tcg_live_AbCd'],
    ])
  })

  test('none from a logger quieter than info, and no timer', () => {
    const { lines, clock, log } = captured('warn')
    expect(log.done).toBeUndefined()
    expect(clock.pending()).toBe(0)
    log.close()
    expect(lines).toEqual([])
  })
})
