// Here rather than in src/db: it reads only an error's code and severity, and the HTTP error
// handler (shared) must tell an outage from a bug without depending on the database layer.
import { AppError } from './errors'

/** What a client is told to wait before trying again while the database is away. */
export const DATABASE_RETRY_AFTER_SECONDS = 5

/** Socket-level failures (Node's and postgres.js's own codes): the server cannot be reached or went away. */
const CONNECTION_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'CONNECT_TIMEOUT',
  'CONNECTION_CLOSED',
  'CONNECTION_ENDED',
  'CONNECTION_DESTROYED',
])

/**
 * SQLSTATEs meaning the server cannot serve now, not that the query is wrong (docs/adr/0077-database-outage.md): 57014 a statement timeout (or a cancel); class 57P a connection ended by the
 * server (57P01 administrator command, 57P02 crash of another process, 57P03 starting up, shutting
 * down or in recovery, 57P04 database dropped, 57P05 idle session timeout); class 53 resources (53300
 * no connection slot left, 53100 disk full, 53200 out of memory); class 08 a connection exception.
 */
const UNAVAILABLE_SQLSTATE = /^(57014|57P0[1-5]|53[0-3]00|08[0-9A-Z]{3})$/

/**
 * SQLSTATEs that say "not now" only when they refuse a connection (severity FATAL): 55000 "database
 * … is not currently accepting connections" (ALLOW_CONNECTIONS false), 3D000 "database … does not
 * exist" (dropped for a restore). Raised by a statement, they are the statement's own fault.
 */
const REFUSED_CONNECTION_SQLSTATES = new Set(['55000', '3D000'])

/**
 * Whether `error` says the database cannot answer now (as opposed to a bug or a refused query).
 * Follows `cause` (drizzle wraps the driver's error in a DrizzleQueryError) and an AggregateError's
 * `errors` (a connection tried on several addresses).
 */
export function isDatabaseUnavailable(error: unknown, depth = 0): boolean {
  if (typeof error !== 'object' || error === null || depth > 8) return false
  const { code, severity, cause, errors } = error as { code?: unknown; severity?: unknown; cause?: unknown; errors?: unknown }
  if (typeof code === 'string') {
    if (CONNECTION_CODES.has(code) || UNAVAILABLE_SQLSTATE.test(code)) return true
    if (REFUSED_CONNECTION_SQLSTATES.has(code) && severity === 'FATAL') return true
  }
  if (Array.isArray(errors) && errors.some((inner) => isDatabaseUnavailable(inner, depth + 1))) return true
  return isDatabaseUnavailable(cause, depth + 1)
}

/** The client's answer while the database is away: 503 with Retry-After, in the usual envelope. */
export function databaseUnavailable(): AppError {
  return new AppError('SERVICE_UNAVAILABLE', 'The database is temporarily unavailable; try again shortly', undefined, {
    'retry-after': String(DATABASE_RETRY_AFTER_SECONDS),
  })
}
