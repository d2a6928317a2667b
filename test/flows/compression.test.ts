import { describe, expect, test } from 'bun:test'
import zlib from 'node:zlib'
import { sql } from 'drizzle-orm'
import fc from 'fast-check'
import type { App } from '../../src/app'
import type { RequestRecord } from '../../src/shared/request-record'
import { accountWithKey } from '../helpers/auth'
import { freshDatabase, selectRows, testLogger } from '../helpers/db'
import { startServer } from '../helpers/server'

// Response compression over real HTTP (docs/adr/0127-response-compression.md): what each
// Accept-Encoding gets from kept answers (first asked in Elysia, repeated before it), bulk prices,
// plain Elysia answers, small answers and export streams; the tags and 304s; HEAD; the bytes the
// request record counts. Bodies are read raw (fetch's `decompress: false`) and decoded here.

const database = await freshDatabase('seeded')
const [{ id: cardId }] = (await selectRows<{ id: number }>(database.db, sql`select min(card_id)::int as id from card_prices`)) as [{ id: number }]
const [{ id: setId }] = (await selectRows<{ id: number }>(database.db, sql`select set_id as id from cards group by set_id order by count(*) desc limit 1`)) as [{ id: number }]
const bulkIds = (await selectRows<{ id: number }>(database.db, sql`select id from cards order by id limit 100`)).map((row) => row.id)

const records: RequestRecord[] = []
const reachedApp: string[] = []
const countRequests = (app: App) => app.onRequest(({ request }) => void reachedApp.push(new URL(request.url).pathname)) as unknown as App
const server = startServer({ db: database.db, redis: undefined, logger: testLogger, onRequestDone: (record) => void records.push(record) }, countRequests)
await server.ready()
const { key } = await accountWithKey(database.db, 'business')

interface Raw {
  status: number
  headers: Headers
  /** The bytes as sent. */
  sent: Buffer
  /** The bytes once the Content-Encoding is undone. */
  body: Buffer
  /** The request record of this request (its id echoed as X-Request-Id). */
  record: RequestRecord | undefined
}

async function raw(path: string, headers: Record<string, string> = {}, method = 'GET'): Promise<Raw> {
  const response = await fetch(server.base + path, { method, headers: { 'x-api-key': key, ...headers }, decompress: false } as RequestInit)
  const sent = Buffer.from(await response.arrayBuffer())
  const coding = response.headers.get('content-encoding')
  const body = coding === 'gzip' ? zlib.gunzipSync(sent) : coding === 'br' ? zlib.brotliDecompressSync(sent) : sent
  const id = response.headers.get('x-request-id')
  return { status: response.status, headers: response.headers, sent, body, record: records.findLast((record) => record.requestId === id) }
}

const withoutRateLimit = (body: Buffer) => {
  const { rate_limit: _, ...rest } = JSON.parse(body.toString())
  return rest
}
const varies = (raw: Raw) => (raw.headers.get('vary') ?? '').toLowerCase().split(/,\s*/)

/** Accept-Encoding values and the coding each must get. */
const NEGOTIATIONS: [string | undefined, string | null][] = [
  [undefined, null],
  ['identity', null],
  ['gzip', 'gzip'],
  ['br', 'br'],
  ['gzip, deflate, br, zstd', 'br'],
  ['br;q=0.5, gzip;q=0.9', 'gzip'],
  ['gzip;q=0, br;q=0', null],
  ['identity;q=0', null],
  ['identity;q=0, gzip', 'gzip'],
  ['*', 'br'],
  ['garbage;;q=zz, \u00ff', null],
  ['zstd', null],
]

