import { describe, expect, test } from 'bun:test'
import { sql } from 'drizzle-orm'
import type { App } from '../../src/app'
import { loadConfig } from '../../src/config'
import { createLogger } from '../../src/shared/logger'
import type { RequestRecord } from '../../src/shared/request-record'
import { accountWithKey } from '../helpers/auth'
import { freshDatabase, selectRows, testClock } from '../helpers/db'
import { TEST_DATABASE_URL } from '../helpers/env'
import { eventually } from '../helpers/eventually'
import { spawnUntilListening, stopProcess } from '../helpers/process'
import { startServer } from '../helpers/server'
import { rawExchange } from '../property/raw-http'

// Request ids and the access log (docs/adr/0121-request-ids-and-the-access-log.md), over real HTTP:
// every answer names its request in X-Request-Id (the client's id when well-formed), every log line
// of the request and its error envelope carry it, and one access line per request says what it
// was, never with a key, a cookie or a query.

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/

const database = await freshDatabase('seeded')
const [{ id: cardId, setId }] = (await selectRows<{ id: number; setId: number }>(
  database.db,
  sql`select c.id::int as id, c.set_id::int as "setId" from cards c where c.id = (select min(card_id) from card_prices)`,
)) as [{ id: number; setId: number }]

/** A logger whose lines the test reads, parsed. */
function capturedLogger() {
  const lines: Record<string, any>[] = []
  return { lines, logger: createLogger('info', { write: (line: string) => void lines.push(JSON.parse(line)) }) }
}

/** Routes that fail as the app's own would: a bug (500) and a database that cannot be reached (503). */
const failing = (app: App) =>
  app
    .get('/v1/test-failures/bug', () => {
      throw new Error('a bug in a route')
    })
    .get('/v1/test-failures/database', () => {
      throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' })
    }) as unknown as App

const logged = capturedLogger()
const records: RequestRecord[] = []
const server = startServer({ db: database.db, redis: undefined, logger: logged.logger, onRequestDone: (record) => void records.push(record) }, failing)
await server.ready()
const pro = await accountWithKey(database.db, 'pro')
const business = await accountWithKey(database.db, 'business')
const keyed = (headers: Record<string, string> = {}) => ({ headers: { 'x-api-key': pro.key, ...headers } })

const accessLines = (requestId: string) => logged.lines.filter((line) => line.msg === 'request' && line.request_id === requestId)

/** GETs `path` and reads its answer, with the id it names and the one access line written for it. */
async function ask(path: string, init?: RequestInit) {
  const response = await server.get(path, init)
  const text = await response.text()
  const requestId = response.headers.get('x-request-id')!
  const lines = accessLines(requestId)
  expect(lines).toHaveLength(1)
  return { response, status: response.status, text, requestId, access: lines[0]!, record: records.findLast((record) => record.requestId === requestId)! }
}

