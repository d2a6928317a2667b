import type { TSchema } from '@sinclair/typebox'
import { Elysia, ValidationError } from 'elysia'
import type { Logger } from 'pino'
import { AppError, type ErrorDetail, EXPECTATION } from './errors'
import { describeExpectation } from './expectation'
import { PARAM_IN } from './model'
import { currentRequestId, REQUEST_ID_HEADER, requestIdFor } from './request-id'
import { RefusedBody } from './request-rules'
import { databaseUnavailable, isDatabaseUnavailable } from './unavailable'

interface ValueErrorLike {
  path: string
  message: string
  schema: TSchema
  value: unknown
}

/**
 * The Content-Type of every JSON answer: Elysia's own for the objects handlers return, so the
 * responses built by hand (snapshot answers, the export attachment) say the same.
 */
export const JSON_CONTENT_TYPE = 'application/json;charset=utf-8'

/** How a message names the part of the request that failed; Elysia calls the path `params`. */
const PART_NAMES: Record<string, string> = { params: 'path', query: 'query', body: 'body', headers: 'headers', cookie: 'cookie' }

/** Turns a schema validation failure into one INVALID_PARAMETER error naming every bad field. */
export function validationToAppError(error: ValidationError): AppError {
  const issues = error.all as unknown as ValueErrorLike[]
  // Elysia checks a coerced (numeric) query or path value against its own schema alone and calls
  // the failure `property`: the parameter's name and place come from QueryParams/PathParams tags.
  const part = error.type === 'property' ? ((issues[0]?.schema[PARAM_IN as never] as string | undefined) ?? 'parameter') : (PART_NAMES[error.type] ?? error.type)
  const seen = new Set<string>()
  const details: ErrorDetail[] = []
  for (const issue of issues) {
    const field = issue.path.replace(/^\//, '').replaceAll('/', '.') || issue.schema['x-param'] || part
    if (seen.has(field)) continue
    seen.add(field)
    // Optional absent fields raise no error, so an absent value here is a required one.
    const missing = issue.value === undefined
    const expected = (issue.schema[EXPECTATION as never] as string | undefined) ?? describeExpectation(issue.schema, issue.message)
    details.push({ field, message: missing ? 'is required' : expected })
  }
  if (details.length === 0) details.push({ field: part, message: 'is invalid' })
  const message = details.map((d) => `'${d.field}' ${d.message}`).join('; ')
  return new AppError('INVALID_PARAMETER', `Invalid ${part}: ${message}`, details)
}

/**
 * Renders every failure in the spec's error envelope. Unknown errors are logged with their stack
 * and answered with a generic 500: internals never reach the client.
 * `allowedMethods` lets a 404 become a 405 when the path exists under another method.
 */
export function errorHandler(
  logger: Logger,
  hooks: {
    allowedMethods: (path: string) => string[]
    /** Fields added beside `error` for this request, e.g. its quota state. */
    extraBody?: (request: Request) => Record<string, unknown> | undefined
    /** Settles what the refusal changes before it is answered, e.g. a charge a 429 hands back; may set headers. */
    beforeAnswer?: (request: Request, error: AppError, headers: Record<string, unknown>) => Promise<void> | void
  },
) {
  return new Elysia({ name: 'error-handler' }).onError({ as: 'global' }, async ({ code, error, request, set }) => {
    let appError: AppError
    if (error instanceof AppError) appError = error
    // A body refused by request-rules on a route whose guard did not judge it first.
    else if (error instanceof ValidationError && error.value instanceof RefusedBody) appError = error.value.error
    // A response that fails its own schema is our bug, not the client's: it falls through to 500.
    else if (error instanceof ValidationError && error.type !== 'response') appError = validationToAppError(error)
    // A refusal thrown while the body was read (413), which Elysia wraps.
    else if (code === 'PARSE' && error.cause instanceof AppError) appError = error.cause
    else if (code === 'NOT_FOUND') {
      // Only an origin-form target (`/path`) or an absolute one has a path: `CONNECT host:port` has none.
      const path = URL.parse(request.url)?.pathname
      const allowed = path === undefined ? [] : hooks.allowedMethods(path)
      if (path === undefined) {
        appError = new AppError('INVALID_PARAMETER', `The request target must be a path, not ${request.url}`, [{ field: 'target', message: 'must be a path' }])
      } else if (allowed.length > 0 && !allowed.includes(request.method)) {
        set.headers.allow = allowed.join(', ')
        appError = new AppError('METHOD_NOT_ALLOWED', `Method ${request.method} is not allowed on ${path}`)
      } else appError = new AppError('NOT_FOUND', `No route for ${request.method} ${path}`)
    } else if (code === 'PARSE') {
      appError = new AppError('INVALID_PARAMETER', 'The request body could not be parsed', [{ field: 'body', message: 'is not valid for its content type' }])
    } else if (isDatabaseUnavailable(error)) {
      // Not our bug: the database is down or too slow. The client can retry; the log says why.
      logger.warn({ err: error, method: request.method, url: request.url }, 'database unavailable')
      appError = databaseUnavailable()
    } else {
      logger.error({ err: error, method: request.method, url: request.url }, 'unhandled error')
      appError = new AppError('INTERNAL_ERROR', 'Internal server error')
    }
    await hooks.beforeAnswer?.(request, appError, set.headers)
    set.status = appError.status
    if (appError.headers) Object.assign(set.headers, appError.headers)
    // A request Bun's router could not match (`OPTIONS *`) reaches Elysia without the request step: it gets its id here.
    const requestId = currentRequestId() ?? requestIdFor(request.headers.get(REQUEST_ID_HEADER))
    set.headers[REQUEST_ID_HEADER] = requestId
    return { ...appError.toBody(requestId), ...hooks.extraBody?.(request) }
  })
}

/**
 * What answers an error that escapes Elysia's handler (an error thrown by the handler itself): the
 * request step's last resort, and Bun's `error` option behind it, where Bun would otherwise send its
 * development page (stack, source, paths) whenever NODE_ENV is not `production`. Outside a request
 * (Bun's option) the answer gets an id of its own.
 */
export function lastResortErrorResponse(logger: Logger) {
  return (error: unknown) => {
    logger.error({ err: error }, 'error escaped the error handler')
    const requestId = currentRequestId() ?? requestIdFor(null)
    return new Response(JSON.stringify(new AppError('INTERNAL_ERROR', 'Internal server error').toBody(requestId)), {
      status: 500,
      headers: { 'content-type': JSON_CONTENT_TYPE, [REQUEST_ID_HEADER]: requestId },
    })
  }
}