describe('kept answers: first asked (Elysia) and repeated (before Elysia)', () => {
  // 20 movers are about 3 KiB (one coded buffer), 50 are over 4 KiB (written in parts when not coded).
  for (const path of ['/v1/prices/top-movers?period=30d&limit=20', '/v1/prices/top-movers?period=30d&limit=50']) {
    test(`${path}: every Accept-Encoding decodes to the identity answer but rate_limit, on both paths`, async () => {
      const identity = await raw(path, { 'accept-encoding': 'identity' })
      expect(identity.status).toBe(200)
      expect(identity.sent.byteLength).toBeGreaterThan(1_024)
      for (const [header, coding] of NEGOTIATIONS) {
        // A query of its own per header, so the first ask is Elysia's and the kept head is coded for it there.
        const own = `${path}&v=${encodeURIComponent(header ?? 'none')}`
        const headers: Record<string, string> = header === undefined ? {} : { 'accept-encoding': header }
        const plain = await raw(own, { 'accept-encoding': 'identity' })
        const before = reachedApp.length
        const first = await raw(`${own}&first`, headers)
        expect(reachedApp.length).toBe(before + 1)
        const repeat = await raw(`${own}&first`, headers)
        expect(reachedApp.length).toBe(before + 1) // answered before Elysia
        for (const answer of [first, repeat]) {
          expect(answer.status).toBe(200)
          expect(answer.headers.get('content-encoding')).toBe(coding)
          expect(varies(answer)).toContain('accept-encoding')
          expect(withoutRateLimit(answer.body)).toEqual(withoutRateLimit(plain.body))
          expect(JSON.parse(answer.body.toString()).rate_limit.daily_limit).toBe(JSON.parse(plain.body.toString()).rate_limit.daily_limit)
          // The record counts what was sent.
          expect(answer.record?.bytes).toBe(answer.sent.byteLength)
          if (coding !== null) expect(answer.sent.byteLength).toBeLessThan(answer.body.byteLength / 2)
        }
        // The coded tag is the identity answer's with the coding inside the quotes.
        const identityTag = (await raw(`${own}&first`, { 'accept-encoding': 'identity' })).headers.get('etag')!
        const suffix = coding === null ? '' : coding === 'gzip' ? '-gz' : '-br'
        expect(first.headers.get('etag')).toBe(`${identityTag.slice(0, -1)}${suffix}"`)
        // First ask and repeat: the same headers but the quota's and the request's.
        const but = (headers: Headers) => [...headers].filter(([name]) => !['date', 'x-ratelimit-remaining', 'x-request-id'].includes(name))
        expect(but(repeat.headers)).toEqual(but(first.headers))
        expect(repeat.sent.byteLength).toBe(first.sent.byteLength)
      }
    })
  }

  test('a kept answer under the threshold goes out as it is, and still varies', async () => {
    const path = `/v1/cards/${cardId}/prices`
    const first = await raw(path, { 'accept-encoding': 'gzip' })
    const repeat = await raw(path, { 'accept-encoding': 'br' })
    for (const answer of [first, repeat]) {
      expect(answer.status).toBe(200)
      expect(answer.body.byteLength).toBeLessThan(1_024)
      expect(answer.headers.get('content-encoding')).toBeNull()
      expect(varies(answer)).toContain('accept-encoding')
    }
  })

  test('If-None-Match with the coded tag or the identity tag is a 304 naming the tag sent, whatever the coding asked', async () => {
    const path = '/v1/prices/top-movers?period=7d&limit=50'
    const identity = await raw(path)
    const gzip = await raw(path, { 'accept-encoding': 'gzip' })
    const plainTag = identity.headers.get('etag')!
    const gzipTag = gzip.headers.get('etag')!
    expect(gzipTag).not.toBe(plainTag)
    for (const acceptEncoding of ['gzip', 'br', 'identity']) {
      for (const tag of [plainTag, gzipTag, gzipTag.replace(/^W\//, '')]) {
        const notModified = await raw(path, { 'accept-encoding': acceptEncoding, 'if-none-match': tag })
        expect(notModified.status).toBe(304)
        expect(notModified.sent.byteLength).toBe(0)
        expect(notModified.headers.get('etag')).toBe(tag.startsWith('W/') ? tag : `W/${tag}`)
        expect(varies(notModified)).toContain('accept-encoding')
        expect(notModified.record?.bytes).toBe(0)
      }
    }
    const stale = await raw(path, { 'accept-encoding': 'gzip', 'if-none-match': `${plainTag.slice(0, -1)}-zz"` })
    expect(stale.status).toBe(200)
  })
})

describe('answers compressed per request', () => {
  const bulkPath = `/v1/bulk/prices?ids=${bulkIds.join(',')}`

  test('bulk prices: every Accept-Encoding decodes to the same answer but rate_limit; tags per coding; 304 for either tag', async () => {
    const plain = await raw(bulkPath)
    expect(plain.body.byteLength).toBeGreaterThan(1_024)
    expect(plain.record?.bytes).toBe(plain.sent.byteLength)
    for (const [header, coding] of NEGOTIATIONS) {
      const answer = await raw(bulkPath, header === undefined ? {} : { 'accept-encoding': header })
      expect(answer.status).toBe(200)
      expect(answer.headers.get('content-encoding')).toBe(coding)
      expect(varies(answer)).toContain('accept-encoding')
      expect(withoutRateLimit(answer.body)).toEqual(withoutRateLimit(plain.body))
      expect(answer.record?.bytes).toBe(answer.sent.byteLength)
      if (coding !== null) expect(answer.headers.get('etag')).toBe(`${plain.headers.get('etag')!.slice(0, -1)}-${coding === 'gzip' ? 'gz' : 'br'}"`)
    }
    const gzip = await raw(bulkPath, { 'accept-encoding': 'gzip' })
    expect(gzip.sent.byteLength).toBeLessThan(plain.sent.byteLength / 4)
    for (const tag of [plain.headers.get('etag')!, gzip.headers.get('etag')!]) {
      const notModified = await raw(bulkPath, { 'accept-encoding': 'gzip', 'if-none-match': tag })
      expect(notModified.status).toBe(304)
      expect(notModified.headers.get('etag')).toBe(tag)
    }
  })

  test('bulk prices as msgpack are compressed too', async () => {
    const plain = await raw(bulkPath, { accept: 'application/msgpack' })
    const br = await raw(bulkPath, { accept: 'application/msgpack', 'accept-encoding': 'br' })
    expect(br.headers.get('content-type')).toBe('application/msgpack')
    expect(br.headers.get('content-encoding')).toBe('br')
    expect(varies(br)).toEqual(expect.arrayContaining(['accept', 'accept-encoding']))
    expect(br.body.byteLength).toBe(plain.body.byteLength)
    expect(br.sent.byteLength).toBeLessThan(plain.sent.byteLength / 2)
  })

  test('a plain Elysia answer over the threshold', async () => {
    const path = `/v1/sets/${setId}/cards?per_page=50`
    const plain = await raw(path)
    expect(plain.body.byteLength).toBeGreaterThan(1_024)
    for (const [header, coding] of NEGOTIATIONS) {
      const answer = await raw(path, header === undefined ? {} : { 'accept-encoding': header })
      expect(answer.status).toBe(200)
      expect(answer.headers.get('content-encoding')).toBe(coding)
      expect(varies(answer)).toContain('accept-encoding')
      expect(withoutRateLimit(answer.body)).toEqual(withoutRateLimit(plain.body))
      // Elysia's own bodies sent as they are are sized by Bun after the record (docs/adr/0121-request-ids-and-the-access-log.md).
      if (coding !== null) expect(answer.record?.bytes).toBe(answer.sent.byteLength)
    }
  })

  test('a small answer and a small error go out as they are, and vary', async () => {
    for (const path of ['/health', '/v1/nowhere', `/v1/cards/${cardId}`]) {
      const answer = await raw(path, { 'accept-encoding': 'gzip, br' })
      expect(answer.body.byteLength).toBeLessThan(1_024)
      expect(answer.headers.get('content-encoding')).toBeNull()
      expect(varies(answer)).toContain('accept-encoding')
      expect([undefined, answer.sent.byteLength]).toContain(answer.record?.bytes)
    }
  })

  test('a large error is compressed like any answer', async () => {
    const path = `/v1/bulk/prices?ids=${Array.from({ length: 300 }, (_, i) => `x${i}`).join(',')}`
    const plain = await raw(path)
    const gzip = await raw(path, { 'accept-encoding': 'gzip' })
    expect(plain.status).toBe(400)
    expect(gzip.status).toBe(400)
    if (plain.body.byteLength >= 1_024) expect(gzip.headers.get('content-encoding')).toBe('gzip')
    expect(JSON.parse(gzip.body.toString()).error.code).toBe(JSON.parse(plain.body.toString()).error.code)
  })

  test('HEAD: no coding, the GET headers otherwise, and Vary', async () => {
    for (const path of [bulkPath, '/v1/prices/top-movers?period=30d&limit=50', `/v1/export/set/${setId}?format=csv`]) {
      const head = await raw(path, { 'accept-encoding': 'gzip, br' }, 'HEAD')
      expect(head.status).toBe(200)
      expect(head.sent.byteLength).toBe(0)
      expect(head.headers.get('content-encoding')).toBeNull()
      expect(varies(head)).toContain('accept-encoding')
    }
  })
})

describe('export streams', () => {
  for (const format of ['csv', 'json']) {
    test(`${format}: compressed as it streams; decoded, the same as uncompressed`, async () => {
      const path = `/v1/export/set/${setId}?format=${format}`
      const plain = await raw(path)
      expect(plain.status).toBe(200)
      expect(plain.body.byteLength).toBeGreaterThan(1_024)
      for (const coding of ['gzip', 'br']) {
        const answer = await raw(path, { 'accept-encoding': coding })
        expect(answer.status).toBe(200)
        expect(answer.headers.get('content-encoding')).toBe(coding)
        expect(answer.headers.get('content-disposition')).toBe(plain.headers.get('content-disposition'))
        expect(varies(answer)).toContain('accept-encoding')
        const text = answer.body.toString()
        if (format === 'csv') expect(text).toBe(plain.body.toString())
        else expect(withoutRateLimit(answer.body)).toEqual(withoutRateLimit(plain.body))
        expect(answer.sent.byteLength).toBeLessThan(answer.body.byteLength / 2)
      }
    })
  }
})

describe('any Accept-Encoding', () => {
  test('never a 5xx; a coded answer decodes to the plain one', async () => {
    const paths = ['/v1/prices/top-movers?period=7d&limit=50', `/v1/bulk/prices?ids=${bulkIds.join(',')}`, '/health', `/v1/sets/${setId}/cards?per_page=50`]
    const plain = await Promise.all(paths.map(async (path) => withoutRateLimitText((await raw(path)).body.toString())))
    const element = fc.tuple(
      fc.oneof(fc.constantFrom('br', 'gzip', 'x-gzip', 'identity', '*', 'deflate', 'zstd', 'BR', 'GZip', ''), fc.string({ unit: 'grapheme-ascii', maxLength: 8 })),
      fc.option(fc.oneof(fc.constantFrom('q=0', 'q=1', 'q=0.5', 'q=1.000', 'q=-1', 'q=', 'q=0.0001'), fc.string({ unit: 'grapheme-ascii', maxLength: 6 }))),
    )
    const header = fc.array(element, { maxLength: 5 }).map((parts) => parts.map(([name, q]) => (q === null ? name : `${name};${q}`)).join(', '))
    await fc.assert(
      fc.asyncProperty(header, fc.nat(paths.length - 1), async (acceptEncoding, i) => {
        const answer = await raw(paths[i]!, { 'accept-encoding': acceptEncoding })
        expect(answer.status).toBeLessThan(500)
        expect([null, 'gzip', 'br']).toContain(answer.headers.get('content-encoding'))
        expect(withoutRateLimitText(answer.body.toString())).toEqual(plain[i])
      }),
      { numRuns: 150 },
    )
  })
})

describe('curl --compressed', () => {
  const curl = Bun.which('curl')
  test.skipIf(curl === null)('reads kept answers (first and repeat), bulk prices and an export in br and gzip', async () => {
    const paths = ['/v1/prices/top-movers?period=24h&limit=50', `/v1/bulk/prices?ids=${bulkIds.join(',')}`, `/v1/export/set/${setId}?format=csv`]
    for (const path of paths) {
      const plain = withoutRateLimitText((await raw(path)).body.toString())
      for (const coding of ['br', 'gzip']) {
        for (let ask = 0; ask < 2; ask++) {
          const child = Bun.spawn([curl!, '--silent', '--show-error', '--compressed', '-H', `Accept-Encoding: ${coding}`, '-H', `X-API-Key: ${key}`, server.base + path], {
            stdout: 'pipe',
            stderr: 'pipe',
          })
          const [out, err, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited])
          expect(err).toBe('')
          expect(code).toBe(0)
          expect(withoutRateLimitText(out)).toEqual(plain)
        }
      }
    }
  })
})

/** A JSON body without rate_limit, or CSV as it is. */
function withoutRateLimitText(text: string): unknown {
  return text.startsWith('{') ? withoutRateLimit(Buffer.from(text)) : text
}
