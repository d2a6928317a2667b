import zlib from 'node:zlib'
import { bytesResponse } from './bun-workarounds'
import { withBodyLength } from './request-id'

// Response compression, br and gzip, for every answer (docs/adr/0127-response-compression.md):
// which coding a request gets, which answers are worth it, the tag of a coded answer, the step
// every request passes, and kept heads that a per-request tail completes without compressing again.

export type Coding = 'br' | 'gzip'
export type Negotiated = Coding | 'identity'

/** What every answer whose bytes may depend on the coding says (a cache keeps one per coding). */
export const VARY_CODING = 'Accept-Encoding'

/** Below this many bytes a body goes out as it is: the coding's framing and CPU buy little on one TCP segment. */
export const COMPRESS_FROM_BYTES = 1_024

/**
 * Levels for what is compressed per request (bodies not kept, exports): the fastest of each coding,
 * which the 2× CPU budget on a 500-id bulk answer allows (bench/compression.bench.ts).
 */
const PER_REQUEST = { gzipLevel: 1 as const, brotliQuality: 0 }
/** Levels for kept heads, compressed once per snapshot and answer: smaller bytes for every repeat. */
const KEPT = { gzipLevel: 6, brotliQuality: 5 }

/** Media types that compress: text, JSON, msgpack (bulk prices shrink 5.9× by gzip, as JSON does), JavaScript, XML, SVG. */
const COMPRESSIBLE = /^(?:text\/|application\/(?:json|msgpack|x-msgpack|javascript|xml|[\w.+-]*\+json|[\w.+-]*\+xml)\b|image\/svg\+xml)/i

export const compressibleType = (contentType: string | null) => contentType !== null && COMPRESSIBLE.test(contentType)

/** Whether a body of this type and size is sent compressed when the request accepts a coding. */
export const worthCompressing = (contentType: string | null, bytes: number) => bytes >= COMPRESS_FROM_BYTES && compressibleType(contentType)

// Clients repeat one header on every request: the last one's answer is kept.
let lastHeader: string | undefined
let lastCoding: Negotiated = 'identity'

/**
 * The coding an Accept-Encoding asks for (RFC 9110 §12.5.3): the highest weight among br and gzip
 * (x-gzip too, and `*` for whichever is not named), br first when equal, identity when neither is
 * acceptable or identity weighs more. Garbage, or a coding only refused, is identity: an answer is
 * never refused for its coding.
 */
export function negotiate(header: string | null): Negotiated {
  if (header === null || header === '') return 'identity'
  if (header === lastHeader) return lastCoding
  const weights = new Map<string, number>()
  for (const part of header.split(',')) {
    const [name = '', ...params] = part.split(';').map((piece) => piece.trim().toLowerCase())
    if (name === '') continue
    let q = 1
    for (const param of params) {
      if (!param.startsWith('q=')) continue
      q = /^(?:0(?:\.\d{0,3})?|1(?:\.0{0,3})?)$/.test(param.slice(2)) ? Number(param.slice(2)) : Number.NaN
    }
    if (Number.isNaN(q)) continue
    const coding = name === 'x-gzip' ? 'gzip' : name
    weights.set(coding, Math.max(weights.get(coding) ?? 0, q))
  }
  const weightOf = (coding: string) => weights.get(coding) ?? weights.get('*') ?? 0
  const br = weightOf('br')
  const gzip = weightOf('gzip')
  const best = Math.max(br, gzip)
  const identity = weights.get('identity')
  const coding: Negotiated = best === 0 || (identity !== undefined && identity > best) ? 'identity' : br >= gzip ? 'br' : 'gzip'
  lastHeader = header
  lastCoding = coding
  return coding
}

/** The coding of this request's answer: none for a HEAD, whose GET is answered the same way whatever it accepts. */
export const codingFor = (request: Request): Negotiated => (request.method === 'HEAD' ? 'identity' : negotiate(request.headers.get('accept-encoding')))

