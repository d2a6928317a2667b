import { describe, expect, test } from 'bun:test'
import { Type } from '@sinclair/typebox'
import { Elysia } from 'elysia'
import { AppError } from './errors'
import { errorHandler } from './http'
import { createLogger } from './logger'
import { PathParams, QueryInt, QueryParams } from './model'

// A tiny app with the real error handler, served over real HTTP.
const logged: unknown[] = []
const logger = createLogger('silent')
logger.error = ((...args: unknown[]) => void logged.push(args)) as typeof logger.error
const app = new Elysia()
  .use(errorHandler(logger, { allowedMethods: (path) => (path === '/items' ? ['GET'] : []) }))
  .get('/items', ({ query }) => query, {
    query: QueryParams({
      limit: Type.Optional(QueryInt({ minimum: 1, maximum: 50 })),
      direction: Type.Optional(Type.Union([Type.Literal('up'), Type.Literal('down')])),
      q: Type.Optional(Type.String({ minLength: 2, maxLength: 200 })),
    }),
  })
  .get('/broken-response', () => ({ wrong: true }) as unknown as { n: number }, {
    response: { 200: Type.Object({ n: Type.Integer() }) },
  })
  .get('/crash', () => {
    throw new Error('secret internals at /srv/db:5432')
  })
  .get('/teapot', () => {
    throw new AppError('RATE_LIMIT_EXCEEDED', 'Daily quota exceeded', undefined, { 'Retry-After': '42' })
  })
  .post('/echo', ({ body }) => body, { body: Type.Object({ name: Type.String() }) })
  .get('/things/:thingId', ({ params }) => params, { params: PathParams({ thingId: QueryInt({ minimum: 1, maximum: 9 }) }) })
  .listen({ port: 0, hostname: '127.0.0.1' })
const base = `http://127.0.0.1:${app.server!.port}`
const call = async (path: string, init?: RequestInit) => {
  const response = await fetch(base + path, init)
  const body = (await response.json()) as any
  // Every envelope names its request, as the answer's X-Request-Id does.
  if (body?.error) expect(body.error.request_id).toBe(response.headers.get('x-request-id')!)
  return { status: response.status, body, headers: response.headers }
}

describe('the error envelope', () => {
  test('an out-of-range integer names the parameter and its range', async () => {
    const { status, body } = await call('/items?limit=51')
    expect(status).toBe(400)
    expect(body.error).toEqual({
      code: 'INVALID_PARAMETER',
      message: "Invalid query: 'limit' must be an integer from 1 to 50",
      details: [{ field: 'limit', message: 'must be an integer from 1 to 50' }],
      request_id: expect.any(String),
    })
  })

  // A number Elysia coerced fails against the parameter's schema alone; one it could not coerce,
  // against the whole object. Both must name the parameter and where it travels.
  test('a bad path parameter names itself and the path, coerced or not', async () => {
    for (const value of ['0', '10', '1.5', 'x']) {
      const { status, body } = await call(`/things/${value}`)
      expect({ value, status, error: body.error }).toEqual({
        value,
        status: 400,
        error: {
          code: 'INVALID_PARAMETER',
          message: "Invalid path: 'thingId' must be an integer from 1 to 9",
          details: [{ field: 'thingId', message: 'must be an integer from 1 to 9' }],
          request_id: expect.any(String),
        },
      })
    }
    expect((await call('/items?limit=x')).body.error.message).toBe("Invalid query: 'limit' must be an integer from 1 to 50")
  })

  // Number('0x5') is 5, and so are '+5', '5.', ' 5', '5e0': none of these is an integer written in decimal digits.
  test('an integer in the path or the query is decimal digits only: other spellings of a valid value are a 400 naming it', async () => {
    const spellings = ['0x5', '0X5', '0b101', '0o5', '+5', '5.', '5.0', '%205', '5%20', '%095', '05', '5e0', '0.5e1', '5_0', '٥']
    for (const value of spellings) {
      const path = await call(`/things/${value}`)
      expect({ value, status: path.status, details: path.body.error?.details }).toEqual({
        value,
        status: 400,
        details: [{ field: 'thingId', message: 'must be an integer from 1 to 9' }],
      })
      const query = await call(`/items?limit=${value}`)
      expect({ value, status: query.status, details: query.body.error?.details }).toEqual({
        value,
        status: 400,
        details: [{ field: 'limit', message: 'must be an integer from 1 to 50' }],
      })
    }
    expect((await call('/things/5')).body).toEqual({ thingId: 5 })
    expect((await call('/items?limit=50')).body).toEqual({ limit: 50 })
  })

  test('an unknown enum value lists the allowed values', async () => {
    const { body } = await call('/items?direction=sideways')
    expect(body.error.details).toEqual([{ field: 'direction', message: 'must be one of: up, down' }])
  })

  test('a too-short string says the allowed length', async () => {
    const { body } = await call('/items?q=a')
    expect(body.error.details).toEqual([{ field: 'q', message: 'must be 2 to 200 characters long' }])
  })

  test('a missing body field is reported as required; malformed JSON is 400, never 500', async () => {
    const missing = await call('/echo', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })
    expect(missing.status).toBe(400)
    expect(missing.body.error.details).toEqual([{ field: 'name', message: 'is required' }])
    const malformed = await call('/echo', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"name":' })
    expect(malformed.status).toBe(400)
    expect(malformed.body.error.code).toBe('INVALID_PARAMETER')
  })

  test('an unexpected error is a generic 500 and is logged, with no internals in the body', async () => {
    const { status, body } = await call('/crash')
    expect(status).toBe(500)
    expect(body).toEqual({ error: { code: 'INTERNAL_ERROR', message: 'Internal server error', request_id: expect.any(String) } })
    const [fields] = logged.at(-1) as [{ err: Error }]
    expect(fields.err.message).toContain('secret internals')
  })

  test('a response that breaks its own schema is a 500, not the client’s fault', async () => {
    const { status, body } = await call('/broken-response')
    expect(status).toBe(500)
    expect(body.error.code).toBe('INTERNAL_ERROR')
  })

  test('AppError headers reach the client', async () => {
    const { status, headers, body } = await call('/teapot')
    expect(status).toBe(429)
    expect(headers.get('retry-after')).toBe('42')
    expect(body.error.code).toBe('RATE_LIMIT_EXCEEDED')
  })
})
