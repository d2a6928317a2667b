import { describe, expect, test } from 'bun:test'
import { sql } from 'drizzle-orm'
import type { App } from '../../src/app'
import { accountWithKey } from '../helpers/auth'
import { freshDatabase, selectRows, testLogger } from '../helpers/db'
import { startServer } from '../helpers/server'

// Conventions every route keeps, checked across the whole app over real HTTP on the seeded
// catalog: how a bad path parameter is reported, the one JSON media type, and the request id every answer names.
const database = await freshDatabase('seeded')
let app: App | undefined
const server = startServer({ db: database.db, redis: undefined, logger: testLogger }, (built) => (app = built))
await server.ready()
const business = await accountWithKey(database.db, 'business')
const [card] = await selectRows<{ id: number; set_id: number }>(database.db, sql`select id, set_id from cards order by id limit 1`)
const cardIds = (await selectRows<{ id: number }>(database.db, sql`select id from cards order by id limit 500`)).map((row) => row.id)

/** Key and session both: the guard runs before validation, so a bad value must get past it to be judged. */
const signedIn = { 'x-api-key': business.key, cookie: business.cookie }

describe('a bad path parameter is a 400 naming the parameter', () => {
  const INTEGER_PARAMS: [method: string, template: string, name: string][] = [
    ['GET', '/v1/cards/:id', 'id'],
    ['GET', '/v1/cards/:id/prices', 'id'],
    ['GET', '/v1/cards/:id/prices/conditions', 'id'],
    ['GET', '/v1/cards/:id/history', 'id'],
    ['GET', '/v1/cards/:id/history/detailed', 'id'],
    ['GET', '/v1/cards/marketplace/:marketplaceId', 'marketplaceId'],
    ['GET', '/v1/sets/:id', 'id'],
    ['GET', '/v1/sets/:id/cards', 'id'],
    ['GET', '/v1/sets/:id/prices', 'id'],
    ['GET', '/v1/export/set/:id', 'id'],
    ['DELETE', '/v1/webhooks/:webhookId', 'webhookId'],
    ['GET', '/v1/webhooks/:webhookId/deliveries', 'webhookId'],
    ['POST', '/v1/webhooks/:webhookId/test', 'webhookId'],
  ]
  /** Opaque ids of a fixed shape: anything else, an integer above all, is a 400 that says what the id looks like. */
  const PATTERN_PARAMS: [method: string, template: string, name: string][] = [['DELETE', '/v1/keys/:keyId', 'keyId']]
  const STRING_PARAMS: [method: string, template: string, name: string][] = [
    ['GET', '/v1/games/:slug', 'slug'],
    ['GET', '/v1/games/:slug/sets', 'slug'],
  ]
  /** Path parameters any value of which is valid (an unknown one is a 404). */
  const FREE_FORM = ['GET /docs/assets/:file']

  test('every route with a path parameter is in this table', () => {
    const tabled = new Set([...INTEGER_PARAMS, ...PATTERN_PARAMS, ...STRING_PARAMS].map(([method, template]) => `${method} ${template}`))
    const withParams = app!.routes.filter((route) => route.path.includes('/:')).map((route) => `${route.method} ${route.path}`)
    expect(withParams.filter((route) => !tabled.has(route) && !FREE_FORM.includes(route))).toEqual([])
    expect(withParams).toEqual(expect.arrayContaining([...tabled]))
  })

  // Values Elysia coerces to a number (range and integer checks) and one it cannot.
  for (const value of ['0', '-1', '1.5', '2147483648', 'abc']) {
    test(`${value} as an integer id`, async () => {
      for (const [method, template, name] of INTEGER_PARAMS) {
        const path = template.replace(`:${name}`, value)
        const response = await server.get(path, { method, headers: signedIn })
        const expected = 'must be an integer from 1 to 2147483647'
        expect({ path, status: response.status, error: ((await response.json()) as any).error }).toEqual({
          path,
          status: 400,
          error: {
            code: 'INVALID_PARAMETER',
            message: `Invalid path: '${name}' ${expected}`,
            details: [{ field: name, message: expected }],
            request_id: response.headers.get('x-request-id'),
          },
        })
      }
    })
  }

  test('a key id that is not key_ and 32 lowercase hex digits, an old integer id included', async () => {
    for (const value of ['1', '2147483647', '0x1', 'abc', `key_${'0'.repeat(31)}`, `key_${'0'.repeat(33)}`, `KEY_${'0'.repeat(32)}`, `key_${'A'.repeat(32)}`]) {
      for (const [method, template, name] of PATTERN_PARAMS) {
        const path = template.replace(`:${name}`, value)
        const response = await server.get(path, { method, headers: signedIn })
        const error = ((await response.json()) as any).error
        expect({ path, status: response.status, code: error.code, fields: error.details.map((d: any) => d.field) }).toEqual({
          path,
          status: 400,
          code: 'INVALID_PARAMETER',
          fields: [name],
        })
        expect(error.details[0].message).toContain('GET /v1/keys')
      }
    }
  })

  test('a slug over 100 characters', async () => {
    for (const [method, template, name] of STRING_PARAMS) {
      const path = template.replace(`:${name}`, 'x'.repeat(101))
      const response = await server.get(path, { method, headers: signedIn })
      const expected = 'must be 1 to 100 characters long'
      expect({ template, status: response.status, error: ((await response.json()) as any).error }).toEqual({
        template,
        status: 400,
        error: {
          code: 'INVALID_PARAMETER',
          message: `Invalid path: '${name}' ${expected}`,
          details: [{ field: name, message: expected }],
          request_id: response.headers.get('x-request-id'),
        },
      })
    }
  })
})

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/

