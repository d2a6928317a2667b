import type { Clock } from './clock'
import { frequentLines, type Logger } from './logger'
import type { RequestDone, RequestRecord } from './request-record'

/** How often buffered access lines are written at the latest. */
const ACCESS_LOG_FLUSH_MS = 1_000

/**
 * The access log: one info line per request, `request` with its method, route template, status,
 * duration, body bytes when known, account and request id: never the raw path, its query, a key or
 * a cookie (docs/adr/0121-request-ids-and-the-access-log.md). The line is built here rather than
 * by pino (a third of the cost, fields fixed), scrubbed of key-shaped values and buffered by
 * frequentLines, written within a second; `close` writes what waits. None when the logger is
 * quieter than info.
 */
export function accessLog(logger: Logger, clock: Pick<Clock, 'now' | 'every'>): { done: RequestDone | undefined; close(): void } {
  if (!logger.isLevelEnabled('info')) return { done: undefined, close() {} }
  const { write, flush } = frequentLines(logger)
  const flushing = clock.every(ACCESS_LOG_FLUSH_MS, flush, { unref: true })
  const start = `{"level":${logger.levels.values.info},"time":`
  const done = (record: RequestRecord) => write(`${start}${clock.now().getTime()}${accessFields(record)},"msg":"request"}\n`)
  return {
    done,
    close() {
      flushing.cancel()
      flush()
    },
  }
}

/** The record's fields as pino would write them (`,"name":value` each, undefined ones left out), strings escaped by JSON.stringify. */
function accessFields(record: RequestRecord): string {
  return (
    `,"method":${JSON.stringify(record.method)},"route":${JSON.stringify(record.route)},"status":${record.status}` +
    `,"duration_ms":${Math.round(record.durationMs * 1000) / 1000}${numberField('bytes', record.bytes)}${numberField('account_id', record.accountId)}` +
    `,"request_id":${JSON.stringify(record.requestId)}`
  )
}

/** `,"name":value`, or nothing for a value that is undefined or not a finite number (JSON has no NaN). */
const numberField = (name: string, value: number | undefined) => (value !== undefined && Number.isFinite(value) ? `,"${name}":${value}` : '')

/** Every consumer of the request record, called in turn; undefined when there is none, so the request step skips it. */
export function allOf(consumers: (RequestDone | undefined)[]): RequestDone | undefined {
  const present = consumers.filter((consumer) => consumer !== undefined)
  if (present.length <= 1) return present[0]
  return (record) => {
    for (const consumer of present) consumer(record)
  }
}