const SUFFIX: Record<Coding, string> = { br: '-br', gzip: '-gz' }

/** The entity tag of a coded answer: its tag with the coding inside the quotes (`W/"v-h"` → `W/"v-h-gz"`), distinct per coding. */
export const codedEtag = (etag: string, coding: Coding) => `${etag.slice(0, -1)}${SUFFIX[coding]}"`

/** Whether `opaque` (a tag without `W/`) names `etag` in any coding: a client that holds the gzip answer holds the identity one too. */
export function namesEntity(opaque: string, etag: string): boolean {
  const plain = etag.startsWith('W/') ? etag.slice(2) : etag
  return opaque === plain || opaque === codedEtag(plain, 'gzip') || opaque === codedEtag(plain, 'br')
}

/** A whole body compressed per request. */
export function compressed(bytes: Uint8Array, coding: Coding): Uint8Array {
  if (coding === 'gzip') return Bun.gzipSync(bytes as Uint8Array<ArrayBuffer>, { level: PER_REQUEST.gzipLevel })
  return zlib.brotliCompressSync(bytes, {
    params: { [zlib.constants.BROTLI_PARAM_QUALITY]: PER_REQUEST.brotliQuality, [zlib.constants.BROTLI_PARAM_SIZE_HINT]: bytes.byteLength },
  })
}

/**
 * A transform compressing a stream as it goes, at the per-request levels: each chunk written is
 * flushed to a byte boundary (a sync flush), so what the source has sent reaches the client at once
 * (an export's batch of rows) rather than when the compressor's window fills.
 */
function compressing(coding: Coding): TransformStream<Uint8Array, Uint8Array> {
  const compressor =
    coding === 'gzip'
      ? zlib.createGzip({ level: PER_REQUEST.gzipLevel })
      : zlib.createBrotliCompress({ params: { [zlib.constants.BROTLI_PARAM_QUALITY]: PER_REQUEST.brotliQuality } })
  const flush = coding === 'gzip' ? zlib.constants.Z_SYNC_FLUSH : zlib.constants.BROTLI_OPERATION_FLUSH
  return new TransformStream<Uint8Array, Uint8Array>({
    start(controller) {
      compressor.on('data', (chunk: Buffer) => controller.enqueue(chunk))
      compressor.on('error', (error) => controller.error(error))
    },
    transform: (chunk) =>
      new Promise<void>((resolve) => {
        compressor.write(chunk)
        compressor.flush(flush, () => resolve())
      }),
    flush: () =>
      new Promise<void>((resolve) => {
        compressor.once('end', resolve)
        compressor.end()
      }),
  })
}

/** Statuses whose answer has no body (RFC 9110 §6.4.1). */
const hasBody = (status: number) => status >= 200 && status !== 204 && status !== 205 && status !== 304

/** Whether a Vary value names Accept-Encoding (as the kept answers write it, or in any case). */
const variesByCoding = (vary: string) => vary === VARY_CODING || vary.toLowerCase().includes('accept-encoding')

/**
 * The request step that compresses answers (app.ts puts it inside the request id's step, so the
 * access log counts the bytes sent): every answer varies by Accept-Encoding; a body of a
 * compressible type from COMPRESS_FROM_BYTES is compressed in the coding the request accepts,
 * whole when it is already complete, as it streams otherwise; answers whose maker chose their
 * coding (kept answers) pass untouched. Synchronous answers that need nothing stay synchronous.
 */
export function compressionStep(request: Request, next: (request: Request) => Response | Promise<Response>): Response | Promise<Response> {
  const coding = codingFor(request)
  const answer = next(request)
  return answer instanceof Response ? encoded(answer, coding) : answer.then((response) => encoded(response, coding))
}

