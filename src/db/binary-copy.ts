import type { Readable, Writable } from 'node:stream'
import { is } from 'drizzle-orm'
import { PostgresJsSession } from 'drizzle-orm/postgres-js/session'
import type { Executor } from './client'

/** "PGCOPY\n\377\r\n\0", then 32-bit flags and the length of a header extension. */
const SIGNATURE = Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1')
/** PostgreSQL's date and timestamp epoch, 2000-01-01 UTC, in Unix milliseconds. */
const POSTGRES_EPOCH_MS = Date.UTC(2000, 0, 1)
const DAY_MS = 86_400_000

/**
 * One row of PostgreSQL's binary COPY format, read field by field in column order: the same
 * values the text protocol gives, without the server printing and the client parsing text (a
 * large read is about 2.5× faster this way, see `copyRows`). Each reader checks the field's
 * length, so a column whose type changed fails loudly instead of decoding garbage. Dates and
 * timestamps repeat a lot (one update time per sync), so each distinct one is formatted once.
 */
export class BinaryCopyRow {
  buffer: Buffer = Buffer.alloc(0)
  at = 0
  private readonly dates = new Map<number, string>()
  private readonly timestamps = new Map<number, string>()

  /** The next field's length in bytes, -1 for NULL; moves past the length word. */
  private field(): number {
    const length = this.buffer.readInt32BE(this.at)
    this.at += 4
    return length
  }

  private fixed(length: number, expected: number, type: string): boolean {
    if (length === -1) return false
    if (length !== expected) throw new Error(`binary COPY: a ${type} field of ${length} bytes`)
    return true
  }

  /** smallint or integer. */
  integer(): number | null {
    const length = this.field()
    if (length === -1) return null
    const value = length === 4 ? this.buffer.readInt32BE(this.at) : length === 2 ? this.buffer.readInt16BE(this.at) : Number.NaN
    if (Number.isNaN(value)) throw new Error(`binary COPY: an integer field of ${length} bytes`)
    this.at += length
    return value
  }

  /** double precision. */
  float8(): number | null {
    if (!this.fixed(this.field(), 8, 'float8')) return null
    const value = this.buffer.readDoubleBE(this.at)
    this.at += 8
    return value
  }

  /** text, as UTF-8. */
  text(): string | null {
    const length = this.field()
    if (length === -1) return null
    const value = this.buffer.toString('utf8', this.at, this.at + length)
    this.at += length
    return value
  }

  /** date, as `YYYY-MM-DD` (what `::text` gives under the ISO DateStyle). */
  date(): string | null {
    if (!this.fixed(this.field(), 4, 'date')) return null
    const days = this.buffer.readInt32BE(this.at)
    this.at += 4
    let text = this.dates.get(days)
    if (text === undefined) this.dates.set(days, (text = new Date(POSTGRES_EPOCH_MS + days * DAY_MS).toISOString().slice(0, 10)))
    return text
  }

  /** timestamptz, as `toISOString` writes it: UTC, milliseconds (microseconds dropped). */
  timestamp(): string | null {
    if (!this.fixed(this.field(), 8, 'timestamp')) return null
    const micros = this.buffer.readInt32BE(this.at) * 2 ** 32 + this.buffer.readUInt32BE(this.at + 4)
    this.at += 8
    let text = this.timestamps.get(micros)
    if (text === undefined) this.timestamps.set(micros, (text = new Date(POSTGRES_EPOCH_MS + Math.floor(micros / 1000)).toISOString()))
    return text
  }
}

/**
 * The end of the row starting at `at` if all of it is in `buffer`, else -1; -2 at the trailer.
 * Rows are walked first so a decoder never reads past a chunk's end.
 */
function rowEnd(buffer: Buffer, at: number, columns: number): number {
  if (at + 2 > buffer.length) return -1
  const fields = buffer.readInt16BE(at)
  if (fields === -1) return -2
  if (fields !== columns) throw new Error(`binary COPY: a row of ${fields} fields, expected ${columns}`)
  let end = at + 2
  for (let i = 0; i < columns; i++) {
    if (end + 4 > buffer.length) return -1
    const length = buffer.readInt32BE(end)
    end += 4 + Math.max(length, 0)
  }
  return end > buffer.length ? -1 : end
}

