import { EventEmitter } from 'node:events'
import { Socket } from 'node:net'
import postgres from 'postgres'
import type { Clock } from '../shared/clock'

/** After a connection attempt fails, the next one waits this long; others meanwhile fail at once. */
export const PROBE_INTERVAL_MS = 500

/** The first int32 after the length of a startup-phase request that is not a session (SSL, GSS, cancel). */
const SPECIAL_REQUESTS = new Set([80877102, 80877103, 80877104])

/** The ErrorResponse field codes postgres.js names (its `PostgresError` carries the same names). */
const ERROR_FIELDS: Record<string, string> = {
  S: 'severity_local',
  V: 'severity',
  C: 'code',
  M: 'message',
  D: 'detail',
  H: 'hint',
  W: 'where',
  F: 'file',
  L: 'line',
  R: 'routine',
}

/** What postgres.js's `socket` option is given: its parsed options. */
interface SocketOptions {
  host: string[]
  port: number[]
  path?: string | false
}

export interface ConnectionGuard {
  /** postgres.js's `socket` option: opens every connection the pool makes. */
  socket(options: SocketOptions): Socket | EventEmitter | Promise<Socket>
  /** The pool's reconnect delay in seconds: none, since the guard spaces real attempts itself. */
  backoff(): number
}

/**
 * docs/adr/0077-database-outage.md: every connection postgres.js (3.4.9) opens goes through
 * here, on a GuardedSocket (below), which works around the driver's mishandling of a connection
 * that fails or ends. And while the database refuses or stalls, queries neither queue behind
 * connection attempts nor each make one: after an attempt fails, one attempt at a time (the probe)
 * tries the server, at the earliest PROBE_INTERVAL_MS after the failure, and the others fail at
 * once with the failure's error. The first startup that completes lifts the block.
 *
 * Special requests (SSL, GSS, cancel) are passed through unread: an SSL connection's startup is
 * encrypted, and postgres.js listens to its TLS socket, so such connections keep the driver's own
 * behaviour.
 */
export function connectionGuard(clock: Clock): ConnectionGuard {
  let failure: { error: Error; at: number } | undefined
  let probing = false

  const outcome = {
    started() {
      failure = undefined
      probing = false
    },
    failed(error: Error) {
      failure = { error, at: clock.monotonic() }
      probing = false
    },
  }

  return {
    socket(options) {
      const connect = () => {
        const socket = new GuardedSocket(outcome)
        if (options.path) socket.connect(options.path)
        else socket.connect(options.port[0]!, options.host[0]!)
        return socket
      }
      if (!failure) return connect()
      if (probing) return new RefusedAttempt(refusedAgain(failure.error))
      probing = true
      // postgres.js starts its connect timeout once the socket is handed over: a probe waits both.
      return clock.sleep(failure.at + PROBE_INTERVAL_MS - clock.monotonic()).then(connect)
    },
    backoff: () => 0,
  }
}

/** The error an attempt skipped during the block fails with: the last attempt's, said again. */
function refusedAgain(error: Error): Error {
  const { code, severity } = error as { code?: string; severity?: string }
  return Object.assign(new Error(`${error.message} (the last connection attempt's answer; the next attempt is under way)`, { cause: error }), {
    code,
    severity,
  })
}

/**
 * A connection attempt that is not made. It fails inside postgres.js's first write to it (the
 * startup message), so postgres.js's write buffer is flushed and clean when it hears the close;
 * or, if no write comes, two event-loop turns after it was made.
 */
class RefusedAttempt extends EventEmitter {
  readyState = 'opening'

  constructor(private readonly error: Error) {
    super()
    setImmediate(() => setImmediate(() => this.fail()))
  }

  write() {
    this.fail()
    return false
  }
  end() {}
  destroy() {}
  setKeepAlive() {}

  private fail() {
    if (this.readyState === 'closed') return
    this.readyState = 'closed'
    this.emit('error', this.error)
    this.emit('close', true)
  }
}

/**
 * A real connection that reads the server's messages as they pass, for two things postgres.js
 * (3.4.9) gets wrong:
 *
 * - It hands an ErrorResponse that ends the connection (any during startup, a FATAL after) to
 *   the query in flight, or keeps it for the next one if none is; after a connection was cut with
 *   a query in flight, a refused startup (55000, 3D000, 53300, 57P03) then never reaches the
 *   waiting query, and the driver reconnects in a loop without a pause, forever
 *   (porsager/postgres#1193, #1223). Here such an error ends the socket instead, so postgres.js
 *   fails every query waiting on the connection with it; a startup that ends without one
 *   ends with a CONNECTION_CLOSED or CONNECT_TIMEOUT error.
 * - It forgets a write it had scheduled when the socket closes first, and that slot's later
 *   connections then wait for a flush that never comes (porsager/postgres#1209). Here the socket's
 *   end is handed over inside postgres.js's next write, after which it clears its buffer, or two
 *   event-loop turns later, when any write scheduled before the end has been made.
 */