describe('every JSON answer says application/json;charset=utf-8', () => {
  // Elysia's own for the objects handlers return; the responses built by hand must match it.
  const JSON_TYPE = 'application/json;charset=utf-8'
  const keyed = { headers: { 'x-api-key': business.key } }
  const post = (body: string, headers: Record<string, string> = {}) => ({ method: 'POST', body, headers: { 'content-type': 'application/json', ...headers } })
  const CALLS: [what: string, path: string, init: RequestInit, status: number][] = [
    ['liveness', '/health', {}, 200],
    ['readiness', '/ready', {}, 200],
    ['a public list', '/v1/games', {}, 200],
    ['an unknown game', '/v1/games/no-such-game', {}, 404],
    ['an unknown route', '/v1/no-such-route', {}, 404],
    ['a wrong method', '/v1/games', { method: 'DELETE' }, 405],
    ['no key', `/v1/cards/${card!.id}`, {}, 401],
    ['an unknown key', `/v1/cards/${card!.id}`, { headers: { 'x-api-key': 'tcg_live_00000000000000000000000000000000' } }, 401],
    ['a card', `/v1/cards/${card!.id}`, keyed, 200],
    ['a bad path parameter', '/v1/cards/0', keyed, 400],
    ['a bad query parameter', '/v1/search?q=a', keyed, 400],
    ['search', '/v1/search?q=dragon', keyed, 200],
    ['snapshot: card prices', `/v1/cards/${card!.id}/prices`, keyed, 200],
    ['snapshot: a card with no prices', '/v1/cards/2147483647/prices', keyed, 404],
    ['snapshot: bulk prices, a few', `/v1/bulk/prices?ids=${cardIds.slice(0, 3).join(',')}`, keyed, 200],
    // Large enough to go out as a one-chunk stream (bun-workarounds.ts, bytesResponse).
    ['snapshot: bulk prices, many', `/v1/bulk/prices?ids=${cardIds.join(',')}`, keyed, 200],
    ['snapshot: bulk prices, bad ids', '/v1/bulk/prices?ids=x', keyed, 400],
    ['snapshot: top movers', '/v1/prices/top-movers', keyed, 200],
    ['snapshot: top movers, bad limit', '/v1/prices/top-movers?limit=0', keyed, 400],
    ['snapshot: changes', '/v1/prices/changes?since=2026-11-01T00:00:00Z', keyed, 200],
    ['bulk cards', `/v1/bulk/cards?ids=${cardIds.slice(0, 3).join(',')}`, keyed, 200],
    ['set export, JSON attachment', `/v1/export/set/${card!.set_id}`, keyed, 200],
    ['set export of an unknown set', '/v1/export/set/2147483647', keyed, 404],
    ['bulk resolve', '/v1/bulk/resolve/marketplace', post('{"ids":[1]}', { 'x-api-key': business.key }), 200],
    ['bulk resolve, malformed JSON', '/v1/bulk/resolve/marketplace', post('{"ids":', { 'x-api-key': business.key }), 400],
    ['bulk resolve, not JSON', '/v1/bulk/resolve/marketplace', post('{"ids":[1]}', { 'x-api-key': business.key, 'content-type': 'text/plain' }), 415],
    ['bulk resolve, too large', '/v1/bulk/resolve/marketplace', post(`{"ids":[1]}${' '.repeat(2 ** 20)}`, { 'x-api-key': business.key }), 413],
    ['usage', '/v1/usage', keyed, 200],
    ['who am I, no session', '/v1/auth/me', {}, 401],
    ['who am I', '/v1/auth/me', { headers: { cookie: business.cookie } }, 200],
    ['keys', '/v1/keys', { headers: { cookie: business.cookie } }, 200],
    ['webhooks', '/v1/webhooks', { headers: { cookie: business.cookie } }, 200],
    ['deliveries of an unknown webhook', '/v1/webhooks/2147483647/deliveries', { headers: { cookie: business.cookie } }, 404],
    ['a webhook with a bad body', '/v1/webhooks', post('{"url":"ftp://x"}', { cookie: business.cookie }), 400],
    ['sign up', '/v1/auth/signup', post(JSON.stringify({ email: `sweep-${process.pid}@example.com`, password: 'long enough password' })), 201],
    ['log in, wrong password', '/v1/auth/login', post(JSON.stringify({ email: business.email, password: 'not the password' })), 401],
    ['log in, malformed JSON', '/v1/auth/login', post('{"email":'), 400],
    ['log in, not JSON', '/v1/auth/login', { method: 'POST', body: 'email=x', headers: { 'content-type': 'application/x-www-form-urlencoded' } }, 415],
  ]

  test.each(CALLS)('%s', async (_what, path, init, status) => {
    const response = await server.get(path, init)
    const text = await response.text()
    expect({ status: response.status, type: response.headers.get('content-type') }).toEqual({ status, type: JSON_TYPE })
    // Every answer names its request (a generated UUID here), its error envelope too.
    const requestId = response.headers.get('x-request-id')
    expect(requestId).toMatch(UUID)
    if (status >= 400) expect(JSON.parse(text).error.request_id).toBe(requestId!)
  })

  test('over the daily quota (429)', async () => {
    const free = await accountWithKey(database.db, 'free')
    let response: Response | undefined
    let text = ''
    for (let i = 0; i < 101 && response?.status !== 429; i++) {
      response = await server.get(`/v1/cards/${card!.id}`, { headers: { 'x-api-key': free.key } })
      text = await response.text()
    }
    expect({ status: response!.status, type: response!.headers.get('content-type') }).toEqual({ status: 429, type: JSON_TYPE })
    expect(JSON.parse(text).error.request_id).toBe(response!.headers.get('x-request-id')!)
  }, 30_000) // a hundred requests
})
