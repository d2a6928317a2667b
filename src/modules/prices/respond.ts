import { Type } from '@sinclair/typebox'
import { LRUCache } from 'lru-cache'
import { Packr } from 'msgpackr'
import { bytesResponse, writtenInParts } from '../../shared/bun-workarounds'
import { type CodedHead, type Coding, codedEtag, codedHead, codedTail, codingFor, namesEntity, VARY_CODING, worthCompressing } from '../../shared/compression'
import { type EarlyAnswer, type HotRoute, pathAndQueryOf } from '../../shared/hot-routes'
import { JSON_CONTENT_TYPE } from '../../shared/http'
import type { RateLimit } from '../../shared/model'
import { withBodyLength } from '../../shared/request-id'
import { type ApiKeyRule, addRateLimitHeaders, admitAtOnce, type KeyAuth, rateLimitOf } from '../auth/guard'
import type { AuthRuntime } from '../auth/runtime'
import type { TierPolicy } from '../auth/tiers'
import type { PriceSnapshot } from '../snapshot/snapshot'
import type { SnapshotReader } from '../snapshot/store'

// Plain msgpack maps: msgpackr's records extension is smaller but only msgpackr can read it.
const packr = new Packr({ useRecords: false })

export const MSGPACK = 'application/msgpack'

/** A route's OpenAPI `detail` for routes that also answer msgpack (docs/document.ts lists it as a 200 media type). */
export const ALSO_MSGPACK = { 'x-also-as': { [MSGPACK]: 'The same body msgpack-encoded (plain maps), for `Accept: application/msgpack`' } }

/**
 * The 304 every snapshot-backed route may answer. An empty string rather than Type.Void, which
 * @elysiajs/openapi renders as an invalid response object.
 */
export const NOT_MODIFIED = { 304: Type.String({ maxLength: 0, description: 'Not modified: the `If-None-Match` tag is still current (empty body)' }) }

/** The Accept header's weight for a media type, counting its wildcards; 0 when it is refused or absent. */
function weight(accept: string, type: string): number {
  let best = 0
  for (const part of accept.split(',')) {
    const [range = '', ...params] = part.split(';').map((piece) => piece.trim().toLowerCase())
    const matches = range === type || range === '*/*' || (range.endsWith('/*') && type.startsWith(range.slice(0, -1)))
    if (!matches) continue
    const q = params.find((param) => param.startsWith('q='))
    best = Math.max(best, q === undefined ? 1 : Number(q.slice(2)) || 0)
  }
  return best
}

/** msgpack when the client asks for it (application/msgpack or x-msgpack) at least as much as for JSON. */
export function wantsMsgpack(request: Request): boolean {
  const accept = request.headers.get('accept')
  if (accept === null || !accept.includes('msgpack')) return false
  const msgpack = Math.max(weight(accept, MSGPACK), weight(accept, 'application/x-msgpack'))
  return msgpack > 0 && msgpack >= weight(accept, 'application/json')
}

/**
 * For routes that return plain objects: answers in msgpack when the request asks for it (after the
 * guard added `rate_limit` and the response schema was checked), JSON otherwise; `Vary: Accept`
 * either way. Use as `.mapResponse(msgpackWhenAsked)` before the routes.
 */
export function msgpackWhenAsked({ request, response, set }: { request: Request; response: unknown; set: { headers: Record<string, string | number> } }) {
  set.headers.vary = 'Accept'
  if (response === null || typeof response !== 'object' || response instanceof Response || !wantsMsgpack(request)) return
  return new Response(packr.pack(response), { headers: { 'content-type': MSGPACK } })
}

export interface SnapshotBody<Data> {
  data: Data
  meta?: object
}

/** A body whose rows the snapshot keeps serialised: its JSON is copied bytes, its objects are made for msgpack only. */
export interface SerialisedBody<Data> {
  rows(): Data
  /** `head`, the rows as a JSON array, then `tail`. */
  json(head: string, tail: string): Uint8Array | string
  meta?: object
}