describe('X-Request-Id', () => {
  test('a well-formed incoming id is echoed, on a hot repeat, an Elysia route and a 404 alike', async () => {
    const path = `/v1/cards/${cardId}/prices`
    await ask(path, keyed()) // the first ask, in Elysia, keeps the answer the repeat is written from
    for (const [what, id, target, init] of [
      ['hot repeat', 'abc-123', path, keyed()],
      ['elysia route', 'client.id:42_x', '/health', {}],
      ['404', 'Z'.repeat(128), '/v1/nowhere', {}],
    ] as const) {
      const incoming = `${id}`
      const { requestId, access } = await ask(target, { headers: { ...init.headers, 'x-request-id': incoming } })
      expect({ what, requestId }).toEqual({ what, requestId: incoming })
      expect(access.request_id).toBe(incoming)
    }
  })

  test('a malformed or missing id is replaced by a generated UUID, a new one per request', async () => {
    const malformed = ['Z'.repeat(129), 'has space', 'a/b', 'ünïcode', 'a,b', '"quoted"', '']
    const seen = new Set<string>()
    for (const incoming of [...malformed, undefined]) {
      const { requestId } = await ask('/health', incoming === undefined ? {} : { headers: { 'x-request-id': incoming } })
      expect(requestId).toMatch(UUID)
      seen.add(requestId)
    }
    expect(seen.size).toBe(malformed.length + 1)
  })

  test('generated on hot repeats as on Elysia routes, 304s, the docs page and streamed exports', async () => {
    const path = `/v1/prices/top-movers?period=7d&limit=5`
    const first = await ask(path, keyed())
    const repeat = await ask(path, keyed())
    const notModified = await ask(path, keyed({ 'if-none-match': first.response.headers.get('etag')! }))
    const docs = await ask('/docs')
    const exported = await ask(`/v1/export/set/${setId}?format=csv`, { headers: { 'x-api-key': business.key } })
    expect([first, repeat, notModified, docs, exported].map(({ status }) => status)).toEqual([200, 200, 304, 200, 200])
    for (const { requestId } of [first, repeat, notModified, docs, exported]) expect(requestId).toMatch(UUID)
    expect(new Set([first, repeat, notModified, docs, exported].map(({ requestId }) => requestId)).size).toBe(5)
  })

  // A target that is no path (CONNECT's authority form) reaches the app through Bun's catch-all route.
  test('a request Bun cannot route (CONNECT host:port) is answered with an id too', async () => {
    const port = Number(new URL(server.base).port)
    const request = `CONNECT 127.0.0.1:${port} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`
    const outcome = await rawExchange(port, Buffer.from(request), { head: false, timeoutMs: 5_000 })
    if (outcome.kind !== 'response') throw new Error(`no answer: ${outcome.kind}`)
    const header = outcome.response.headers.find(([name]) => name.toLowerCase() === 'x-request-id')?.[1]
    expect(header).toMatch(UUID)
    expect(JSON.parse(Buffer.from(outcome.response.body).toString()).error.request_id).toBe(header!)
    // It passes the request step like any other: one access line, its route unmatched.
    const [access] = await eventually(() => accessLines(header!).length === 1 && accessLines(header!))
    expect(access).toMatchObject({ method: 'CONNECT', route: 'unmatched', status: outcome.response.status })
  })

  // What Bun refuses while parsing never reaches the app: no id, no record (docs/operations.md says so).
  test('requests Bun refuses itself get its bare answer, below 500, with no id and no record', async () => {
    const port = Number(new URL(server.base).port)
    const over = 2 * loadConfig({}).maxBodyBytes + 1
    const refused = [
      'OPTIONS * HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n',
      'FOO /v1/games HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n',
      `POST /v1/auth/login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${over}\r\nConnection: close\r\n\r\n{}`,
    ]
    const before = records.length
    for (const request of refused) {
      const outcome = await rawExchange(port, Buffer.from(request), { head: false, timeoutMs: 5_000 })
      if (outcome.kind === 'timeout') throw new Error(`no answer nor close: ${request.split('\r\n')[0]}`)
      if (outcome.kind === 'response') {
        expect(outcome.response.status).toBeLessThan(500)
        expect(outcome.response.headers.some(([name]) => name.toLowerCase() === 'x-request-id')).toBe(false)
      }
    }
    // A request the app answers afterwards is recorded, and nothing before it.
    const after = await ask('/health', { headers: { 'x-request-id': 'after-refusals' } })
    expect(records.slice(before).map((record) => record.requestId)).toEqual([after.requestId])
  })
})

describe('error envelopes name the request', () => {
  const post = (body: string) => ({ method: 'POST', body, headers: { 'content-type': 'application/json', 'x-api-key': pro.key } })
  const CASES: [what: string, path: string, init: RequestInit, status: number, route: string][] = [
    ['400', '/v1/cards/0', keyed(), 400, '/v1/cards/:id'],
    ['404', '/v1/nowhere', {}, 404, 'unmatched'],
    ['405', '/v1/games', { method: 'DELETE' }, 405, 'unmatched'],
    ['413, refused before routing', '/v1/bulk/resolve/marketplace', post(`{"ids":[1]}${' '.repeat(2 ** 20)}`), 413, '/v1/bulk/resolve/marketplace'],
    ['500', '/v1/test-failures/bug', {}, 500, '/v1/test-failures/bug'],
    ['503', '/v1/test-failures/database', {}, 503, '/v1/test-failures/database'],
  ]
  test.each(CASES)('%s', async (_what, path, init, status, route) => {
    const answer = await ask(path, init)
    expect(answer.status).toBe(status)
    expect(JSON.parse(answer.text).error.request_id).toBe(answer.requestId)
    expect(answer.access).toMatchObject({ method: init.method ?? 'GET', route, status })
  })

  test("the error handler's log lines carry the request id: 'unhandled error' and 'database unavailable'", async () => {
    const bug = await ask('/v1/test-failures/bug', { headers: { 'x-request-id': 'bug-1' } })
    const outage = await ask('/v1/test-failures/database', { headers: { 'x-request-id': 'outage-1' } })
    expect([bug.requestId, outage.requestId]).toEqual(['bug-1', 'outage-1'])
    expect(logged.lines.filter((line) => line.msg === 'unhandled error' && line.request_id === 'bug-1')).toHaveLength(1)
    expect(logged.lines.filter((line) => line.msg === 'database unavailable' && line.request_id === 'outage-1')).toHaveLength(1)
  })

  test('the last-resort 500, for an error that escapes the error handler, names its request and logs with it', async () => {
    // A thrown value that fails `instanceof`: the error handler itself throws on it.
    const hostile = new Proxy(new Error('escaped'), {
      getPrototypeOf() {
        throw new Error('escaped')
      },
    })
    const escaping = capturedLogger()
    const other = startServer(
      { db: database.db, redis: undefined, logger: escaping.logger },
      (app) =>
        app.get('/escape', () => {
          throw hostile
        }) as unknown as App,
    )
    const response = await other.get('/escape', { headers: { 'x-request-id': 'escape-1' } })
    expect(response.status).toBe(500)
    expect(response.headers.get('x-request-id')).toBe('escape-1')
    expect(((await response.json()) as any).error).toEqual({ code: 'INTERNAL_ERROR', message: 'Internal server error', request_id: 'escape-1' })
    expect(escaping.lines.filter((line) => line.request_id === 'escape-1').map((line) => line.msg)).toEqual(expect.arrayContaining(['error escaped the error handler', 'request']))
    await other.stop()
  })
})

