import { describe, expect, test } from 'bun:test'
import { sql } from 'drizzle-orm'
import { type App, everyRequest, type RequestStep } from '../../src/app'
import { accountWithKey } from '../helpers/auth'
import { freshDatabase, selectRows, testLogger } from '../helpers/db'
import { startServer } from '../helpers/server'
import { rawExchange } from '../property/raw-http'

// The app's one entry (everyRequest in app.ts): every request passes its steps, whether a hot
// route answers it before Elysia or Elysia does. And a hot read's first answer and its repeats
// come from one writer: the same status, headers and framing.

const database = await freshDatabase('seeded')
const [{ id: cardId }] = (await selectRows<{ id: number }>(database.db, sql`select min(card_id)::int as id from card_prices`)) as [{ id: number }]

const seen: string[] = []
const reachedApp: string[] = []
// A step that notes the request and marks its answer.
const noting: RequestStep = async (request, next) => {
  seen.push(`${request.method} ${new URL(request.url).pathname}`)
  const response = await next(request)
  response.headers.set('x-passed', 'every-request')
  return response
}
const countRequests = (app: App) => app.onRequest(({ request }) => void reachedApp.push(new URL(request.url).pathname)) as unknown as App
const server = startServer({ db: database.db, redis: undefined, logger: testLogger, requestSteps: [noting] }, countRequests)
await server.ready()

describe('every request passes everyRequest', () => {
  test('a hot read answered before Elysia, its first ask, an ordinary route, a 404 and a POST', async () => {
    const { key } = await accountWithKey(database.db, 'pro')
    const path = `/v1/cards/${cardId}/prices`
    const first = await server.get(path, { headers: { 'x-api-key': key } })
    await first.arrayBuffer()
    const reached = reachedApp.length
    const repeat = await server.get(path, { headers: { 'x-api-key': key } })
    await repeat.arrayBuffer()
    expect(repeat.status).toBe(200)
    expect(reachedApp.length).toBe(reached) // answered before Elysia
    const others = [
      await server.get('/health'),
      await server.get('/v1/nowhere'),
      await server.get('/v1/auth/login', { method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } }),
    ]
    for (const response of [first, repeat, ...others]) expect(response.headers.get('x-passed')).toBe('every-request')
    expect(others.map((response) => response.status)).toEqual([200, 404, 400])
    expect(seen.slice(-5)).toEqual([`GET ${path}`, `GET ${path}`, 'GET /health', 'GET /v1/nowhere', 'POST /v1/auth/login'])
  })

  test('with no steps it is the handler itself', () => {
    const handler = (_request: Request) => new Response('ok')
    expect(everyRequest([], handler)).toBe(handler)
  })
})

describe("a hot read's first answer and its repeat", () => {
  // Below 4 KiB, 4 to 15 KiB (framed differently on the two paths once) and over: one writer frames both alike.
  const paths = [`/v1/cards/${cardId}/prices`, '/v1/prices/top-movers?period=7d&limit=5', '/v1/prices/top-movers?period=30d&limit=20', '/v1/prices/top-movers?period=30d&limit=50']
  for (const path of paths) {
    test(`${path}: the same headers, framing included, but the quota's`, async () => {
      const { key } = await accountWithKey(database.db, 'pro')
      // Raw HTTP, which shows the framing (Content-Length or chunked); a key of its own per path,
      // so the first answer is the route's in Elysia.
      const port = Number(new URL(server.base).port)
      const ask = async () => {
        const request = `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-API-Key: ${key}\r\nConnection: close\r\n\r\n`
        const outcome = await rawExchange(port, Buffer.from(request), { head: false, timeoutMs: 5_000 })
        if (outcome.kind !== 'response') throw new Error(`no answer: ${outcome.kind}`)
        return outcome.response
      }
      const first = await ask()
      const reached = reachedApp.length
      const repeat = await ask()
      expect(reachedApp.length).toBe(reached)
      // The request id differs by design: each answer names its own request.
      const but = (headers: [string, string][]) => headers.filter(([name]) => !['date', 'x-ratelimit-remaining', 'x-request-id'].includes(name.toLowerCase())).sort()
      const requestIds = [first, repeat].map((answer) => answer.headers.filter(([name]) => name.toLowerCase() === 'x-request-id').map(([, value]) => value))
      expect(requestIds[0]).toHaveLength(1)
      expect(requestIds[1]).toHaveLength(1)
      expect(requestIds[1]).not.toEqual(requestIds[0])
      expect(repeat.status).toBe(200)
      expect(but(repeat.headers)).toEqual(but(first.headers))
      expect(repeat.body.byteLength).toBe(first.body.byteLength)
    })
  }
})
