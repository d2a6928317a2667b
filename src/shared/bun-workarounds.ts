// Every place the service works around Bun (1.4.5) or Elysia on Bun, in one file: each export says
// what it avoids, and bun-workarounds.test.ts has a test of the platform's own behaviour that fails
// once the workaround is no longer needed (or says why no such test is possible).

import { withBodyLength } from './request-id'

/**
 * Bun writes a buffered body of 15 KiB or more uncorked when the handler answered on a later
 * event-loop turn, as a keyed route does when its charge waits for Redis (not one charged from a
 * quota lease: an await on microtasks alone keeps the turn, and the answer is corked): the status
 * line and each header name, separator and value go out as their own send(2), 23 syscalls and as
 * many TCP segments for a bulk answer instead of one. A body handed over as a one-chunk stream is
 * written with its headers in one sendmsg (docs/adr/0049-large-bodies-go-out-as-a-one-chunk-stream.md).
 * The cost is `Transfer-Encoding: chunked` instead of a Content-Length.
 */
export const UNCORKED_FROM_BYTES = 16_384 - 1_024

/** A 200 with this body, as a one-chunk stream when Bun would write a buffered body piecemeal. */
export function bytesResponse(body: Uint8Array | string, headers: Record<string, string> | Headers): Response {
  // Counted also when short (30 ns a KiB), for the request record's `bytes`.
  const size = typeof body === 'string' ? Buffer.byteLength(body) : body.byteLength
  if (size < UNCORKED_FROM_BYTES) return withBodyLength(new Response(body, { headers }), size)
  const bytes = typeof body === 'string' ? Buffer.from(body) : body
  const stream = new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(bytes)
      controller.close()
    },
  })
  return withBodyLength(new Response(stream, { headers }), size)
}

/**
 * Two parts written to the response one after the other, with no copy into one buffer: Bun's own
 * `direct` stream, whose `pull` writes straight to the socket on this turn, with the headers.
 * Goes out chunked, like bytesResponse's streams.
 */
export function writtenInParts(head: Uint8Array, tail: string | Uint8Array): ReadableStream<Uint8Array> {
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
 * The answer to a HEAD whose GET is streamed (chunked, no length): Bun gives a body-less Response
 * `Content-Length: 0`, which would announce an empty GET answer; `Transfer-Encoding: chunked` said
 * explicitly keeps the HEAD's headers those of its GET (RFC 9110 §9.3.2).
 */
export function headOfStreamedAnswer(headers: Record<string, string>): Response {
  return new Response(null, { headers: { ...headers, 'transfer-encoding': 'chunked' } })
}

/**
 * Bun's connection timeout (`idleTimeout`) for a REQUEST_TIMEOUT_SECONDS. Its timers tick every 4 s
 * and a timeout fires at a tick up to 4 s before it is due: one set a tick longer never closes a
 * connection, or cuts off the answer it is preparing, before the setting (255: Bun's maximum).
 */
export const connectionTimeoutSeconds = (requestTimeoutSeconds: number) => Math.min(requestTimeoutSeconds + 4, 255)

/** Bun's per-request timeout (`Server.timeout`): 0 turns it off, a number of seconds sets it again from now. */
export type ConnectionTimeouts = { timeout(request: Request, seconds: number): void }

/**
 * Reads a request's body with Bun's connection timeout off: Bun's timer counts from the request's
 * start whatever arrives, and closes without an answer; while a body is read, the reader's own
 * deadline (a 408) must be the only one. The timeout is set again after.
 */
export async function withoutConnectionTimeout<T>(server: ConnectionTimeouts | null, request: Request, requestTimeoutSeconds: number, read: () => Promise<T>): Promise<T> {
  server?.timeout(request, 0)
  try {
    return await read()
  } finally {
    server?.timeout(request, connectionTimeoutSeconds(requestTimeoutSeconds))
  }
}

/**
 * Bun.serve options every server of the app takes. `development: false`: never Bun's development
 * error page (stack, source), which Bun shows by default whenever NODE_ENV is not `production`.
 */
export const BUN_SERVE_OPTIONS = { development: false } as const

/**
 * Elysia options every app takes. `handler.standardHostname: false`: Elysia reads a path from the
 * URL's 11th character on (after `http://x.y`), so a request with a shorter host (`Host: x`)
 * handed to `app.fetch` (every request, see app.ts) is routed by a wrong path; this reads it from
 * the whole URL.
 */
export const ELYSIA_OPTIONS = { handler: { standardHostname: false } } as const