class GuardedSocket extends Socket {
  /** 'startup' until the first ReadyForQuery, 'open' after; 'opaque' for special requests, read by no one. */
  private phase: 'startup' | 'open' | 'opaque' = 'startup'
  private written = false
  /** The server ended the connection (as opposed to postgres.js destroying it at its connect timeout). */
  private remoteEnded = false
  /** Bytes of a message already passed on that are still to come. */
  private remaining = 0
  /** The start of a message held back until its header, or the whole of an ErrorResponse, has come. */
  private carry: Buffer = Buffer.alloc(0)
  /** The socket's error and close, held until they can be handed over (see the class comment). */
  private ending: { error?: Error; closed: boolean; released: boolean } | undefined

  constructor(private readonly outcome: { started(): void; failed(error: Error): void }) {
    super()
  }

  // biome-ignore lint/suspicious/noExplicitAny: overrides Node's Writable signature, which is any
  override write(chunk: any, ...rest: any[]): boolean {
    if (!this.written) {
      this.written = true
      const bytes = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk)
      if (bytes.length >= 8 && SPECIAL_REQUESTS.has(bytes.readInt32BE(4))) this.phase = 'opaque'
    }
    if (this.ending?.closed) {
      // Inside postgres.js's flush: it clears its buffer after this returns, whatever the close did.
      this.release()
      return false
    }
    return super.write(chunk, ...rest)
  }

  // biome-ignore lint/suspicious/noExplicitAny: overrides Node's EventEmitter signature, which is any
  override emit(event: string | symbol, ...args: any[]): boolean {
    if (this.phase === 'opaque') return super.emit(event, ...args)
    if (event === 'data') return this.pass(args[0] as Buffer)
    if (event === 'end') this.remoteEnded = true
    if (event === 'error') {
      this.ending ??= { closed: false, released: false }
      this.ending.error ??= args[0] as Error
      return true
    }
    if (event === 'close') {
      this.ending ??= { closed: false, released: false }
      this.ending.closed = true
      setImmediate(() => setImmediate(() => this.release()))
      return true
    }
    return super.emit(event, ...args)
  }

  private release() {
    const ending = this.ending!
    if (ending.released) return
    ending.released = true
    let error = ending.error
    if (this.phase === 'startup') {
      // Ended without a word (porsager/postgres#1193) or at the connect timeout: an error, so the query hears it.
      error ??= this.remoteEnded
        ? Object.assign(new Error('the database closed the connection while it was starting'), { code: 'CONNECTION_CLOSED' })
        : Object.assign(new Error('the database did not complete the connection within the connect timeout'), { code: 'CONNECT_TIMEOUT' })
      this.outcome.failed(error)
    }
    if (error) super.emit('error', error)
    super.emit('close', error !== undefined)
  }

  /** Passes the server's bytes on, up to an ErrorResponse that ends the connection, which ends the socket instead. */
  private pass(chunk: Buffer): boolean {
    if (this.ending) return true
    const data = this.carry.length ? Buffer.concat([this.carry, chunk]) : chunk
    this.carry = Buffer.alloc(0)
    let at = Math.min(this.remaining, data.length)
    this.remaining -= at
    while (at < data.length) {
      if (data.length - at < 5) {
        this.carry = data.subarray(at)
        break
      }
      const type = data[at]
      const end = at + 1 + data.readInt32BE(at + 1)
      if (type === 0x45 /* E */) {
        if (end > data.length) {
          this.carry = data.subarray(at)
          break
        }
        const error = serverError(data.subarray(at + 5, end))
        if (this.phase === 'startup' || error.severity === 'FATAL' || error.severity === 'PANIC') {
          if (at > 0) super.emit('data', data.subarray(0, at))
          this.destroy(error)
          return true
        }
      }
      if (type === 0x5a /* Z */ && this.phase === 'startup') {
        this.phase = 'open'
        this.outcome.started()
      }
      if (end > data.length) this.remaining = end - data.length
      at = Math.min(end, data.length)
    }
    const passed = data.length - this.carry.length
    return passed > 0 ? super.emit('data', passed === data.length ? data : data.subarray(0, passed)) : true
  }
}

/** The PostgresError postgres.js would have made of an ErrorResponse's fields. */
function serverError(fields: Buffer): Error & { severity?: string } {
  const parsed: Record<string, string> = {}
  let start = 0
  for (let i = 0; i < fields.length; i++) {
    if (fields[i] !== 0) continue
    if (i > start) {
      const name = ERROR_FIELDS[String.fromCharCode(fields[start]!)]
      if (name) parsed[name] = fields.toString('utf8', start + 1, i)
    }
    start = i + 1
  }
  parsed.severity ??= parsed.severity_local!
  return new postgres.PostgresError(parsed as never) as Error & { severity?: string }
}
