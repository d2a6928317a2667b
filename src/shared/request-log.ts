import type { Clock } from './clock'
import { FrequentLines, type Logger } from './logger'
import type { RequestDone, RequestRecord } from './request-record'

/** How often buffered access lines are written at the latest. */
const ACCESS_LOG_FLUSH_MS = 1_000

/**
 * The access log: one info line per request, `request` with its method, route template, status,
 * duration, body bytes when known, account and request id: never the raw path, its query, a key or
 * a cookie (docs/adr/0121-request-ids-and-the-access-log.md). The line is the JSON pino would write
 * for these fields, written as bytes into FrequentLines' buffer with no string built for it
 * (docs/adr/0128-the-access-line-written-as-bytes.md), and written out within a second; `close`
 * writes what waits. None when the logger is quieter than info.
 */
export function accessLog(logger: Logger, clock: Pick<Clock, 'now' | 'every'>): { done: RequestDone | undefined; close(): void } {
  if (!logger.isLevelEnabled('info')) return { done: undefined, close() {} }
  const lines = new FrequentLines(logger)
  const flushing = clock.every(ACCESS_LOG_FLUSH_MS, () => lines.flush(), { unref: true })
  const start = `{"level":${logger.levels.values.info},"time":`
  const done = (record: RequestRecord) => {
    lines.ascii(start)
    lines.number(clock.now().getTime())
    lines.ascii(',"method":')
    lines.string(record.method)
    lines.ascii(',"route":')
    lines.string(record.route)
    lines.ascii(',"status":')
    lines.number(record.status)
    lines.ascii(',"duration_ms":')
    lines.number(Math.round(record.durationMs * 1000) / 1000)
    if (isNumber(record.bytes)) {
      lines.ascii(',"bytes":')
      lines.number(record.bytes)
    }
    if (isNumber(record.accountId)) {
      lines.ascii(',"account_id":')
      lines.number(record.accountId)
    }
    lines.ascii(',"request_id":')
    lines.string(record.requestId)
    lines.ascii(',"msg":"request"}')
    lines.endLine()
  }
  return {
    done,
    close() {
      flushing.cancel()
      lines.flush()
    },
  }
}

/** A value the line writes as a number: undefined and non-finite ones (JSON has no NaN) are left out. */
const isNumber = (value: number | undefined): value is number => value !== undefined && Number.isFinite(value)

/** Every consumer of the request record, called in turn; undefined when there is none, so the request step skips it. */
export function allOf(consumers: (RequestDone | undefined)[]): RequestDone | undefined {
  const present = consumers.filter((consumer) => consumer !== undefined)
  if (present.length <= 1) return present[0]
  return (record) => {
    for (const consumer of present) consumer(record)
  }
}