/**
 * Decodes a binary COPY stream pushed to it chunk by chunk: `decode` reads each row's `columns`
 * fields in order. A chunk may hold several rows or part of one (postgres.js hands over one
 * CopyData message per chunk, which the protocol makes one row, but nothing here relies on it).
 */
export class BinaryCopyDecoder {
  private readonly row = new BinaryCopyRow()
  private pending: Buffer | undefined
  private headerRead = false
  private ended = false

  /** `visit` reads each row's fields in order, and keeps what it needs of them. */
  constructor(
    private readonly columns: number,
    private readonly visit: (row: BinaryCopyRow) => void,
  ) {}

  push(chunk: Buffer): void {
    if (this.ended) throw new Error('binary COPY: data after the trailer')
    const buffer = this.pending ? Buffer.concat([this.pending, chunk]) : chunk
    this.pending = undefined
    let at = 0
    if (!this.headerRead) {
      if (buffer.length < SIGNATURE.length + 8) {
        this.pending = buffer
        return
      }
      if (!buffer.subarray(0, SIGNATURE.length).equals(SIGNATURE)) throw new Error('binary COPY: no PGCOPY signature')
      at = SIGNATURE.length + 8 + buffer.readInt32BE(SIGNATURE.length + 4)
      this.headerRead = true
    }
    const row = this.row
    row.buffer = buffer
    for (;;) {
      const end = rowEnd(buffer, at, this.columns)
      if (end === -1) {
        if (at < buffer.length) this.pending = buffer.subarray(at)
        return
      }
      if (end === -2) {
        this.ended = true
        if (at + 2 < buffer.length) throw new Error('binary COPY: data after the trailer')
        return
      }
      row.at = at + 2
      this.visit(row)
      if (row.at !== end) throw new Error(`binary COPY: a row's decoder read ${row.at - at - 2} of its ${end - at - 2} bytes`)
      at = end
    }
  }

  /** Checks that the stream has ended with its trailer. */
  finish(): void {
    if (!this.ended) throw new Error('binary COPY: the stream ended before the trailer')
  }
}

/** Whether the executor talks to PostgreSQL through postgres.js, which can COPY (PGlite cannot from here). */
export function canCopy(db: Executor): boolean {
  return is(db._.session, PostgresJsSession)
}

/** How many connections the executor's pool may open for COPY: 0 under PGlite, which has none. */
export function copyConnections(db: Executor): number {
  const session = db._.session
  return is(session, PostgresJsSession) ? session.client.options.max : 0
}

/**
 * The rows of `query` (plain SQL without parameters: COPY takes none) through a binary
 * `COPY ... TO STDOUT`, in the executor's session (so inside its transaction, if it is one).
 * postgres.js only: undefined under PGlite, whose callers read the same rows with a SELECT.
 */
export async function copyRows<T>(db: Executor, query: string, columns: number, decode: (row: BinaryCopyRow) => T): Promise<T[] | undefined> {
  const rows: T[] = []
  return (await copyEach(db, query, columns, (row) => void rows.push(decode(row)))) ? rows : undefined
}

/**
 * Like `copyRows`, but each row goes to `visit` as it is decoded and nothing is collected: a caller
 * that keeps rows in its own compact form never holds an object per row. False under PGlite.
 */
