import { Elysia } from 'elysia'
import { type ConnectionTimeouts, withoutConnectionTimeout } from './bun-workarounds'
import type { Clock, Timer } from './clock'
import { AppError, type ErrorDetail } from './errors'

// What every request must be before any route code sees it: bodies within the size and time limits
// and JSON by one media-type rule, JSON no deeper than MAX_JSON_DEPTH, and no NUL character in a
// string that could reach PostgreSQL (it refuses them: "invalid byte sequence 0x00", which was a 500).

/** Deeper JSON is refused: no body of this API nests beyond 3 levels, and deep values overflow the validator's stack. */
export const MAX_JSON_DEPTH = 32

/** `application/json` or any `+json` type (RFC 6839), in any case; Elysia hands parsers the type without its parameters. */
const JSON_MEDIA_TYPE = /^(?:application\/json|[\w.!#$&^-]+\/[\w.!#$&^+-]+\+json)\s*(?:;|$)/i

export const isJsonMediaType = (contentType: string) => JSON_MEDIA_TYPE.test(contentType)

/**
 * A body the route must refuse, handed to it by the parser instead of thrown there: a guarded route
 * judges the body only after its key, quota or origin checks (docs/adr/0036-quota-accounting.md), then throws it.
 */
export class RefusedBody {
  constructor(readonly error: AppError) {}
}

export interface BodyLimits {
  maxBodyBytes: number
  /** How long a body may take to arrive whole, from the start of its reading (REQUEST_TIMEOUT_SECONDS). */
  requestTimeoutSeconds: number
}

// Both close the connection after the answer: the unread rest of the body would have to be drained.
const tooLarge = (maxBytes: number) =>
  new AppError('PAYLOAD_TOO_LARGE', `The request body is larger than the limit of ${maxBytes} bytes`, [{ field: 'body', message: `must be at most ${maxBytes} bytes` }], {
    connection: 'close',
  })

const tooSlow = (seconds: number) =>
  new AppError('REQUEST_TIMEOUT', `The request body took longer than the limit of ${seconds} s to arrive`, [{ field: 'body', message: `must arrive within ${seconds} s` }], {
    connection: 'close',
  })

const invalidBody = (detail: ErrorDetail) =>
  new AppError('INVALID_PARAMETER', detail.field === 'body' ? 'The request body could not be parsed' : `Invalid body: '${detail.field}' ${detail.message}`, [detail])

const NUL_MESSAGE = 'must not contain NUL characters'

/**
 * Field names that would shadow what every object inherits (`toString`, `valueOf`, `constructor`,
 * `__proto__`, …). No body of this API uses one, and code that turns a value into text calls them:
 * `{"email":{"toString":1}}` made the validator's own error message throw (a 500).
 */
const INHERITED_NAMES = new Set(Object.getOwnPropertyNames(Object.prototype))

/** RFC 9112 §6.3: a request has a body when it declares a length above 0 or a transfer coding. */
export function declaresBody(request: Request) {
  const length = request.headers.get('content-length')
  return request.headers.has('transfer-encoding') || (length !== null && length !== '0')
}

/**
 * The body's bytes, stopped as soon as they pass the size limit (a chunked body declares no length)
 * or take longer than the time limit: a total, so a body trickled a byte at a time cannot hold a
 * connection and what it has sent so far (docs/adr/0028-hostile-input.md).
 */
async function readLimited(body: ReadableStream<Uint8Array>, limits: BodyLimits, clock: Clock): Promise<Uint8Array> {
  const reader = body.getReader()
  let timer: Timer | undefined
  const late = new Promise<'late'>((resolve) => (timer = clock.after(limits.requestTimeoutSeconds * 1000, () => resolve('late'))))
  const chunks: Uint8Array[] = []
  let total = 0
  try {
    for (;;) {
      const next = await Promise.race([reader.read(), late])
      if (next === 'late') throw tooSlow(limits.requestTimeoutSeconds)
      if (next.done) return Buffer.concat(chunks)
      total += next.value.byteLength
      if (total > limits.maxBodyBytes) throw tooLarge(limits.maxBodyBytes)
      chunks.push(next.value)
    }
  } finally {
    timer?.cancel()
  }
}

/**
 * The first thing in a parsed JSON value that must not reach the service: nesting beyond
 * MAX_JSON_DEPTH, or a NUL in a string or key. Walked with a stack, as the value may be deeper than
 * the call stack allows.
 */
function jsonProblem(root: unknown): ErrorDetail | undefined {
  const stack: [value: unknown, path: string, depth: number][] = [[root, '', 1]]
  for (let entry = stack.pop(); entry; entry = stack.pop()) {
    const [value, path, depth] = entry
    const field = path || 'body'
    if (typeof value === 'string' && value.includes('\0')) return { field, message: NUL_MESSAGE }
    if (value === null || typeof value !== 'object') continue
    if (depth > MAX_JSON_DEPTH) return { field, message: `must not nest more than ${MAX_JSON_DEPTH} levels deep` }
    for (const [key, item] of Object.entries(value)) {
      const itemPath = path ? `${path}.${key}` : key
      if (key.includes('\0')) return { field: itemPath, message: 'must not have a name containing NUL characters' }
      if (INHERITED_NAMES.has(key)) return { field: itemPath, message: 'is not a field name this API accepts' }
      stack.push([item, itemPath, depth + 1])
    }
  }
}

/**
 * The body as JSON, a RefusedBody saying why it is not acceptable, or null when there is none. Any
 * body is read, whatever its type, so that one over the limits is refused there (413, 408) and one
 * within them leaves the connection ready for the next request.
 */
async function parseBody(
  { request, contentType, headers, server }: { request: Request; contentType: string; headers: Record<string, unknown>; server: ConnectionTimeouts | null },
  limits: BodyLimits,
  clock: Clock,
): Promise<unknown> {
  if (!declaresBody(request) || !request.body) return null
  const body = request.body
  const bytes = await withoutConnectionTimeout(server, request, limits.requestTimeoutSeconds, () => readLimited(body, limits, clock))
  delete headers.connection
  // Content-Type is a single value (RFC 9110 §8.3): repeated, the header arrives comma-joined.
  const declared = request.headers.get('content-type')
  if (!isJsonMediaType(contentType) || declared?.includes(',')) {
    const named = declared ? `not ${declared}` : 'and the request names no Content-Type'
    return new RefusedBody(new AppError('UNSUPPORTED_MEDIA_TYPE', `The body must be JSON (Content-Type: application/json), ${named}`))
  }
  let value: unknown
  try {
    value = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes))
  } catch {
    return new RefusedBody(invalidBody({ field: 'body', message: 'is not valid JSON' }))
  }
  const problem = jsonProblem(value)
  return problem ? new RefusedBody(invalidBody(problem)) : value
}

