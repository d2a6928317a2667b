import { describe, expect, test } from 'bun:test'
import { connect } from 'node:net'
import { Type } from '@sinclair/typebox'
import { sql } from 'drizzle-orm'
import type { App } from '../../src/app'
import { KEY_GUARD_ERRORS, withRateLimit } from '../../src/modules/auth/guard'
import { TIER_POLICY } from '../../src/modules/auth/tiers'
import { systemClock } from '../../src/shared/clock'
import { accountWithKey } from '../helpers/auth'
import { freshDatabase, selectRows, testLogger } from '../helpers/db'
import { startServer } from '../helpers/server'
import { parseResponse } from '../property/raw-http'

// HTTP/1.1 pipelining (RFC 9112 §9.3.2): a client writes its next request before the answer to the
// one before has come. Bun 1.4.5 closes such a connection the moment it reads the next request while
// an answer is still awaited (uWS's close on "HTTP_RESPONSE_PENDING"): the awaited answer is dropped
// and the next request never reaches the app. What this means for the service, over real sockets
// (docs/adr/0028-hostile-input.md): a pipelined request is answered only when every answer before
// it was ready without waiting, as kept repeats are. Otherwise the client gets no answer, and the
// request the app had started runs to its end like any whose client left: charged.

const database = await freshDatabase('seeded')
const reachedApp: string[] = []
const Ok = Type.Object({ data: Type.Object({ ok: Type.Boolean() }) })
/**
 * Counts what reaches Elysia, and adds a keyed route whose answer waits a turn of the event loop, as
 * any answer read from PostgreSQL or Redis does (embedded PGlite may answer within the same turn).
 */
const extend = (app: App) =>
  app
    .onRequest(({ request }) => void reachedApp.push(new URL(request.url).pathname))
    .get(
      '/probe/waits',
      async () => {
        await new Promise((resolve) => setImmediate(resolve))
        return { data: { ok: true } }
      },
      { apiKey: { needs: 'catalog' }, response: { 200: withRateLimit(Ok), ...KEY_GUARD_ERRORS } },
    ) as unknown as App
const server = startServer({ db: database.db, redis: undefined, logger: testLogger }, extend)
await server.ready()
const port = Number(new URL(server.base).port)
const [{ id: cardId }] = (await selectRows<{ id: number }>(database.db, sql`select min(card_id)::int as id from card_prices`)) as [{ id: number }]
/** What the key's account has left today; `/v1/usage` costs nothing. */
const remaining = async (key: string) => (await server.json('/v1/usage', key)).body.rate_limit.daily_remaining as number
const PRO_QUOTA = TIER_POLICY.pro.dailyQuota

/** Writes `requests` in one write; resolves with the statuses of the answers read in order, and whether the server closed the connection. */
function pipelined(port: number, requests: string[]): Promise<{ statuses: number[]; bytes: number; closed: boolean }> {
  return new Promise((resolve) => {
    let received = Buffer.alloc(0)
    let bytes = 0
    const statuses: number[] = []
    const socket = connect(port, '127.0.0.1', () => socket.write(requests.join('')))
    const done = (closed: boolean) => {
      timer.cancel()
      socket.destroy()
      resolve({ statuses, bytes, closed })
    }
    // Every answer comes within milliseconds when it comes: 5 s is a stall.
    const timer = systemClock.after(5_000, () => done(false))
    socket.on('data', (data: Buffer) => {
      bytes += data.length
      received = Buffer.concat([received, data])
      for (let answer = parseResponse(received, false, false); answer; answer = parseResponse(received, false, false)) {
        statuses.push(answer.status)
        received = received.subarray(received.indexOf('\r\n\r\n') + 4 + answer.body.length)
      }
      if (statuses.length === requests.length) done(false)
    })
    socket.on('close', () => done(true))
    socket.on('error', () => {})
  })
}

const get = (path: string, headers: Record<string, string> = {}) =>
  `GET ${path} HTTP/1.1\r\nHost: x\r\n${Object.entries(headers)
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('')}\r\n`

describe('the runtime: a bare Bun.serve', () => {
  /** A Bun.serve whose handler answers at once, or after a turn of the event loop (any I/O: a database, Redis). */
  function bareServer(waits: boolean) {
    const calls: string[] = []
    const server = Bun.serve({
      port: 0,
      hostname: '127.0.0.1',
      async fetch(request) {
        calls.push(new URL(request.url).pathname)
        if (waits) await new Promise((resolve) => setImmediate(resolve))
        return new Response('ok')
      },
    })
    return { server, calls }
  }

  test('whose handler waits closes a pipelined connection without a byte, and never runs the second request', async () => {
    const { server, calls } = bareServer(true)
    try {
      expect(await pipelined(server.port!, [get('/a'), get('/b')])).toEqual({ statuses: [], bytes: 0, closed: true })
      expect(calls).toEqual(['/a'])
      // One request at a time on the same server is answered: the pipelining is what fails.
      expect(await pipelined(server.port!, [get('/c')])).toMatchObject({ statuses: [200] })
    } finally {
      server.stop(true)
    }
  })

  test('whose handler answers without waiting answers pipelined requests in order', async () => {
    const { server, calls } = bareServer(false)
    try {
      expect(await pipelined(server.port!, [get('/a'), get('/b'), get('/c')])).toEqual({ statuses: [200, 200, 200], bytes: expect.any(Number), closed: false })
      expect(calls).toEqual(['/a', '/b', '/c'])
    } finally {
      server.stop(true)
    }
  })
})

describe('the service', () => {
  test('two pipelined keyed reads whose first answer waits: no answer, the second never reaches the app, the first is charged', async () => {
    const { key } = await accountWithKey(database.db, 'pro')
    const request = get('/probe/waits', { 'x-api-key': key })
    // One at a time, both are answered (and the key is then known to this node, so the guard charges without a wait).
    expect(await pipelined(port, [request])).toMatchObject({ statuses: [200] })
    const before = reachedApp.length
    expect(await pipelined(port, [request, request])).toEqual({ statuses: [], bytes: 0, closed: true })
    expect(reachedApp.slice(before)).toEqual(['/probe/waits'])
    // The guard charged the first before its answer waited; Bun closed the connection during the wait.
    expect(await remaining(key)).toBe(PRO_QUOTA - 2)
  })

  test('pipelined repeats of a kept answer, with a key this node knows, are answered in order and each charged', async () => {
    const { key } = await accountWithKey(database.db, 'pro')
    const request = get(`/v1/cards/${cardId}/prices`, { 'x-api-key': key })
    // One at a time first: the key is confirmed and the answer kept.
    expect(await pipelined(port, [request])).toMatchObject({ statuses: [200] })
    const before = reachedApp.length
    expect(await pipelined(port, [request, request, request])).toMatchObject({ statuses: [200, 200, 200], closed: false })
    // Answered before Elysia, without a wait (docs/adr/0081-repeats-answered-before-elysia.md).
    expect(reachedApp.length).toBe(before)
    expect(await remaining(key)).toBe(PRO_QUOTA - 4)
  })

  test('behind answers given at once, the first answer that waits ends the connection', async () => {
    const { key } = await accountWithKey(database.db, 'pro')
    const kept = get(`/v1/cards/${cardId}/prices`, { 'x-api-key': key })
    expect(await pipelined(port, [kept])).toMatchObject({ statuses: [200] })
    const outcome = await pipelined(port, [kept, kept, get('/probe/waits', { 'x-api-key': key }), kept])
    expect(outcome).toMatchObject({ statuses: [200, 200], closed: true })
  })
})