function encoded(response: Response, coding: Negotiated): Response | Promise<Response> {
  const vary = response.headers.get('vary')
  // Its maker chose its coding already (kept answers): it says so by a Vary naming Accept-Encoding, or a Content-Encoding.
  if ((vary !== null && variesByCoding(vary)) || response.headers.has('content-encoding')) return response
  response.headers.set('vary', vary === null || vary === '' ? VARY_CODING : `${vary}, ${VARY_CODING}`)
  if (coding === 'identity' || !hasBody(response.status) || response.body === null || !compressibleType(response.headers.get('content-type'))) return response
  return readAndCode(response, coding)
}

/** Reads up to the threshold: a body complete by then goes out whole (coded or not), a longer stream is coded as it streams. */
async function readAndCode(response: Response, coding: Coding): Promise<Response> {
  const reader = response.body!.getReader() as ReadableStreamDefaultReader<Uint8Array>
  const chunks: Uint8Array[] = []
  let size = 0
  try {
    for (;;) {
      const read = await reader.read()
      if (read.done) break
      chunks.push(read.value)
      size += read.value.byteLength
      if (size < COMPRESS_FROM_BYTES) continue
      // Complete once the next read says so: a buffered body (a string, bytes) always is.
      const after = await reader.read()
      if (after.done) break
      chunks.push(after.value)
      return streamed(response, coding, chunks, reader)
    }
  } catch (error) {
    // A stream that fails this early (an export's first batch) fails for the client as it would have uncoded: cut short, never a 5xx.
    return new Response(failingAfter(chunks, error), { status: response.status, headers: response.headers })
  }
  const whole = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size)
  const headers = new Headers(response.headers)
  headers.delete('content-length')
  if (size < COMPRESS_FROM_BYTES) return withBodyLength(new Response(whole, { status: response.status, headers }), size)
  const body = compressed(whole, coding)
  codedHeaders(headers, coding)
  if (response.status === 200) return bytesResponse(body, headers)
  return withBodyLength(new Response(body, { status: response.status, headers }), body.byteLength)
}

function codedHeaders(headers: Headers, coding: Coding) {
  headers.set('content-encoding', coding)
  const etag = headers.get('etag')
  if (etag !== null) headers.set('etag', codedEtag(etag, coding))
}

/** A body that sends `chunks`, then fails with `error`. */
function failingAfter(chunks: Uint8Array[], error: unknown): ReadableStream<Uint8Array> {
  return new ReadableStream({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(chunk)
      controller.error(error)
    },
  })
}

/** The chunks read so far, then the rest of the body as it comes, compressed as it goes (exports). */
function streamed(response: Response, coding: Coding, chunks: Uint8Array[], reader: ReadableStreamDefaultReader<Uint8Array>): Response {
  const rest = new ReadableStream<Uint8Array>({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(chunk)
    },
    async pull(controller) {
      const read = await reader.read()
      if (read.done) controller.close()
      else controller.enqueue(read.value)
    },
    cancel: (reason) => reader.cancel(reason),
  })
  const headers = new Headers(response.headers)
  headers.delete('content-length')
  codedHeaders(headers, coding)
  return new Response(rest.pipeThrough(compressing(coding)), { status: response.status, headers })
}

// ---------------------------------------------------------------------------------------------
// Kept heads: a body kept as a head, sent with a short tail that differs per request (kept snapshot
// answers and their rate_limit). The head is compressed once and ends byte-aligned and not final;
// each request appends its tail uncompressed, and what ends the stream.

/** A kept head in one coding: its bytes, and for gzip the CRC-32 of the uncompressed head, which the tail's continues. */
export interface CodedHead {
  coding: Coding
  bytes: Buffer
  crc: number
  /** The uncompressed head's length, for gzip's ISIZE. */
  length: number
}

/** gzip's member header (RFC 1952 §2.3): magic, deflate, no flags, no time, no extra flags, OS unknown. */
const GZIP_HEADER = Buffer.from([0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff])