describe('the access log', () => {
  test('one line per request: method, route template, status, duration, bytes, account, request id', async () => {
    const path = `/v1/cards/${cardId}/prices`
    const { access, record, requestId, text } = await ask(path, keyed())
    const bytes = Buffer.byteLength(text)
    expect(access).toEqual({
      level: 30,
      time: testClock.now().getTime(),
      method: 'GET',
      route: '/v1/cards/:id/prices',
      status: 200,
      duration_ms: expect.any(Number),
      bytes,
      account_id: pro.accountId,
      request_id: requestId,
      msg: 'request',
    })
    expect(access.duration_ms).toBeGreaterThanOrEqual(0)
    // The same record reaches onRequestDone, with the tier.
    expect(record).toEqual({
      method: 'GET',
      route: '/v1/cards/:id/prices',
      status: 200,
      durationMs: expect.any(Number),
      bytes,
      accountId: pro.accountId,
      tier: 'pro',
      requestId,
    })
  })

  test('the account a session identified; none for an open read', async () => {
    const me = await ask('/v1/auth/me', { headers: { cookie: pro.cookie } })
    expect(me.record).toMatchObject({ route: '/v1/auth/me', status: 200, accountId: pro.accountId, tier: 'pro' })
    expect(me.access.account_id).toBe(pro.accountId)
    const open = await ask('/v1/games')
    expect(open.record).toMatchObject({ route: '/v1/games', status: 200, accountId: undefined, tier: undefined })
    expect('account_id' in open.access).toBe(false)
  })

  test('never a key, a cookie or the query: a key in the query string, the path or X-Request-Id stays out of the line', async () => {
    const answers = [
      await ask(`/v1/cards/${cardId}/prices?api_key=${pro.key}`, keyed()),
      await ask(`/v1/games/${pro.key}`, { headers: { cookie: pro.cookie } }),
      await ask(`/v1/nowhere?key=${pro.key}`),
    ]
    expect(answers.map(({ access }) => access.route)).toEqual(['/v1/cards/:id/prices', '/v1/games/:slug', 'unmatched'])
    const secret = pro.key.slice('tcg_live_'.length)
    const cookie = pro.cookie.slice('session='.length)
    for (const { access } of answers) {
      expect(JSON.stringify(access)).not.toContain(secret)
      expect(JSON.stringify(access)).not.toContain(cookie)
    }
    // The client's own key as its request id is echoed to it; the line has it redacted.
    const before = logged.lines.length
    const keyAsId = await server.get('/health', { headers: { 'x-request-id': pro.key } })
    await keyAsId.arrayBuffer()
    expect(keyAsId.headers.get('x-request-id')).toBe(pro.key)
    expect(logged.lines.slice(before).map((line) => [line.msg, line.route, line.request_id])).toEqual([['request', '/health', 'tcg_live_[redacted]']])
    expect(logged.lines.filter((line) => JSON.stringify(line).includes(secret))).toEqual([])
  })

  test('bytes: the body length of answers built from bytes, whichever router answered; 0 without a body; absent for a stream or a serialised object', async () => {
    const cards = `/v1/cards/${cardId}/prices`
    const movers = '/v1/prices/top-movers?period=30d&limit=50'
    // Uncoded answers, so the text read is the body sent (a coded answer's bytes are its coded length, docs/adr/0127-response-compression.md).
    const uncoded = { 'accept-encoding': 'identity' }
    const built = [
      ['a kept answer, first asked', cards, keyed({ 'x-request-id': 'bytes-1', ...uncoded })],
      ['the same, repeated before Elysia', cards, keyed(uncoded)],
      ['a kept answer, first asked', movers, keyed(uncoded)],
      ['the same, repeated before Elysia', movers, keyed(uncoded)],
      ['open catalog bytes, first asked', '/v1/games?per_page=2', { headers: uncoded }],
      ['the same, repeated before Elysia', '/v1/games?per_page=2', { headers: uncoded }],
      ['a snapshot answer (bulk prices)', `/v1/bulk/prices?ids=${cardId}`, keyed(uncoded)],
    ] as const
    for (const [what, path, init] of built) {
      const { status, text, access, record } = await ask(path, init)
      expect({ what, path, status, access: access.bytes, record: record.bytes }).toEqual({
        what,
        path,
        status: 200,
        access: Buffer.byteLength(text),
        record: Buffer.byteLength(text),
      })
    }
    const etag = (await ask(cards, keyed())).response.headers.get('etag')!
    const notModified = await ask(cards, keyed({ 'if-none-match': etag }))
    const head = await ask('/v1/games?per_page=2', { method: 'HEAD' })
    expect([notModified, head].map(({ status, access }) => [status, access.bytes])).toEqual([
      [304, 0],
      [200, 0],
    ])
    const exported = await ask(`/v1/export/set/${setId}?format=csv`, { headers: { 'x-api-key': business.key, ...uncoded } })
    const health = await ask('/health', { headers: uncoded })
    for (const { status, access, record } of [exported, health]) {
      expect(status).toBe(200)
      expect('bytes' in access).toBe(false)
      expect(record.bytes).toBeUndefined()
    }
  })

  test('ACCESS_LOG=false turns it off; the error lines still carry the request id', async () => {
    const quiet = capturedLogger()
    const seen: RequestRecord[] = []
    const off = startServer({ db: database.db, redis: undefined, logger: quiet.logger, config: { accessLog: false }, onRequestDone: (record) => void seen.push(record) }, failing)
    const health = await off.get('/health', { headers: { 'x-request-id': 'quiet-1' } })
    const bug = await off.get('/v1/test-failures/bug', { headers: { 'x-request-id': 'quiet-2' } })
    expect([health.status, bug.status]).toEqual([200, 500])
    expect(quiet.lines.filter((line) => line.msg === 'request')).toEqual([])
    expect(quiet.lines.filter((line) => line.msg === 'unhandled error').map((line) => line.request_id)).toEqual(['quiet-2'])
    // Other consumers of the record still get it.
    expect(seen.map((record) => record.requestId)).toEqual(['quiet-1', 'quiet-2'])
    await off.stop()
  })
})

