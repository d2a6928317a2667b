/**
 * One bounded GET to a marketplace, shared by the HTTP sources: every request is held to a time
 * limit from connecting to the last byte, a size limit, no redirects, and strict UTF-8; every
 * failure is one MarketplaceError saying which kind it was, never echoing the base URL (it may
 * carry credentials) nor the answer's values.
 */
import type { Clock } from '../../../shared/clock'

export type MarketplaceErrorKind =
  /** No answer within the timeout (connecting, waiting or reading the body). */
  | 'timeout'
  /** No connection, or the connection broke. */
  | 'unavailable'
  /** An answer other than 2xx (redirects included: they are not followed). */
  | 'status'
  /** A 2xx answer that is too large, not JSON, or not the shape and values the protocol promises. */
  | 'malformed'
  /** A well-formed answer in which the marketplace says it failed (TCGCSV's `success: false`). */
  | 'refused'
  /** The day's request budget is used up: nothing was sent (TCGCSV). */
  | 'budget'

export class MarketplaceError extends Error {
  override readonly name = 'MarketplaceError'

  constructor(
    readonly kind: MarketplaceErrorKind,
    /** The path requested, e.g. `/groups/3/prices?date=2026-11-20`. */
    readonly path: string,
    detail: string,
    /** The HTTP status, for kind 'status'. */
    readonly status?: number,
    /** For a 429 or 503: how long the marketplace asked to wait, in ms, when it said. */
    readonly retryAfterMs?: number,
  ) {
    super(`marketplace GET ${path}: ${detail}`)
  }
}

export type Fetch = (url: string, init: RequestInit) => Promise<Response>

export interface RequestOptions {
  /** The longest one request may take, from connecting to the last byte of its body. */
  timeoutMs: number
  /** Whose time `timeoutMs` runs on: the service's clock. */
  clock: Clock
  /** The largest answer accepted, in bytes after decompression. */
  maxBodyBytes: number
  headers?: Record<string, string>
  fetch?: Fetch
}

/** GETs `base + path` and answers its body as text, or throws a MarketplaceError. */
export async function getText(base: string, path: string, options: RequestOptions): Promise<string> {
  const deadline = new AbortController()
  const timer = options.clock.after(options.timeoutMs, () => deadline.abort(new DOMException('no answer in time', 'TimeoutError')), { unref: true })
  try {
    return await read(base, path, options, deadline.signal)
  } finally {
    timer.cancel()
  }
}

/** GETs `base + path` and answers its body parsed as JSON. */
export async function getJson(base: string, path: string, options: RequestOptions): Promise<unknown> {
  const text = await getText(base, path, options)
  try {
    return JSON.parse(text)
  } catch {
    throw new MarketplaceError('malformed', path, 'answer is not valid JSON')
  }
}

/** One request, aborted by `signal` (its deadline) wherever it is: connecting, waiting or reading the body. */
async function read(base: string, path: string, options: RequestOptions, signal: AbortSignal): Promise<string> {
  const fetchAnswer = options.fetch ?? ((url, init) => fetch(url, init))
  let response: Response
  try {
    response = await fetchAnswer(base + path, { signal, redirect: 'manual', headers: { accept: 'application/json', ...options.headers } })
  } catch (error) {
    throw transportFailure(path, signal, error, options.timeoutMs)
  }
  if (response.status < 200 || response.status > 299) {
    await response.body?.cancel().catch(() => {})
    const redirect = response.status >= 300 && response.status < 400 ? ' (redirects are not followed)' : ''
    const retryAfterMs = retryAfter(response.headers.get('retry-after'), options.clock.now())
    throw new MarketplaceError('status', path, `answered ${response.status}${redirect}`, response.status, retryAfterMs)
  }
  return readBody(response, path, signal, options.maxBodyBytes, options.timeoutMs)
}

/** A Retry-After header (seconds, or an HTTP date) in ms from `now`; undefined when absent or unreadable. */
export function retryAfter(header: string | null, now: Date): number | undefined {
  if (header === null) return undefined
  const value = header.trim()
  if (/^\d{1,9}$/.test(value)) return Number(value) * 1000
  const at = Date.parse(value)
  return Number.isNaN(at) ? undefined : Math.max(0, at - now.getTime())
}

function transportFailure(path: string, signal: AbortSignal, error: unknown, timeoutMs: number): MarketplaceError {
  if (signal.aborted) return new MarketplaceError('timeout', path, `no answer within ${timeoutMs} ms`)
  // Only the error's code: its message may repeat the full URL.
  const code = typeof error === 'object' && error !== null && 'code' in error && typeof error.code === 'string' ? ` (${error.code})` : ''
  return new MarketplaceError('unavailable', path, `connection failed${code}`)
}

/** The body as text, refused beyond `maxBodyBytes` and cut off by the same deadline as the request. */
async function readBody(response: Response, path: string, signal: AbortSignal, maxBodyBytes: number, timeoutMs: number): Promise<string> {
  const declared = Number(response.headers.get('content-length'))
  if (declared > maxBodyBytes) {
    await response.body?.cancel().catch(() => {})
    throw new MarketplaceError('malformed', path, `answer larger than ${maxBodyBytes} bytes`)
  }
  if (!response.body) return ''
  const reader = response.body.getReader()
  const stopReading = () => void reader.cancel().catch(() => {})
  signal.addEventListener('abort', stopReading, { once: true })
  const chunks: Uint8Array[] = []
  let size = 0
  try {
    for (;;) {
      const { done, value } = await reader.read()
      if (signal.aborted) throw new MarketplaceError('timeout', path, `answer not complete within ${timeoutMs} ms`)
      if (done) break
      size += value.byteLength
      if (size > maxBodyBytes) {
        stopReading()
        throw new MarketplaceError('malformed', path, `answer larger than ${maxBodyBytes} bytes`)
      }
      chunks.push(value)
    }
  } catch (error) {
    if (error instanceof MarketplaceError) throw error
    throw transportFailure(path, signal, error, timeoutMs)
  } finally {
    signal.removeEventListener('abort', stopReading)
  }
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(Buffer.concat(chunks))
  } catch {
    throw new MarketplaceError('malformed', path, 'answer is not valid UTF-8')
  }
}
