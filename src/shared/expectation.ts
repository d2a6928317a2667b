import type { TSchema } from '@sinclair/typebox'

// Apart from http.ts so that config.ts can word its errors the same way without loading Elysia.

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
    const kind = schema.type === 'integer' ? 'an integer' : 'a number'
    if (schema.minimum !== undefined && schema.maximum !== undefined) return `must be ${kind} from ${schema.minimum} to ${schema.maximum}`
    if (schema.minimum !== undefined) return `must be ${kind} of at least ${schema.minimum}`
    if (schema.maximum !== undefined) return `must be ${kind} of at most ${schema.maximum}`
    return `must be ${kind}`
  }
  if (schema.type === 'boolean') return 'must be true or false'
  if (schema.type === 'object') return 'must be a JSON object'
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
