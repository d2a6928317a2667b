import http from 'node:http'
import https from 'node:https'
import type { Socket } from 'node:net'
import type { Clock } from '../../shared/clock'
import { signedHeaders } from './signing'
import { checkConnectedAddress, checkLiteralHost, guardedLookup, parseTarget, RefusedTarget, type TargetPolicy } from './target-guard'

/** One signed POST of an event to a webhook's URL. */
export interface SignedPost {
  url: string
  /** The webhook's signing secret (`whsec_…`). */
  secret: string
  /** The `webhook-id`: the same on every attempt of one event. */
  eventId: string
  /** The exact JSON body. */
  body: string
  /** The attempt's instant: its `webhook-timestamp`. */
  at: Date
}

export interface SendOptions extends TargetPolicy {
  /** From connecting to the response's status line (default 10 s). */
  timeoutMs?: number
  /** Times the attempt: its timeout and its duration. */
  clock: Clock
}

export interface SendResult {
  /** Any 2xx. */
  delivered: boolean
  /** The receiver's status; null when no response came. */
  statusCode: number | null
  durationMs: number
  /** Why it failed, in words safe to show the webhook's owner. */
  error?: string
}

export const DELIVERY_TIMEOUT_MS = 10_000
/** At most this much of a response body is read: the status is the answer, the body is only drained. */
export const MAX_RESPONSE_BYTES = 4_096
const USER_AGENT = 'tcg-price-api-webhooks/1'

/**
 * Sends one signed POST. Never throws: every failure is a result. The target is checked before
 * and while connecting (see target-guard.ts); redirects are not followed; one timer bounds the
 * whole attempt; each attempt has its own connection, so every connection is checked.
 */
export async function sendSigned(post: SignedPost, options: SendOptions): Promise<SendResult> {
  const { clock } = options
  const started = clock.monotonic()
  const result = (fields: Omit<SendResult, 'durationMs'>): SendResult => ({ ...fields, durationMs: Math.round(clock.monotonic() - started) })
  let url: URL
  try {
    url = parseTarget(post.url)
    // A literal address is never looked up, so it is judged here, before any connection.
    checkLiteralHost(url, options)
  } catch (error) {
    return result({ delivered: false, statusCode: null, error: (error as Error).message })
  }
  const timeoutMs = options.timeoutMs ?? DELIVERY_TIMEOUT_MS
  const client = url.protocol === 'https:' ? https : http
  return new Promise<SendResult>((resolve) => {
    let settled = false
    const finish = (fields: Omit<SendResult, 'durationMs'>) => {
      if (settled) return
      settled = true
      timer.cancel()
      resolve(result(fields))
    }
    const request = client.request(url, {
      method: 'POST',
      agent: false,
      lookup: guardedLookup(options) as never,
      headers: {
        'content-type': 'application/json',
        'content-length': String(Buffer.byteLength(post.body)),
        'user-agent': USER_AGENT,
        ...signedHeaders(post.secret, post.eventId, post.at, post.body),
      },
    })
    const timer = clock.after(timeoutMs, () => {
      request.destroy()
      finish({ delivered: false, statusCode: null, error: `no response within ${timeoutMs / 1000} s` })
    })
    request.on('socket', (socket: Socket) => {
      const check = () => {
        try {
          checkConnectedAddress(socket.remoteAddress, options)
        } catch (error) {
          request.destroy()
          finish({ delivered: false, statusCode: null, error: (error as Error).message })
        }
      }
      if (socket.remoteAddress !== undefined && !socket.connecting) check()
      else socket.once('connect', check)
    })
    request.on('response', (response) => {
      const statusCode = response.statusCode ?? null
      let read = 0
      response.on('data', (chunk: Buffer) => {
        read += chunk.length
        if (read > MAX_RESPONSE_BYTES) response.destroy()
      })
      const done = () => {
        const delivered = statusCode !== null && statusCode >= 200 && statusCode < 300
        const error = delivered
          ? undefined
          : statusCode !== null && statusCode >= 300 && statusCode < 400
            ? `answered ${statusCode}: redirects are not followed`
            : `answered ${statusCode}`
        finish({ delivered, statusCode, error })
      }
      // The status decides; a body cut short or never finished does not change the outcome.
      response.on('end', done)
      response.on('close', done)
      response.on('error', done)
    })
    request.on('error', (error: Error & { code?: string }) => {
      const why = error instanceof RefusedTarget ? error.message : `could not connect: ${error.code ?? error.message}`
      finish({ delivered: false, statusCode: null, error: why })
    })
    request.end(post.body)
  })
}
