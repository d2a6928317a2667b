/**
 * The closed error vocabulary: the spec's codes plus docs/adr/0027-errors-beyond-the-contract.md's. Every error response is
 * `{ error: { message, code, details? } }`, with the status taken from this one table.
 */
export const ERROR_STATUS = {
  INVALID_PARAMETER: 400,
  API_KEY_REQUIRED: 401,
  INVALID_API_KEY: 401,
  UNAUTHORIZED: 401,
  TIER_REQUIRED: 403,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  CONDITION_PRICES_UNAVAILABLE: 404,
  METHOD_NOT_ALLOWED: 405,
  REQUEST_TIMEOUT: 408,
  CONFLICT: 409,
  PAYLOAD_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  RATE_LIMIT_EXCEEDED: 429,
  LIVE_FETCH_LIMIT: 429,
  TOO_MANY_ATTEMPTS: 429,
  INTERNAL_ERROR: 500,
  SERVICE_UNAVAILABLE: 503,
  UPSTREAM_UNAVAILABLE: 503,
} as const

export type ErrorCode = keyof typeof ERROR_STATUS

export interface ErrorDetail {
  field: string
  message: string
}

export interface ErrorBody {
  error: { message: string; code: ErrorCode; details?: ErrorDetail[]; request_id?: string }
}

/** A failure the client should see as is. Services throw it; the HTTP layer renders it. */
export class AppError extends Error {
  override name = 'AppError'
  readonly status: number

  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: ErrorDetail[],
    /** Extra response headers, e.g. Retry-After. */
    readonly headers?: Record<string, string>,
  ) {
    super(message)
    this.status = ERROR_STATUS[code]
  }

  /** The envelope; every answer's carries the id of the request it answers (docs/adr/0121-request-ids-and-the-access-log.md). */
  toBody(requestId?: string): ErrorBody {
    return {
      error: { message: this.message, code: this.code, ...(this.details ? { details: this.details } : {}), ...(requestId === undefined ? {} : { request_id: requestId }) },
    }
  }
}

/**
 * A schema's own wording of what its value must be, for the 400 that refuses it, where the generic
 * wording (from its type and bounds) would not tell the client what to do. A symbol key: OpenAPI never shows it.
 */
export const EXPECTATION = Symbol.for('tcg.expectation')

export const notFound = (what: string) => new AppError('NOT_FOUND', `${what} not found`)

/** 400 for a query string the schema let through: `Invalid query: <message>`, naming each bad field. */
export const invalidQuery = (message: string, details: ErrorDetail[]) => new AppError('INVALID_PARAMETER', `Invalid query: ${message}`, details)

/** invalidQuery for one field: `Invalid query: '<field>' <message>`, the same message in its detail. */
export const invalidField = (field: string, message: string) => invalidQuery(`'${field}' ${message}`, [{ field, message }])

/** A configuration the service cannot start with (the environment, or a catalog filled by another source); never an answer to a client. */
export class ConfigError extends Error {
  override name = 'ConfigError'
}