export async function copyEach(db: Executor, query: string, columns: number, visit: (row: BinaryCopyRow) => void): Promise<boolean> {
  const session = db._.session
  if (!is(session, PostgresJsSession)) return false
  const stream: Readable = await session.client.unsafe(`copy (${query}) to stdout with (format binary)`).readable()
  const decoder = new BinaryCopyDecoder(columns, visit)
  // 'data' events, not `for await`: a promise per row (one CopyData message each) would cost more
  // than decoding the row. After a decoding error the stream is still read to its end: postgres.js
  // pauses the connection's socket while a stream is not read, which would hang the transaction.
  let failure: unknown
  await new Promise<void>((resolve, reject) => {
    stream.on('data', (chunk: Buffer) => {
      if (failure !== undefined) return
      try {
        decoder.push(chunk)
      } catch (error) {
        failure = error
      }
    })
    stream.on('end', () => {
      // postgres.js (3.4.9) pauses its socket when a COPY stream's buffer fills, and resumes it only
      // from the stream's read(), which Node never calls once the stream has ended: a COPY whose
      // last rows arrive together with its end (any small table) left the connection paused for
      // good, and the transaction hung (porsager/postgres PR #1016, unmerged). One more read()
      // resumes it; on a flowing socket it does nothing.
      ;(stream as Readable & { _read(size: number): void })._read(0)
      resolve()
    })
    stream.on('error', reject)
  })
  if (failure !== undefined) throw failure
  decoder.finish()
  return true
}

/** Bytes a chunk grows to before it is handed to the connection: large enough that a write is rare. */
const COPY_CHUNK_BYTES = 1 << 20

/**
 * Writes rows in PostgreSQL's binary COPY format, field by field in column order: the inverse of
 * `BinaryCopyRow`. The server parses binary fields with no text conversion (a double is 8 bytes
 * copied, not a decimal string parsed), which is most of what a bulk load costs it. Full chunks
 * collect in `ready` until `copyIn` hands them to the connection.
 */
export class BinaryCopyWriter {
  private chunk = Buffer.allocUnsafe(COPY_CHUNK_BYTES)
  private at = 0
  /** Rows started so far. */
  rowCount = 0
  readonly ready: Buffer[] = []
  private readonly days = new Map<string, number>()

  constructor() {
    SIGNATURE.copy(this.chunk, 0)
    this.chunk.fill(0, SIGNATURE.length, SIGNATURE.length + 8)
    this.at = SIGNATURE.length + 8
  }

  private room(bytes: number): void {
    if (this.at + bytes <= this.chunk.length) return
    this.cut()
    if (bytes > this.chunk.length) this.chunk = Buffer.allocUnsafe(bytes)
  }

  /** Moves the bytes written so far to `ready`. */
  cut(): void {
    if (this.at === 0) return
    this.ready.push(this.chunk.subarray(0, this.at))
    this.chunk = Buffer.allocUnsafe(COPY_CHUNK_BYTES)
    this.at = 0
  }

  /** Starts a row of `fields` fields; each field must follow. */
  row(fields: number): this {
    this.rowCount++
    this.room(2)
    this.chunk.writeInt16BE(fields, this.at)
    this.at += 2
    return this
  }

  private nullField(): this {
    this.room(4)
    this.chunk.writeInt32BE(-1, this.at)
    this.at += 4
    return this
  }

  /** integer (int4). */
  integer(value: number | null | undefined): this {
    if (value == null) return this.nullField()
    if (!Number.isInteger(value) || value < -2_147_483_648 || value > 2_147_483_647) throw new Error(`binary COPY: ${value} is no int4`)
    this.room(8)
    this.chunk.writeInt32BE(4, this.at)
    this.chunk.writeInt32BE(value, this.at + 4)
    this.at += 8
    return this
  }

  /** double precision. */
  float8(value: number | null | undefined): this {
    if (value == null) return this.nullField()
    this.room(12)
    this.chunk.writeInt32BE(8, this.at)
    this.chunk.writeDoubleBE(value, this.at + 4)
    this.at += 12
    return this
  }

  /** text, as UTF-8. */
  text(value: string | null | undefined): this {
    if (value == null) return this.nullField()
    this.room(4 + value.length * 3)
    const length = this.chunk.write(value, this.at + 4, 'utf8')
    this.chunk.writeInt32BE(length, this.at)
    this.at += 4 + length
    return this
  }

