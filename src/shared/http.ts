import type { TSchema } from '@sinclair/typebox'
import { Elysia, ValidationError } from 'elysia'
import type { Logger } from 'pino'
import { AppError, type ErrorDetail } from './errors'

interface ValueErrorLike {
  path: string
  message: string
  schema: TSchema
  value: unknown
}

const FORMAT_EXPECTATIONS: Record<string, string> = {
  'date-time': 'must be an ISO 8601 date-time with a zone, e.g. 2026-11-20T00:00:00Z',
  date: 'must be a date, YYYY-MM-DD',
  email: 'must be an email address',
  uri: 'must be an absolute URL',
}

/** "must be an integer from 1 to 100", "must be one of: up, down": what a client can act on. */
export function describeExpectation(schema: TSchema, fallback: string): string {
  const literals = (schema.anyOf as TSchema[] | undefined)?.map((s) => s.const).filter((v) => v !== undefined)
  if (literals && literals.length > 0) return `must be one of: ${literals.join(', ')}`
  if (Array.isArray(schema.enum)) return `must be one of: ${schema.enum.join(', ')}`
  if (schema.type === 'integer' || schema.type === 'number') {
    const kind = schema.type === 'integer' || schema.multipleOf === 1 ? 'an integer' : 'a number'
    if (schema.minimum !== undefined && schema.maximum !== undefined)
      return `must be ${kind} from ${schema.minimum} to ${schema.maximum}`
    if (schema.minimum !== undefined) return `must be ${kind} of at least ${schema.minimum}`
    if (schema.maximum !== undefined) return `must be ${kind} of at most ${schema.maximum}`
    return `must be ${kind}`
  }
  if (schema.type === 'string' && typeof schema.format === 'string' && FORMAT_EXPECTATIONS[schema.format]) {
    return FORMAT_EXPECTATIONS[schema.format]!
  }
  if (schema.type === 'string') {
    const { minLength: min, maxLength: max } = schema
    if (min !== undefined && max !== undefined) return `must be ${min} to ${max} characters long`
    if (min !== undefined) return `must be at least ${min} characters long`
    if (max !== undefined) return `must be at most ${max} characters long`
  }
  return fallback.charAt(0).toLowerCase() + fallback.slice(1)
}

/** Turns a schema validation failure into one INVALID_PARAMETER error naming every bad field. */
export function validationToAppError(error: ValidationError): AppError {
  const seen = new Set<string>()
  const details: ErrorDetail[] = []
  for (const issue of error.all as unknown as ValueErrorLike[]) {
    const field = issue.path.replace(/^\//, '').replaceAll('/', '.') || issue.schema['x-param'] || error.type
    if (seen.has(field)) continue
    seen.add(field)
    // Optional absent fields raise no error, so an absent value here is a required one.
    const missing = issue.value === undefined
    details.push({ field, message: missing ? 'is required' : describeExpectation(issue.schema, issue.message) })
  }
  if (details.length === 0) details.push({ field: error.type, message: 'is invalid' })
  const message = details.map((d) => `'${d.field}' ${d.message}`).join('; ')
  return new AppError('INVALID_PARAMETER', `Invalid ${error.type}: ${message}`, details)
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
  },
) {
  return new Elysia({ name: 'error-handler' }).onError({ as: 'global' }, ({ code, error, request, set }) => {
    let appError: AppError
    if (error instanceof AppError) appError = error
    // A response that fails its own schema is our bug, not the client's: it falls through to 500.
    else if (error instanceof ValidationError && error.type !== 'response') appError = validationToAppError(error)
    else if (code === 'NOT_FOUND') {
      const path = new URL(request.url).pathname
      const allowed = hooks.allowedMethods(path)
      if (allowed.length > 0 && !allowed.includes(request.method)) {
        set.headers.allow = allowed.join(', ')
        appError = new AppError('METHOD_NOT_ALLOWED', `Method ${request.method} is not allowed on ${path}`)
      } else appError = new AppError('NOT_FOUND', `No route for ${request.method} ${path}`)
    } else if (code === 'PARSE') {
      appError = new AppError('INVALID_PARAMETER', 'The request body could not be parsed', [
        { field: 'body', message: 'is not valid for its content type' },
      ])
    } else {
      logger.error({ err: error, method: request.method, url: request.url }, 'unhandled error')
      appError = new AppError('INTERNAL_ERROR', 'Internal server error')
    }
    set.status = appError.status
    if (appError.headers) Object.assign(set.headers, appError.headers)
    return { ...appError.toBody(), ...hooks.extraBody?.(request) }
  })
}