/** The first query or path parameter (name or value) holding a NUL character. */
function nulParameter(parts: Record<'query' | 'path', Record<string, unknown> | undefined>): AppError | undefined {
  for (const [part, values] of Object.entries(parts)) {
    for (const [name, value] of Object.entries(values ?? {})) {
      const strings = [name, ...(Array.isArray(value) ? value : [value])]
      if (strings.some((item) => typeof item === 'string' && item.includes('\0'))) {
        return new AppError('INVALID_PARAMETER', `Invalid ${part}: '${name}' ${NUL_MESSAGE}`, [{ field: name, message: NUL_MESSAGE }])
      }
    }
  }
}

/**
 * The rules above for every route. A declared length over the limit is refused before routing,
 * without reading a byte of the body; a chunked body is read only up to the limit. Both are 413,
 * and a body slower than the time limit 408, before any other check. Other body refusals are
 * RefusedBody values the guards throw in their turn (and the error handler if a route without a
 * guard validates one). A NUL in a parameter is a 400 after the guards, like any invalid parameter.
 */
export function requestRules(limits: BodyLimits, clock: Clock) {
  return new Elysia({ name: 'request-rules' })
    .onRequest(({ request, set }) => {
      if (Number(request.headers.get('content-length')) > limits.maxBodyBytes) throw tooLarge(limits.maxBodyBytes)
      // Unless the parser reads it to its end, a body is left unread (a GET's, which Bun never hands
      // over, or one sent to no route) and is not drained: the answer closes the connection.
      if (declaresBody(request)) set.headers.connection = 'close'
    })
    .onParse({ as: 'global' }, ({ request, contentType, set, server }) => parseBody({ request, contentType, headers: set.headers, server }, limits, clock))
    .onBeforeHandle({ as: 'global' }, ({ request, query, params }) => {
      // A decoded NUL can only come from `%00` in the URL: most requests skip the walk.
      if (!request.url.includes('%00') && !request.url.includes('\0')) return
      const refusal = nulParameter({ query, path: params })
      if (refusal) throw refusal
    })
}