  /** date, from `YYYY-MM-DD`. */
  date(value: string | null | undefined): this {
    if (value == null) return this.nullField()
    let days = this.days.get(value)
    if (days === undefined) {
      const ms = Date.parse(`${value}T00:00:00Z`)
      if (!/^\d{4}-\d{2}-\d{2}$/.test(value) || Number.isNaN(ms)) throw new Error(`binary COPY: '${value}' is no date`)
      this.days.set(value, (days = (ms - POSTGRES_EPOCH_MS) / DAY_MS))
    }
    this.room(8)
    this.chunk.writeInt32BE(4, this.at)
    this.chunk.writeInt32BE(days, this.at + 4)
    this.at += 8
    return this
  }

  /** timestamptz, to the millisecond. */
  timestamp(value: Date | null | undefined): this {
    if (value == null) return this.nullField()
    const micros = (value.getTime() - POSTGRES_EPOCH_MS) * 1000
    if (!Number.isFinite(micros)) throw new Error('binary COPY: an invalid Date')
    const high = Math.floor(micros / 2 ** 32)
    this.room(12)
    this.chunk.writeInt32BE(8, this.at)
    this.chunk.writeInt32BE(high, this.at + 4)
    this.chunk.writeUInt32BE(micros - high * 2 ** 32, this.at + 8)
    this.at += 12
    return this
  }

  /** Ends the stream with the trailer and moves everything to `ready`. */
  end(): void {
    this.room(2)
    this.chunk.writeInt16BE(-1, this.at)
    this.at += 2
    this.cut()
  }
}

/** The sink `copyIn` gives its caller: write rows to `rows`, and `await flush()` now and then. */
export interface CopyInSink {
  rows: BinaryCopyWriter
  /** Sends the full chunks to the server, waiting while the connection is backed up. */
  flush(): Promise<void>
}

/**
 * `COPY target FROM STDIN` in binary, in the executor's session (so inside its transaction, if it
 * is one): `fill` writes the rows, flushing as it goes so memory holds about one chunk, and the
 * server parses and stores rows while the next ones are made (the two sides overlap on two cores).
 * Resolves with the number of rows copied. postgres.js only: undefined under PGlite, whose callers
 * insert the same rows with statements.
 */
export async function copyIn(db: Executor, target: string, fill: (sink: CopyInSink) => Promise<void> | void): Promise<number | undefined> {
  const session = db._.session
  if (!is(session, PostgresJsSession)) return undefined
  const query = session.client.unsafe(`copy ${target} from stdin with (format binary)`)
  // postgres.js (3.4.9) reports an error that arrives after the last CopyData (the server checks
  // the final rows only after the client said it was done) to the query alone, which has already
  // resolved with the stream, and never completes the stream's end: the COPY would hang. Catching
  // the rejection on its way makes it fail instead.
  let failed: (error: unknown) => void = () => {}
  const failure = new Promise<never>((_, reject) => (failed = reject))
  failure.catch(() => {})
  const settle = query as unknown as { reject: (error: unknown) => void }
  const reject = settle.reject
  settle.reject = (error: unknown) => {
    failed(error)
    reject(error)
  }
  const stream = (await query.writable()) as unknown as Writable
  let streamError: unknown
  stream.on('error', (error) => {
    streamError ??= error
    failed(error)
  })
  const rows = new BinaryCopyWriter()
  // One flush's chunks are handed over whole and the next flush waits for them to drain: the
  // server stores one batch while the caller makes the next, and memory holds about two batches.
  let draining: Promise<unknown> | undefined
  const flush = async () => {
    if (streamError !== undefined) throw streamError
    if (draining) await Promise.race([draining, failure])
    draining = undefined
    rows.cut()
    let backedUp = false
    for (const chunk of rows.ready.splice(0)) backedUp = !stream.write(chunk)
    if (backedUp) draining = new Promise((resolve) => stream.once('drain', resolve))
  }
  try {
    await fill({ rows, flush })
    rows.end()
    await flush()
    if (draining) await Promise.race([draining, failure])
  } catch (error) {
    if (!stream.destroyed) stream.destroy(error instanceof Error ? error : new Error(String(error)))
    // The server answers the CopyFail with an error; wait for it so the connection is free again.
    await failure.catch(() => {})
    throw error
  }
  await Promise.race([new Promise<void>((resolve) => stream.end(resolve)), failure])
  return rows.rowCount
}
