import { Type } from '@sinclair/typebox'
import { Packr } from 'msgpackr'
import { JSON_CONTENT_TYPE } from '../../shared/http'
import type { RateLimit } from '../../shared/model'
import { pathAndQueryOf, type RepeatAnswer } from '../../shared/repeat-routes'
import { addRateLimitHeaders, admitAtOnce, type ApiKeyRule, rateLimitOf } from '../auth/guard'
import type { TierPolicy } from '../auth/tiers'
import type { AuthRuntime } from '../auth/runtime'
import type { PriceSnapshot } from '../snapshot/snapshot'
import type { SnapshotStore } from '../snapshot/store'

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

/** Weak comparison (RFC 9110 §13.1.2): does If-None-Match name this entity tag? */
function matchesIfNoneMatch(request: Request, etag: string): boolean {
  const header = request.headers.get('if-none-match')
  if (header === null) return false
  if (header.trim() === '*') return true
  const opaque = etag.replace(/^W\//, '')
  return header.split(',').some((tag) => tag.trim().replace(/^W\//, '') === opaque)
}

/**
 * Bun (1.4.5) writes a buffered body of 15 KiB or more uncorked when the handler answered on a
 * later event-loop turn, as a keyed route does when its charge waits for Redis (not one charged
 * from a quota lease: an await on microtasks alone keeps the turn, and the answer is corked): the
 * status line and each header name, separator and value go out as their own send(2), 23 syscalls
 * and as many TCP segments for a bulk answer instead of one (strace). A body handed over as a one-chunk stream is written with its
 * headers in one sendmsg: 100 → 42 µs of server CPU per 74 KB answer (docs/decisions.md). The cost is
 * `Transfer-Encoding: chunked` instead of a Content-Length on those answers.
 */
const UNCORKED_FROM_BYTES = 16_384 - 1_024

/** A 200 with this body, as a one-chunk stream when Bun would write a buffered body piecemeal. */
export function bytesResponse(body: Uint8Array | string, headers: Record<string, string>): Response {
  // A UTF-16 code unit is at most 3 bytes of UTF-8: a short string needs no counting.
  const size = typeof body === 'string' ? (body.length * 3 < UNCORKED_FROM_BYTES ? 0 : Buffer.byteLength(body)) : body.byteLength
  if (size < UNCORKED_FROM_BYTES) return new Response(body, { headers })
  const bytes = typeof body === 'string' ? Buffer.from(body) : body
  const stream = new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(bytes)
      controller.close()
    },
  })
  return new Response(stream, { headers })
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
 * from Pro up, docs/decisions.md "Sales in Pro card prices"): '' for the plain answer. The one rule
 * both the route and its repeats (repeatedSnapshotAnswer) read.
 */
export type AnswerVariant = (policy: TierPolicy) => string

/** The weak ETag of a snapshot answer: the snapshot version, the format and variant, the path with its query. */
export function snapshotEtag(snapshot: PriceSnapshot, format: 'json' | 'msgpack', url: string, variant = ''): string {
  return `W/"${snapshot.version}-${Bun.hash(`${format}${variant === '' ? '' : `+${variant}`} ${pathAndQueryOf(url)}`).toString(36)}"`
}

