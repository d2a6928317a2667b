import { AppError } from '../shared/errors'

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
 * SQLSTATEs meaning the server cannot serve now, not that the query is wrong: 57014 a statement
 * timeout (or a cancel), 57P01..57P03 an administrator shutdown, a crash or a server still starting,
 * 53300 no connection slot left; class 08 (connection exceptions) is matched by prefix.
 */
const UNAVAILABLE_SQLSTATES = new Set(['57014', '57P01', '57P02', '57P03', '53300'])

/**
 * Whether `error` says the database cannot answer now (as opposed to a bug or a refused query).
 * Follows `cause` (drizzle wraps the driver's error in a DrizzleQueryError) and an AggregateError's
 * `errors` (a connection tried on several addresses).
 */
export function isDatabaseUnavailable(error: unknown, depth = 0): boolean {
  if (typeof error !== 'object' || error === null || depth > 8) return false
  const { code, cause, errors } = error as { code?: unknown; cause?: unknown; errors?: unknown }
  if (typeof code === 'string' && (CONNECTION_CODES.has(code) || UNAVAILABLE_SQLSTATES.has(code) || /^08[0-9A-Z]{3}$/.test(code))) return true
  if (Array.isArray(errors) && errors.some((inner) => isDatabaseUnavailable(inner, depth + 1))) return true
  return isDatabaseUnavailable(cause, depth + 1)
}

/** The client's answer while the database is away: 503 with Retry-After, in the usual envelope. */
export function databaseUnavailable(): AppError {
  return new AppError('SERVICE_UNAVAILABLE', 'The database is temporarily unavailable; try again shortly', undefined, {
    'retry-after': String(DATABASE_RETRY_AFTER_SECONDS),
  })
}