/**
 * Which answer a caller's tier gets where a route's answer depends on it (card prices: with sales
 * from Pro up, docs/adr/0093-sales-in-pro-card-prices.md): '' for the plain answer. Part of the
 * ETag and of what the answer is kept by.
 */
export type AnswerVariant = (policy: TierPolicy) => string

/** The weak ETag of a snapshot answer: the snapshot version, the format and variant, the path with its query. */
export function snapshotEtag(snapshot: PriceSnapshot, format: 'json' | 'msgpack', url: string, variant = ''): string {
  return `W/"${snapshot.version}-${Bun.hash(`${format}${variant === '' ? '' : `+${variant}`} ${pathAndQueryOf(url)}`).toString(36)}"`
}

/** What closes a JSON answer: `rate_limit` (three numbers and an ISO 8601 instant, which need no escaping), then the body's brace. */
const rateLimitTail = (rateLimit: RateLimit) =>
  `,"rate_limit":{"daily_limit":${rateLimit.daily_limit},"daily_remaining":${rateLimit.daily_remaining},"daily_reset":"${rateLimit.daily_reset}"}}`

/**
 * Moves what hooks put in `set.headers` (the guard's X-RateLimit-*) into a Response's headers:
 * Elysia copies a returned Response into a new one whenever `set.headers` is not empty, an extra
 * pass over the body.
 */
export function moveSetHeaders(set: { headers: Record<string, string | number> }, headers: Record<string, string> | Headers) {
  for (const name in set.headers) {
    if (headers instanceof Headers) headers.set(name, String(set.headers[name]))
    else headers[name] = String(set.headers[name])
    delete set.headers[name]
  }
}

/**
 * The headers every snapshot answer starts with; a route that also answers msgpack varies by Accept,
 * a kept answer (which chose its coding itself, writeKept) by Accept-Encoding.
 */
function snapshotHeaders(etag: string, vary: { msgpack: boolean; coding: boolean }): Record<string, string> {
  const headers: Record<string, string> = { etag, 'cache-control': 'private, no-cache' }
  const varies = [...(vary.msgpack ? ['Accept'] : []), ...(vary.coding ? [VARY_CODING] : [])]
  if (varies.length > 0) headers.vary = varies.join(', ')
  return headers
}

/**
 * Weak comparison (RFC 9110 §13.1.2): the tag of If-None-Match that names this entity, in any
 * coding (docs/adr/0127-response-compression.md), which the 304 names back so the client's copy is
 * the one freshened; `current` (the tag this request's 200 would carry) for `*`; undefined if none does.
 */
