import { afterAll, describe, expect, test } from 'bun:test'
import zlib from 'node:zlib'
import fc from 'fast-check'
import { type Coding, codedEtag, codedHead, codedTail, compressionStep, type Negotiated, namesEntity, negotiate } from './compression'

// The coding a request gets, the tag of a coded answer, and the framing of a kept head completed by
// a per-request tail (docs/adr/0127-response-compression.md), proven against zlib's own decoders
// and curl's.

describe('negotiate', () => {
  const cases: [string | null, Negotiated][] = [
    [null, 'identity'],
    ['', 'identity'],
    ['gzip', 'gzip'],
    ['br', 'br'],
    ['gzip, deflate, br, zstd', 'br'], // Bun's fetch, browsers: br first at equal weight
    ['GZIP', 'gzip'],
    [' Br ;Q=1 ', 'br'],
    ['x-gzip', 'gzip'],
    ['gzip;q=1, br;q=0.5', 'gzip'],
    ['br;q=0.8, gzip;q=0.9', 'gzip'],
    ['br;q=0, gzip', 'gzip'],
    ['br;q=0, gzip;q=0', 'identity'],
    ['*', 'br'],
    ['*;q=0', 'identity'],
    ['gzip;q=0.5, *;q=0.6', 'br'],
    ['identity', 'identity'],
    ['identity;q=0', 'identity'], // nothing else accepted: identity all the same, never a refusal
    ['identity;q=0, gzip', 'gzip'],
    ['identity;q=1, gzip;q=0.5', 'identity'],
    ['deflate, zstd', 'identity'],
    ['gzip;q=2', 'identity'], // an invalid weight drops its element
    ['gzip;q=abc', 'identity'],
    ['gzip;q=0.0001', 'identity'],
    [',,;;q=,', 'identity'],
    ['\u0000\uffff', 'identity'],
  ]
  for (const [header, expected] of cases) test(`${JSON.stringify(header)} → ${expected}`, () => expect(negotiate(header)).toBe(expected))

  test('any string is a coding, never a throw', () => {
    fc.assert(fc.property(fc.string({ unit: 'binary', maxLength: 200 }), (header) => ['br', 'gzip', 'identity'].includes(negotiate(header))))
  })
})

describe('coded entity tags', () => {
  test('a coding inside the quotes, distinct per coding', () => {
    expect(codedEtag('W/"12-abc"', 'gzip')).toBe('W/"12-abc-gz"')
    expect(codedEtag('W/"12-abc"', 'br')).toBe('W/"12-abc-br"')
  })
  test('a tag names its entity in any coding, and nothing else', () => {
    const etag = 'W/"12-abc"'
    for (const opaque of ['"12-abc"', '"12-abc-gz"', '"12-abc-br"']) expect(namesEntity(opaque, etag)).toBe(true)
    for (const opaque of ['"12-ab"', '"12-abc-zz"', '"12-abc-gz-gz"', '12-abc', '"13-abc"']) expect(namesEntity(opaque, etag)).toBe(false)
  })
})

const decode = (coding: Coding, bytes: Uint8Array) => (coding === 'gzip' ? zlib.gunzipSync(bytes) : zlib.brotliDecompressSync(bytes))
const framed = (head: Uint8Array, tail: string, coding: Coding) => {
  const coded = codedHead(head, coding)
  return Buffer.concat([coded.bytes, codedTail(coded, tail)])
}
/** Heads as the service keeps them (JSON-like, compressible) and arbitrary bytes. */
const heads = fc.oneof(
  fc.uint8Array({ minLength: 1, maxLength: 4_000 }),
  fc
    .array(fc.record({ id: fc.nat(), name: fc.string(), price: fc.option(fc.double({ noNaN: true, noDefaultInfinity: true })) }), { maxLength: 300 })
    .map((rows) => Buffer.from(`{"data":${JSON.stringify(rows)}`)),
)
const asciiTails = fc.oneof(fc.string({ unit: fc.constantFrom(...'abcxyz{}":,0123456789 '), maxLength: 300 }), fc.string({ unit: 'binary-ascii', maxLength: 2_000 }))

describe('a kept head and a per-request tail', () => {
  for (const coding of ['gzip', 'br'] as const) {
    test(`${coding}: zlib decodes the head then the tail, exactly`, () => {
      fc.assert(
        fc.property(heads, asciiTails, (head, tail) => {
          expect(decode(coding, framed(head, tail, coding)).equals(Buffer.concat([head, Buffer.from(tail, 'latin1')]))).toBe(true)
        }),
        { numRuns: 300 },
      )
    })

    test(`${coding}: one head, many tails, each decoded with its own (the kept head is never changed)`, () => {
      const head = Buffer.from(`{"data":${JSON.stringify(Array.from({ length: 200 }, (_, id) => ({ id, name: `card ${id}` })))}`)
      const coded = codedHead(head, coding)
      const copy = Buffer.from(coded.bytes)
      for (const tail of ['', '}', ',"rate_limit":{"daily_limit":100000,"daily_remaining":99999,"daily_reset":"2026-11-27T00:00:00.000Z"}}']) {
        const body = Buffer.concat([coded.bytes, codedTail(coded, tail)])
        expect(decode(coding, body).toString('latin1')).toBe(head.toString('latin1') + tail)
      }
      expect(coded.bytes.equals(copy)).toBe(true)
    })

    test(`${coding}: tails longer than one stored block (64 KiB) are split into several`, () => {
      const head = Buffer.from('{"data":[1,2,3]')
      for (const length of [65_535, 65_536, 65_537, 140_000]) {
        const tail = `${'x'.repeat(length - 1)}}`
        expect(decode(coding, framed(head, tail, coding)).toString('latin1')).toBe(`${head.toString('latin1')}${tail}`)
      }
    })
  }
})

