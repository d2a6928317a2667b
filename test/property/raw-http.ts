import { connect } from 'node:net'
import { systemClock } from '../../src/shared/clock'

/**
 * A minimal HTTP/1.1 client over a plain TCP socket, for what `fetch` will not send: methods it
 * forbids (CONNECT, TRACE, TRACK), request targets it would normalise (`..`, raw NUL and invalid
 * UTF-8 bytes, `*`, authority and absolute form), duplicated headers and bodies on GET. The caller
 * writes the request bytes; this reads one response (Content-Length, chunked or until close).
 */

export interface RawResponse {
  status: number
  headers: [string, string][]
  body: Uint8Array
}

/** What came back: a parsed response, or the connection closed (or timed out) without one. */
export type RawOutcome = { kind: 'response'; response: RawResponse } | { kind: 'closed' | 'timeout'; received: Uint8Array }

const CRLFCRLF = Buffer.from('\r\n\r\n')

export function rawExchange(port: number, request: Uint8Array, options: { head: boolean; timeoutMs: number }): Promise<RawOutcome> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = []
    let settled = false
    const socket = connect({ host: '127.0.0.1', port })
    const finish = (outcome: RawOutcome) => {
      if (settled) return
      settled = true
      timer.cancel()
      socket.destroy()
      resolve(outcome)
    }
    const timer = systemClock.after(options.timeoutMs, () => finish({ kind: 'timeout', received: Buffer.concat(chunks) }))
    socket.on('connect', () => socket.write(request))
    socket.on('data', (chunk: Buffer) => {
      chunks.push(chunk)
      const parsed = parseResponse(Buffer.concat(chunks), options.head, false)
      if (parsed) finish({ kind: 'response', response: parsed })
    })
    const closed = () => {
      const all = Buffer.concat(chunks)
      const parsed = parseResponse(all, options.head, true)
      finish(parsed ? { kind: 'response', response: parsed } : { kind: 'closed', received: all })
    }
    socket.on('end', closed)
    socket.on('close', closed)
    // A reset after a complete response is still that response; otherwise it counts as closed.
    socket.on('error', closed)
  })
}

/** One complete response from `bytes`, or undefined while more is needed (`ended`: no more will come). */
export function parseResponse(bytes: Buffer, head: boolean, ended: boolean): RawResponse | undefined {
  const end = bytes.indexOf(CRLFCRLF)
  if (end < 0) return undefined
  const lines = bytes.subarray(0, end).toString('latin1').split('\r\n')
  const statusLine = /^HTTP\/1\.[01] (\d{3})/.exec(lines[0] ?? '')
  if (!statusLine) return ended ? { status: 0, headers: [['x-unparsed-status-line', lines[0] ?? '']], body: new Uint8Array() } : undefined
  const status = Number(statusLine[1])
  const headers = lines.slice(1).map((line): [string, string] => {
    const colon = line.indexOf(':')
    return [line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim()]
  })
  const header = (name: string) => headers.find(([n]) => n === name)?.[1]
  const rest = bytes.subarray(end + 4)
  if (status === 100) {
    // An interim answer: the real one follows.
    return parseResponse(rest, head, ended)
  }
  if (head || status === 204 || status === 304) return { status, headers, body: new Uint8Array() }
  if (header('transfer-encoding')?.toLowerCase().includes('chunked')) {
    const body = decodeChunked(rest)
    if (body) return { status, headers, body }
    return ended ? { status, headers, body: rest } : undefined
  }
  const length = header('content-length')
  if (length !== undefined) {
    const n = Number(length)
    if (rest.length >= n) return { status, headers, body: rest.subarray(0, n) }
    return ended ? { status, headers, body: rest } : undefined
  }
  return ended ? { status, headers, body: rest } : undefined
}

function decodeChunked(bytes: Buffer): Buffer | undefined {
  const parts: Buffer[] = []
  let at = 0
  for (;;) {
    const lineEnd = bytes.indexOf('\r\n', at)
    if (lineEnd < 0) return undefined
    const size = Number.parseInt(bytes.subarray(at, lineEnd).toString('latin1').split(';')[0]!, 16)
    if (!Number.isFinite(size)) return undefined
    const start = lineEnd + 2
    if (size === 0) return Buffer.concat(parts)
    if (bytes.length < start + size + 2) return undefined
    parts.push(bytes.subarray(start, start + size))
    at = start + size + 2
  }
}