/** A JSON answer up to its `rate_limit`, the one part that differs between two requests for the same path and query. */
interface RememberedAnswer {
  /** Where it is kept (the variant's map) and under which path: to drop it when it is the oldest. */
  paths: Map<string, RememberedAnswer>
  pathAndQuery: string
  etag: string
  /** `{"data":…` with `meta` when there is one, without the closing brace, as UTF-8. */
  head: Buffer
  /**
   * A repeat's headers but its X-RateLimit-*, made on the first repeat: copying a Headers costs a
   * repeat less than building one from an object.
   */
  repeatHeaders?: Headers
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
 * From this size a repeat's kept head and its own tail are written to the response one after the
 * other (Bun's direct stream) instead of copied into one new buffer: below it, Buffer.allocUnsafe
 * takes a slice of its shared pool; from it, a fresh ArrayBuffer per answer, which costs more than
 * the stream (top movers repeats, 8–20 kB: 19.1–19.6 → 16.1–16.6 µs of server CPU; a 600-byte
 * answer costs 0.8 µs more as a stream; docs/decisions.md). Such answers go out chunked, as bytesResponse's do.
 */
const WRITTEN_IN_PARTS_FROM_BYTES = 4_096

function writtenInParts(head: Buffer, tail: string): ReadableStream<Uint8Array> {
  // Bun's own stream type: `pull` writes straight to the response, on this turn.
  return new ReadableStream({
    type: 'direct',
    pull(controller) {
      controller.write(head)
      controller.write(tail)
      controller.end()
    },
  })
}

/**
 * The bytes of answers each snapshot keeps, oldest dropped first: thousands of cards' prices or
 * hundreds of movers lists, and a bound however many distinct queries a client invents.
 */
const ANSWER_BYTES_KEPT = 16 * 2 ** 20

/** A snapshot's kept answers: per variant, by path and query; `order` holds them all, oldest first. */
interface KeptAnswers {
  byVariant: Map<string, Map<string, RememberedAnswer>>
  order: Set<RememberedAnswer>
  bytes: number
}
const rememberedAnswers = new WeakMap<PriceSnapshot, KeptAnswers>()

function answersOf(snapshot: PriceSnapshot): KeptAnswers {
  let answers = rememberedAnswers.get(snapshot)
  if (!answers) rememberedAnswers.set(snapshot, (answers = { byVariant: new Map(), order: new Set(), bytes: 0 }))
  return answers
}

function pathsOf(answers: KeptAnswers, variant: string): Map<string, RememberedAnswer> {
  let paths = answers.byVariant.get(variant)
  if (!paths) answers.byVariant.set(variant, (paths = new Map()))
  return paths
}

const sizeOf = (answer: RememberedAnswer) => answer.head.byteLength + answer.pathAndQuery.length

function remember(snapshot: PriceSnapshot, answer: RememberedAnswer) {
  const answers = answersOf(snapshot)
  const size = sizeOf(answer)
  // Two first asks built at once (a body that reads is awaited) keep the first: both are the same answer.
  if (size > ANSWER_BYTES_KEPT || answer.paths.has(answer.pathAndQuery)) return
  for (const oldest of answers.order) {
    if (answers.bytes + size <= ANSWER_BYTES_KEPT) break
    answers.order.delete(oldest)
    oldest.paths.delete(oldest.pathAndQuery)
    answers.bytes -= sizeOf(oldest)
  }
  answer.paths.set(answer.pathAndQuery, answer)
  answers.order.add(answer)
  answers.bytes += size
}

/** What closes a JSON answer: `rate_limit` (three numbers and an ISO 8601 instant, which need no escaping), then the body's brace. */
const rateLimitTail = (rateLimit: RateLimit) =>
  `,"rate_limit":{"daily_limit":${rateLimit.daily_limit},"daily_remaining":${rateLimit.daily_remaining},"daily_reset":"${rateLimit.daily_reset}"}}`

/**
 * Moves what hooks put in `set.headers` (the guard's X-RateLimit-*) into a Response's headers:
 * Elysia copies a returned Response into a new one whenever `set.headers` is not empty, an extra
 * pass over the body.
 */
export function moveSetHeaders(set: { headers: Record<string, string | number> }, headers: Record<string, string>) {
  for (const name in set.headers) {
    headers[name] = String(set.headers[name])
    delete set.headers[name]
  }
}

/** The headers every snapshot answer starts with, first asked or repeated; a route that also answers msgpack varies by Accept. */
function snapshotHeaders(etag: string, msgpack: boolean): Record<string, string> {
  const headers: Record<string, string> = { etag, 'cache-control': 'private, no-cache' }
  if (msgpack) headers.vary = 'Accept'
  return headers
}

/**
 * A response answered from the price snapshot. Its weak ETag names the snapshot version, the path
 * with its query and the format, so `If-None-Match` answers 304 until the next sync changes the
 * snapshot (weak: `rate_limit` in the body differs from one request to the next). JSON by default,
 * msgpack on request where `msgpack` is allowed. The body carries `rate_limit` like any key-guarded
 * route's (the guard adds it to plain objects only).
 *
 * `body` is only called when needed: with `remember`, a JSON answer is kept for the snapshot's life
 * by its path and query (the same request asks for the same answer until the snapshot changes),
 * and the next request for it only adds its own `rate_limit`. For routes whose answers clients ask
 * for again and again (a card's prices, a movers list), not for those whose queries rarely repeat.
 * `variant` names the answer a caller's tier gets where it depends on the tier (AnswerVariant): it
 * is part of the ETag and of what the answer is kept by. A body that needs a read (a promise) makes
 * the response one.
 */
export function snapshotResponse<Data>(
  context: { request: Request; set: { headers: Record<string, string | number> } },
  snapshot: PriceSnapshot,
  body: () => SnapshotBody<Data> | SerialisedBody<Data> | Promise<SnapshotBody<Data>>,
  // Kept answers are JSON, and a repeat is answered without looking at Accept (repeatedSnapshotAnswer).
  options: { msgpack: boolean; remember?: false } | { msgpack: false; remember: true; variant?: string },
): Response | Promise<Response> {
  const format: AnswerHow['format'] = options.msgpack && wantsMsgpack(context.request) ? 'msgpack' : 'json'
  const how: AnswerHow = {
    format,
    remembering: options.remember === true && format === 'json',
    variant: (options.remember === true && options.variant) || '',
    pathAndQuery: pathAndQueryOf(context.request.url),
    msgpack: options.msgpack,
  }
  const answer = how.remembering ? rememberedAnswers.get(snapshot)?.byVariant.get(how.variant)?.get(how.pathAndQuery) : undefined
  if (answer) return answerWith(context, snapshot, how, answer)
  // Built before the 304 check, so a request the route refuses (404, 400) is refused whatever it sends as If-None-Match.
  const built = body()
  if (built instanceof Promise) return built.then((ready) => answerWith(context, snapshot, how, undefined, ready))
  return answerWith(context, snapshot, how, undefined, built)
}

/** How snapshotResponse answers a request: its format, whether it keeps the answer, and under which variant and path. */
interface AnswerHow {
  format: 'json' | 'msgpack'
  remembering: boolean
  variant: string
  pathAndQuery: string
  /** The route also answers msgpack (so it varies by Accept). */
  msgpack: boolean
}

/** snapshotResponse's answer, from the kept `answer` or from the `built` body. */
function answerWith<Data>(
  context: { request: Request; set: { headers: Record<string, string | number> } },
  snapshot: PriceSnapshot,
  { format, remembering, variant, pathAndQuery, msgpack }: AnswerHow,
  answer: RememberedAnswer | undefined,
  built?: SnapshotBody<Data> | SerialisedBody<Data>,
): Response {
  const { request, set } = context
  const etag = answer?.etag ?? snapshotEtag(snapshot, format, request.url, variant)
  const headers = snapshotHeaders(etag, msgpack)
  moveSetHeaders(set, headers)
  if (matchesIfNoneMatch(request, etag)) return new Response(null, { status: 304, headers })
  const rateLimit = rateLimitOf(request)!
  if (format === 'msgpack') {
    headers['content-type'] = MSGPACK
    const data = 'json' in built! ? built.rows() : built!.data
    return bytesResponse(packr.pack({ data, ...(built!.meta && { meta: built!.meta }), rate_limit: rateLimit }), headers)
  }
  headers['content-type'] = JSON_CONTENT_TYPE
  const tail = rateLimitTail(rateLimit)
  if (answer) return bytesResponse(withTail(answer.head, tail), headers)
  const meta = built!.meta ? `,"meta":${JSON.stringify(built!.meta)}` : ''
  // Rows the snapshot keeps as bytes (bulk) are copied once, straight into the answer with its tail.
  const serialised = (end: string) => ('json' in built! ? built.json('{"data":', end) : `{"data":${JSON.stringify(built!.data)}${end}`)
  if (!remembering) return bytesResponse(serialised(meta + tail), headers)
  const kept: RememberedAnswer = { paths: pathsOf(answersOf(snapshot), variant), pathAndQuery, etag, head: Buffer.from(serialised(meta)) }
  remember(snapshot, kept)
  return bytesResponse(withTail(kept.head, tail), headers)
}

/**
 * A repeat of a kept snapshot answer (`remember`), answered before the app with the key guard's
 * work done at once (admitAtOnce): the same status, headers and body as snapshotResponse gives,
 * with this request's `rate_limit`. `rule` and `variantOf` are the route's own: the answer kept
 * for the key's variant, or none.
 */
export function repeatedSnapshotAnswer(
  auth: AuthRuntime,
  snapshots: SnapshotStore,
  rule: ApiKeyRule & { cost?: number },
  variantOf: AnswerVariant = () => '',
): RepeatAnswer {
  return (request, pathAndQuery) => {
    const snapshot = snapshots.get()
    if (snapshot instanceof Promise) return undefined
    const kept = rememberedAnswers.get(snapshot)
    if (!kept) return undefined
    const admitted = admitAtOnce(auth, request, rule, (policy) => kept.byVariant.get(variantOf(policy))?.get(pathAndQuery))
    if (!admitted) return undefined
    const { answer, rateLimit } = admitted
    if (matchesIfNoneMatch(request, answer.etag)) {
      const headers = snapshotHeaders(answer.etag, false)
      addRateLimitHeaders(headers, rateLimit)
      return new Response(null, { status: 304, headers })
    }
    answer.repeatHeaders ??= new Headers({ ...snapshotHeaders(answer.etag, false), 'content-type': JSON_CONTENT_TYPE })
    const headers = new Headers(answer.repeatHeaders)
    addRateLimitHeaders(headers, rateLimit)
    // Answered on the request's own turn, so Bun writes it corked whatever its size (see bytesResponse).
    const tail = rateLimitTail(rateLimit)
    if (answer.head.byteLength < WRITTEN_IN_PARTS_FROM_BYTES) return new Response(withTail(answer.head, tail), { headers })
    return new Response(writtenInParts(answer.head, tail), { headers })
  }
}