/**
 * `head` compressed at the kept levels, ending on a byte boundary with no final block: deflate
 * with Z_SYNC_FLUSH (an empty stored block, RFC 1951 §3.2.4) behind a gzip header; brotli with
 * BROTLI_OPERATION_FLUSH, which ends on a byte boundary without ISLAST (RFC 7932 §9.2).
 */
export function codedHead(head: Uint8Array, coding: Coding): CodedHead {
  if (coding === 'gzip') {
    const deflated = zlib.deflateRawSync(head, { level: KEPT.gzipLevel, finishFlush: zlib.constants.Z_SYNC_FLUSH })
    return { coding, bytes: Buffer.concat([GZIP_HEADER, deflated]), crc: zlib.crc32(head), length: head.byteLength }
  }
  const bytes = zlib.brotliCompressSync(head, {
    finishFlush: zlib.constants.BROTLI_OPERATION_FLUSH,
    params: { [zlib.constants.BROTLI_PARAM_QUALITY]: KEPT.brotliQuality, [zlib.constants.BROTLI_PARAM_SIZE_HINT]: head.byteLength },
  })
  return { coding, bytes, crc: 0, length: head.byteLength }
}

/** The most bytes one stored deflate block holds (LEN is 16 bits), and one uncompressed brotli meta-block with four nibbles of MLEN − 1. */
const DEFLATE_STORED_MAX = 65_535
const BROTLI_NIBBLES4_MAX = 65_536

/** The bytes that follow a coded head for this request: `tail` (ASCII, as a JSON answer's rate_limit is) uncompressed, then the end of the stream. */
export function codedTail(head: CodedHead, tail: string): Buffer {
  const length = tail.length
  if (head.coding === 'gzip') {
    // Stored blocks (RFC 1951 §3.2.4): a header byte (BFINAL, BTYPE 00, padding), LEN, NLEN, the bytes;
    // then gzip's trailer (RFC 1952 §2.3.1), CRC-32 and ISIZE little-endian.
    const blocks = Math.max(1, Math.ceil(length / DEFLATE_STORED_MAX))
    const out = Buffer.allocUnsafe(length + 5 * blocks + 8)
    let at = 0
    for (let block = 0; block < blocks; block++) {
      const from = block * DEFLATE_STORED_MAX
      const size = Math.min(DEFLATE_STORED_MAX, length - from)
      out[at++] = block === blocks - 1 ? 1 : 0
      out.writeUInt16LE(size, at)
      out.writeUInt16LE(~size & 0xffff, at + 2)
      at += 4
      at += out.write(tail.slice(from, from + size), at, 'latin1')
    }
    out.writeUInt32LE(zlib.crc32(tail, head.crc) >>> 0, at)
    out.writeUInt32LE((head.length + length) >>> 0, at + 4)
    return out
  }
  // Uncompressed meta-blocks (RFC 7932 §9.2), bits from the lowest: ISLAST 0, MNIBBLES 0 (four nibbles),
  // MLEN − 1 in 16 bits, ISUNCOMPRESSED 1, zero padding to the byte; then the bytes. Then the last,
  // empty meta-block: ISLAST 1, ISLASTEMPTY 1, padding (0x03).
  const blocks = Math.ceil(length / BROTLI_NIBBLES4_MAX)
  const out = Buffer.allocUnsafe(length + 3 * blocks + 1)
  let at = 0
  for (let block = 0; block < blocks; block++) {
    const from = block * BROTLI_NIBBLES4_MAX
    const size = Math.min(BROTLI_NIBBLES4_MAX, length - from)
    const bits = ((size - 1) << 3) | (1 << 19)
    out[at++] = bits & 0xff
    out[at++] = (bits >>> 8) & 0xff
    out[at++] = (bits >>> 16) & 0xff
    at += out.write(tail.slice(from, from + size), at, 'latin1')
  }
  out[at] = 0x03
  return out
}