describe('curl --compressed decodes the same bytes', () => {
  // A server handing out the framed bodies; curl, a decoder that is not zlib's binding in this process, reads them.
  const bodies = new Map<string, { coding: Coding; bytes: Buffer }>()
  const server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    fetch(request) {
      const body = bodies.get(new URL(request.url).pathname)
      if (!body) return new Response('no such body', { status: 404 })
      return new Response(body.bytes, { headers: { 'content-encoding': body.coding, 'content-type': 'application/json' } })
    },
  })
  afterAll(() => server.stop(true))
  const curl = Bun.which('curl')

  test.skipIf(curl === null)('for random heads and tails, both codings', async () => {
    let n = 0
    await fc.assert(
      fc.asyncProperty(heads, asciiTails, fc.constantFrom<Coding>('gzip', 'br'), async (head, tail, coding) => {
        const path = `/${++n}`
        bodies.set(path, { coding, bytes: framed(head, tail, coding) })
        const child = Bun.spawn([curl!, '--silent', '--show-error', '--compressed', '--output', '-', `http://127.0.0.1:${server.port}${path}`], { stdout: 'pipe', stderr: 'pipe' })
        const [out, err, code] = await Promise.all([new Response(child.stdout).arrayBuffer(), new Response(child.stderr).text(), child.exited])
        bodies.delete(path)
        expect(err).toBe('')
        expect(code).toBe(0)
        expect(Buffer.from(out).equals(Buffer.concat([head, Buffer.from(tail, 'latin1')]))).toBe(true)
      }),
      { numRuns: 40 },
    )
  })
})

describe('a stream is compressed as it streams', () => {
  for (const coding of ['gzip', 'br'] as const) {
    test(`${coding}: what the source sent decodes before the source ends`, async () => {
      const first = Buffer.from(`{"data":[${Array.from({ length: 300 }, (_, i) => `{"id":${i}}`).join(',')}`)
      let release!: () => void
      const released = new Promise<void>((resolve) => (release = resolve))
      const source = new ReadableStream<Uint8Array>({
        async start(controller) {
          // Past the threshold, then one more chunk (which tells a stream from a complete body), then a wait.
          controller.enqueue(first.subarray(0, 600))
          controller.enqueue(first.subarray(600, 1_100))
          controller.enqueue(first.subarray(1_100))
          await released
          controller.enqueue(Buffer.from(']}'))
          controller.close()
        },
      })
      const request = new Request('http://x/export', { headers: { 'accept-encoding': coding } })
      const response = await compressionStep(request, () => new Response(source, { headers: { 'content-type': 'text/csv' } }))
      expect(response.headers.get('content-encoding')).toBe(coding)
      const reader = response.body!.getReader()
      const sent: Uint8Array[] = []
      // Decoded so far, reading what a sync flush made complete.
      const decodedSoFar = () =>
        coding === 'gzip'
          ? zlib.gunzipSync(Buffer.concat(sent), { finishFlush: zlib.constants.Z_SYNC_FLUSH })
          : zlib.brotliDecompressSync(Buffer.concat(sent), { finishFlush: zlib.constants.BROTLI_OPERATION_FLUSH })
      while (decodedSoFar().byteLength < first.byteLength) {
        const read = await reader.read()
        expect(read.done).toBe(false)
        sent.push(read.value!)
      }
      expect(decodedSoFar().equals(first)).toBe(true)
      release()
      for (;;) {
        const read = await reader.read()
        if (read.done) break
        sent.push(read.value)
      }
      const whole = coding === 'gzip' ? zlib.gunzipSync(Buffer.concat(sent)) : zlib.brotliDecompressSync(Buffer.concat(sent))
      expect(whole.toString()).toBe(`${first.toString()}]}`)
    })
  }
})

describe('a stream that fails', () => {
  for (const failsAt of ['before the threshold', 'after it'] as const) {
    test(`${failsAt}: the answer keeps its status and is cut short, as uncoded (never a 5xx)`, async () => {
      const source = new ReadableStream<Uint8Array>({
        start(controller) {
          controller.enqueue(Buffer.alloc(failsAt === 'after it' ? 2_000 : 100, 'a'))
          if (failsAt === 'after it') controller.enqueue(Buffer.alloc(100, 'b'))
        },
        pull(controller) {
          controller.error(new Error('the database went away'))
        },
      })
      const request = new Request('http://x/export', { headers: { 'accept-encoding': 'gzip' } })
      const response = await compressionStep(request, () => new Response(source, { headers: { 'content-type': 'text/csv' } }))
      expect(response.status).toBe(200)
      expect(response.headers.get('content-encoding')).toBe(failsAt === 'after it' ? 'gzip' : null)
      await expect(response.arrayBuffer()).rejects.toThrow()
    })
  }
})