function matchesIfNoneMatch(request: Request, etag: string, current = etag): string | undefined {
  const header = request.headers.get('if-none-match')
  if (header === null) return undefined
  if (header.trim() === '*') return current
  for (const tag of header.split(',')) {
    const opaque = tag.trim().replace(/^W\//, '')
    if (namesEntity(opaque, etag)) return `W/${opaque}`
  }
  return undefined
}

/**
 * A snapshot answer that is not kept (bulk prices, changes, msgpack). Its weak ETag names the
 * snapshot version, the path with its query and the format, so `If-None-Match` answers 304 until
 * the next sync changes the snapshot (weak: `rate_limit` in the body differs from one request to
 * the next). JSON by default, msgpack on request where `msgpack` is allowed. The body carries
 * `rate_limit` like any key-guarded route's (the guard adds it to plain objects only). A body that
 * needs a read (a promise) makes the response one.
 */
export function snapshotResponse<Data>(
  context: { request: Request; set: { headers: Record<string, string | number> } },
  snapshot: PriceSnapshot,
  body: () => SnapshotBody<Data> | SerialisedBody<Data> | Promise<SnapshotBody<Data>>,
  options: { msgpack: boolean },
): Response | Promise<Response> {
  // Built before the 304 check, so a request the route refuses (404, 400) is refused whatever it sends as If-None-Match.
  const built = body()
  if (built instanceof Promise) return built.then((ready) => answerBuilt(context, snapshot, options.msgpack, ready))
  return answerBuilt(context, snapshot, options.msgpack, built)
}

function answerBuilt<Data>(
  { request, set }: { request: Request; set: { headers: Record<string, string | number> } },
  snapshot: PriceSnapshot,
  msgpack: boolean,
  built: SnapshotBody<Data> | SerialisedBody<Data>,
): Response {
  const format = msgpack && wantsMsgpack(request) ? 'msgpack' : 'json'
  // Its coding, and the coded tag, come from the compression step (src/shared/compression.ts).
  const headers = snapshotHeaders(snapshotEtag(snapshot, format, request.url), { msgpack, coding: false })
  moveSetHeaders(set, headers)
  const matched = matchesIfNoneMatch(request, headers.etag!)
  if (matched !== undefined) return new Response(null, { status: 304, headers: { ...headers, etag: matched } })
  const rateLimit = rateLimitOf(request)!
  if (format === 'msgpack') {
    headers['content-type'] = MSGPACK
    const data = 'json' in built ? built.rows() : built.data
    return bytesResponse(packr.pack({ data, ...(built.meta && { meta: built.meta }), rate_limit: rateLimit }), headers)
  }
  headers['content-type'] = JSON_CONTENT_TYPE
  const tail = (built.meta ? `,"meta":${JSON.stringify(built.meta)}` : '') + rateLimitTail(rateLimit)
  // Rows the snapshot keeps as bytes (bulk) are copied once, straight into the answer with its tail.
  return bytesResponse('json' in built ? built.json('{"data":', tail) : `{"data":${JSON.stringify(built.data)}${tail}`, headers)
}

/** A JSON answer up to its `rate_limit`, the one part that differs between two requests for the same path and query. */
interface KeptAnswer {
  etag: string
  /** `{"data":…` with `meta` when there is one, without the closing brace, as UTF-8. */
  head: Buffer
  /** Its 200's headers but the X-RateLimit-*, made once: copying a Headers costs less than building one. */
  headers: Headers
  /** The head compressed in each coding asked for so far, made on the first ask in that coding. */
  coded: Partial<Record<Coding, CodedAnswer>>
  /** Where it is kept, and by what: its coded heads are counted in that cache's bound as they are made. */
  keptIn: KeptAnswers
  key: string
}

/** A kept head in one coding, with the tag and headers of answers in that coding. */
interface CodedAnswer {
  etag: string
  head: CodedHead
  headers: Headers
}

/**
 * The bytes of answers each snapshot keeps, least recently asked dropped first: thousands of
 * cards' prices or hundreds of movers lists, and a bound however many distinct queries a client invents.
 */
const ANSWER_BYTES_KEPT = 16 * 2 ** 20

type KeptAnswers = LRUCache<string, KeptAnswer>
const keptAnswers = new WeakMap<PriceSnapshot, KeptAnswers>()

function keptAnswersOf(snapshot: PriceSnapshot): KeptAnswers {
  let kept = keptAnswers.get(snapshot)
  if (!kept) {
    kept = new LRUCache({ maxSize: ANSWER_BYTES_KEPT, sizeCalculation: (answer, key) => keptBytes(answer) + key.length })
    keptAnswers.set(snapshot, kept)
  }
  return kept
}

const keptBytes = (answer: KeptAnswer) => answer.head.byteLength + (answer.coded.gzip?.head.bytes.byteLength ?? 0) + (answer.coded.br?.head.bytes.byteLength ?? 0)

/**
 * The kept answer's head in `coding`, compressed on the first ask in that coding and kept with it
 * (docs/adr/0127-response-compression.md): repeats only append their tail. lru-cache sizes an entry
 * when it is set, so the answer is set again to count the new bytes, if it is still kept.
 */
function codedAnswer(kept: KeptAnswer, coding: Coding): CodedAnswer {
  const earlier = kept.coded[coding]
  if (earlier) return earlier
  const etag = codedEtag(kept.etag, coding)
  const headers = new Headers({ ...snapshotHeaders(etag, { msgpack: false, coding: true }), 'content-type': JSON_CONTENT_TYPE, 'content-encoding': coding })
  const coded: CodedAnswer = { etag, head: codedHead(kept.head, coding), headers }
  kept.coded[coding] = coded
  if (kept.keptIn.peek(kept.key) === kept) {
    kept.keptIn.delete(kept.key)
    kept.keptIn.set(kept.key, kept)
  }
  return coded
}

/** What an answer is kept by: its variant and the request's path with its query (which starts with `/`). */
const keptKey = (variant: string, pathAndQuery: string) => (variant === '' ? pathAndQuery : `${variant} ${pathAndQuery}`)

/**
 * From this size the kept head and the request's own tail are written to the response one after
 * the other (writtenInParts) instead of copied into one new buffer: below it, Buffer.allocUnsafe
 * takes a slice of its shared pool; from it, a fresh ArrayBuffer per answer, which costs more than
 * the stream (bench/profiles.md). Such answers go out chunked. A direct stream is written corked on
 * any turn, so it needs no bytesResponse.
 */
const WRITTEN_IN_PARTS_FROM_BYTES = 4_096

/**
 * The one writer of a kept answer, first asked (in Elysia, `moved` being the hooks' `set.headers`)
 * or repeated (before Elysia): its coding (the compression step leaves it alone: it varies by
 * Accept-Encoding), the 304 check, the headers with this request's X-RateLimit-*, and the body, the
 * kept head (coded once per coding) and this request's `rate_limit`, framed by size.
 */
function writeKept(request: Request, kept: KeptAnswer, rateLimit: RateLimit, moved?: { headers: Record<string, string | number> }): Response {
  const tail = rateLimitTail(rateLimit)
  const coding = codingFor(request)
  const coded = coding !== 'identity' && worthCompressing(JSON_CONTENT_TYPE, kept.head.byteLength + tail.length) ? codedAnswer(kept, coding) : undefined
  const matched = matchesIfNoneMatch(request, kept.etag, coded?.etag)
  if (matched !== undefined) {
    const headers = snapshotHeaders(matched, { msgpack: false, coding: true })
    addRateLimitHeaders(headers, rateLimit)
    if (moved) moveSetHeaders(moved, headers)
    return new Response(null, { status: 304, headers })
  }
  const headers = new Headers((coded ?? kept).headers)
  addRateLimitHeaders(headers, rateLimit)
  if (moved) moveSetHeaders(moved, headers)
  if (coded) {
    const codedTailBytes = codedTail(coded.head, tail)
    const bytes = coded.head.bytes.byteLength + codedTailBytes.byteLength
    if (coded.head.bytes.byteLength < WRITTEN_IN_PARTS_FROM_BYTES) return withBodyLength(new Response(Buffer.concat([coded.head.bytes, codedTailBytes], bytes), { headers }), bytes)
    return withBodyLength(new Response(writtenInParts(coded.head.bytes, codedTailBytes), { headers }), bytes)
  }
  const bytes = kept.head.byteLength + tail.length
  if (kept.head.byteLength < WRITTEN_IN_PARTS_FROM_BYTES) return withBodyLength(new Response(withTail(kept.head, tail), { headers }), bytes)
  return withBodyLength(new Response(writtenInParts(kept.head, tail), { headers }), bytes)
}

/**
 * The head's bytes, then the tail's: a copy of bytes, where a string answer would be measured and
 * encoded to UTF-8 again on every request (most of an 8 kB movers answer's cost). `tail` is ASCII.
 */
function withTail(head: Buffer, tail: string): Buffer {
  const bytes = Buffer.allocUnsafe(head.byteLength + tail.length)
  head.copy(bytes)
  bytes.write(tail, head.byteLength, 'latin1')
  return bytes
}

/**
 * A JSON snapshot answer kept for the snapshot's life by its variant, path and query (the same
 * request asks for the same answer until the snapshot changes): `body` is only called when none
 * is kept, and every answer, this one or a repeat (keptSnapshotRoute), adds only its own
 * `rate_limit`. For routes whose answers clients ask for again and again.
 */
function keptSnapshotResponse<Data>(
  context: { request: Request; set: { headers: Record<string, string | number> } },
  snapshot: PriceSnapshot,
  variant: string,
  body: () => SnapshotBody<Data> | SerialisedBody<Data> | Promise<SnapshotBody<Data>>,
): Response | Promise<Response> {
  const key = keptKey(variant, pathAndQueryOf(context.request.url))
  const kept = keptAnswersOf(snapshot).get(key)
  if (kept) return writeKept(context.request, kept, rateLimitOf(context.request)!, context.set)
  // Built before the 304 check, so a request the route refuses (404, 400) is refused whatever it sends as If-None-Match.
  const built = body()
  if (built instanceof Promise)
    return built.then((ready) => writeKept(context.request, keep(snapshot, key, context.request, variant, ready), rateLimitOf(context.request)!, context.set))
  return writeKept(context.request, keep(snapshot, key, context.request, variant, built), rateLimitOf(context.request)!, context.set)
}

function keep<Data>(snapshot: PriceSnapshot, key: string, request: Request, variant: string, built: SnapshotBody<Data> | SerialisedBody<Data>): KeptAnswer {
  const answers = keptAnswersOf(snapshot)
  // Two first asks built at once (a body that reads is awaited) keep the first: both are the same answer.
  const earlier = answers.get(key)
  if (earlier) return earlier
  const etag = snapshotEtag(snapshot, 'json', request.url, variant)
  const meta = built.meta ? `,"meta":${JSON.stringify(built.meta)}` : ''
  const head = Buffer.from('json' in built ? built.json('{"data":', meta) : `{"data":${JSON.stringify(built.data)}${meta}`)
  const kept: KeptAnswer = {
    etag,
    head,
    headers: new Headers({ ...snapshotHeaders(etag, { msgpack: false, coding: true }), 'content-type': JSON_CONTENT_TYPE }),
    coded: {},
    keptIn: answers,
    key,
  }
  answers.set(key, kept)
  return kept
}

/** The route context a kept snapshot route's handler reads (destructured: Elysia parses only what a handler names). */
interface KeptRouteContext<Params, Query> {
  request: Request
  set: { headers: Record<string, string | number> }
  params: Params
  query: Query
  apiKey: KeyAuth
}

/**
 * A key-guarded JSON read answered from the price snapshot and kept (keptSnapshotResponse), as a
 * hot route: Elysia answers it first; a repeat, its key's admission made at once (admitAtOnce), is
 * answered before Elysia by the same writer, so both send the same status, headers and framing.
 * Anything the repeat cannot decide at once (a key not yet known here, a charge that waits, no
 * kept answer) goes to Elysia, with nothing charged.
 */
export function keptSnapshotRoute<Params = Record<string, never>, Query = Record<string, never>>(
  auth: AuthRuntime,
  snapshots: SnapshotReader,
  route: {
    path: string
    rule: ApiKeyRule & { cost?: number }
    variant?: AnswerVariant
    body: (request: { params: Params; query: Query; snapshot: PriceSnapshot; variant: string }) => SnapshotBody<unknown> | SerialisedBody<unknown> | Promise<SnapshotBody<unknown>>
    hook: Record<string, unknown>
  },
): HotRoute {
  const variantOf = route.variant ?? (() => '')
  const early: EarlyAnswer = (request, pathAndQuery) => {
    const snapshot = snapshots.get()
    if (snapshot instanceof Promise) return undefined
    const answers = keptAnswers.get(snapshot)
    if (!answers) return undefined
    const admitted = admitAtOnce(auth, request, route.rule, (policy) => answers.get(keptKey(variantOf(policy), pathAndQuery)))
    return admitted && writeKept(request, admitted.answer, admitted.admission.rateLimit)
  }
  return {
    path: route.path,
    hook: { apiKey: route.rule, ...route.hook },
    // Destructured, not `(context) =>`: Elysia reads what a handler uses to skip the rest
    // (a handler taking the whole context had every request's cookies parsed, 16% of its CPU).
    handler: async ({ request, set, params, query, apiKey }: KeptRouteContext<Params, Query>) => {
      const snapshot = await snapshots.get()
      const variant = variantOf(apiKey.policy)
      return keptSnapshotResponse({ request, set }, snapshot, variant, () => route.body({ params, query, snapshot, variant }))
    },
    early,
  }
}