// The service as it runs: its access lines buffered on stdout, written by the stop that SIGTERM starts.
describe.skipIf(!TEST_DATABASE_URL)('the access log of a real service process', () => {
  test('a clean stop (SIGTERM) loses no access line: one per request, the buffered ones written before it exits', async () => {
    const env = {
      PATH: process.env.PATH ?? '',
      DATABASE_URL: database.url,
      PORT: '0',
      HOST: '127.0.0.1',
      CONDITION_RECRAWL_PER_MINUTE: '0',
      LOG_LEVEL: 'info',
    }
    const node = await spawnUntilListening(['src/index.ts'], env, { keepRest: true })
    try {
      const path = `/v1/cards/${cardId}/prices`
      const ids = Array.from({ length: 30 }, (_, i) => `stop-${i}`)
      for (const id of ids) {
        const response = await fetch(node.url + path, { headers: { 'x-api-key': pro.key, 'x-request-id': id } })
        expect(response.status).toBe(200)
        await response.arrayBuffer()
      }
      node.child.kill('SIGTERM')
      expect(await node.child.exited).toBe(0)
      const lines = (await node.rest)
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line))
      const access = lines.filter((line) => line.msg === 'request')
      expect(access.map((line) => line.request_id)).toEqual(ids)
      expect(access.every((line) => line.route === '/v1/cards/:id/prices' && line.status === 200 && line.bytes > 0)).toBe(true)
    } finally {
      await stopProcess(node.child)
    }
  })
})
