import pino, { type Logger } from 'pino'
import { API_KEY_PREFIX } from './api-key-prefix'
import { currentRequestId } from './request-id'

export type { Logger }
export type LogLevel = 'debug' | 'info' | 'warn' | 'error' | 'silent'

/** A character as it may appear in a URL: itself (any case) or percent-encoded. */
const inUrl = (character: string) => `(?:${character.replace(/[^0-9A-Za-z]/g, '\\$&')}|%${character.charCodeAt(0).toString(16).padStart(2, '0')})`

/**
 * An API key wherever it appears in a log line (a URL's query or path, an error's message): the
 * prefix in any case, each character possibly percent-encoded, then every key character that
 * follows, so a truncated or mangled key goes too. The prefix and 4 characters are what the key
 * list shows (docs/adr/0006-api-keys.md) and stay readable; 5 or more are redacted.
 */
const KEY_SHAPED = new RegExp(`${[...API_KEY_PREFIX].map(inUrl).join('')}(?:[0-9A-Za-z]|%[0-9A-Fa-f]{2}){5,}`, 'gi')

const REDACTED = `${API_KEY_PREFIX}[redacted]`

/** The line with every key-shaped value replaced by the prefix and `[redacted]`. */
const redactKeys = (line: string) => line.replace(KEY_SHAPED, REDACTED)

/**
 * JSON logs to stdout. Credentials are redacted at the logger, so a careless `log.info({ headers })`
 * can never write a key, cookie or password, and errors are logged without the values bound to
 * their queries (see serializeError). A key a client put in its URL is redacted from the written
 * line, whichever field carries it.
 */
export function createLogger(level: LogLevel, destination?: pino.DestinationStream): Logger {
  const options: pino.LoggerOptions = {
    level,
    base: undefined,
    redact: {
      paths: [
        'password',
        '*.password',
        'key',
        '*.key',
        'token',
        '*.token',
        'secret',
        '*.secret',
        'headers["x-api-key"]',
        'headers.cookie',
        '*.headers["x-api-key"]',
        '*.headers.cookie',
      ],
      censor: '[redacted]',
    },
    serializers: { err: serializeError },
    hooks: { streamWrite: redactKeys, logMethod: withRequestId },
  }
  if (destination) return pino(options, destination)
  const logger = pino(options)
  toStdout.add(logger)
  return logger
}

/** Loggers createLogger made for stdout (the service's own), whose frequent lines may be buffered. */
const toStdout = new WeakSet<Logger>()

/** How many bytes of frequent lines wait before they are written: one write(2) for about 40 access lines. */
const FREQUENT_LINES_FLUSH_BYTES = 8_192

/** A string JSON writes as it is between its quotes: printable ASCII but `"` and `\`. */
const PLAIN = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/

/**
 * Where lines built by hand (the access line) are written: field by field as bytes into one
 * reused buffer, no string made for the line (docs/adr/0128-the-access-line-written-as-bytes.md),
 * each string scrubbed of key-shaped values like every other line, then into the logger's own
 * destination, so they never interleave with its other lines. A stdout logger's lines wait until
 * 8 KiB of them (about 40 access lines) or `flush`; a logger with a destination of its own (tests)
 * gets each line as it ends.
 */
export class FrequentLines {
  #bytes = Buffer.allocUnsafe(2 * FREQUENT_LINES_FLUSH_BYTES)
  #length = 0
  readonly #destination: pino.DestinationStream
  readonly #buffered: boolean

  constructor(logger: Logger) {
    this.#destination = (logger as unknown as Record<symbol, pino.DestinationStream>)[pino.symbols.streamSym]!
    this.#buffered = toStdout.has(logger)
  }

  /** ASCII that needs no escape and holds no key: a field's name, punctuation. */
  ascii(text: string) {
    this.#room(text.length)
    const bytes = this.#bytes
    let at = this.#length
    for (let i = 0; i < text.length; i++) bytes[at++] = text.charCodeAt(i)
    this.#length = at
  }

  /** A finite number as JSON writes it: a whole one digit by digit, any other through String. */
  number(value: number) {
    if (!Number.isSafeInteger(value) || value < 0) return this.ascii(String(value))
    let digits = 1
    for (let power = 10; power <= value; power *= 10) digits++
    this.#room(digits)
    const bytes = this.#bytes
    let at = this.#length + digits
    this.#length = at
    do {
      const rest = Math.floor(value / 10)
      bytes[--at] = 48 + (value - rest * 10)
      value = rest
    } while (value > 0)
  }

  /** A string as JSON writes it, key-shaped values redacted: plain ASCII copied, anything else through JSON.stringify. */
  string(value: string) {
    const text = redactKeys(value)
    if (!PLAIN.test(text)) {
      const json = JSON.stringify(text)
      this.#room(3 * json.length)
      this.#length += this.#bytes.write(json, this.#length, 'utf8')
      return
    }
    this.#room(text.length + 2)
    const bytes = this.#bytes
    let at = this.#length
    bytes[at++] = 34
    for (let i = 0; i < text.length; i++) bytes[at++] = text.charCodeAt(i)
    bytes[at++] = 34
    this.#length = at
  }

  /** Ends the line: its newline, then written at once to a destination of its own, or once 8 KiB wait. */
  endLine() {
    this.ascii('\n')
    if (!this.#buffered || this.#length >= FREQUENT_LINES_FLUSH_BYTES) this.flush()
  }

  /** Writes the lines that wait. */
  flush() {
    if (this.#length === 0) return
    const chunk = this.#bytes.toString('utf8', 0, this.#length)
    this.#length = 0
    this.#destination.write(chunk)
  }

  /** Room for `bytes` more: a line is never split, so a long one grows the buffer rather than being written in part. */
  #room(bytes: number) {
    if (this.#length + bytes <= this.#bytes.length) return
    const larger = Buffer.allocUnsafe(2 * (this.#length + bytes))
    this.#bytes.copy(larger, 0, 0, this.#length)
    this.#bytes = larger
  }
}

/**
 * pino's logMethod hook: a line written while a request is handled carries its `request_id`
 * (docs/adr/0121-request-ids-and-the-access-log.md). A hook rather than a mixin, which pino calls and
 * merges into every line, request or not.
 */
function withRequestId(this: Logger, args: Parameters<pino.LogFn>, method: pino.LogFn) {
  const requestId = currentRequestId()
  if (requestId === undefined) return method.apply(this, args)
  const [first, ...rest] = args as unknown[]
  if (first instanceof Error) return method.apply(this, [{ err: first, request_id: requestId }, ...rest] as Parameters<pino.LogFn>)
  if (typeof first === 'object' && first !== null) return method.apply(this, [{ ...first, request_id: requestId }, ...rest] as Parameters<pino.LogFn>)
  return method.apply(this, [{ request_id: requestId }, ...args] as Parameters<pino.LogFn>)
}

/**
 * Fields of driver errors that carry the values a query was run with: drizzle's `params`,
 * postgres.js's `parameters` and `args` (enumerable in its debug mode), and PostgreSQL's `detail`
 * ("Key (email)=(…) already exists"). An email, a password hash or the digest of a key or session
 * token bound to a failed query must not reach the log.
 */
const VALUE_FIELDS = new Set(['params', 'parameters', 'args', 'detail'])

/** drizzle's DrizzleQueryError message: "Failed query: <sql>\nparams: <values>". The SQL keeps placeholders. */
const DRIZZLE_PARAMS = /\nparams: [\s\S]*$/

/**
 * pino's error serializer, then without query values, at every level: each `cause` is serialized
 * the same way (pino's own folds causes into the message and stack, values included).
 */
export function serializeError(error: unknown, depth = 0): unknown {
  if (!(error instanceof Error) || depth > 8) return error
  const serialized = pino.stdSerializers.err(error) as unknown as Record<string, unknown>
  const message = error.message.replace(DRIZZLE_PARAMS, '')
  const out: Record<string, unknown> = { type: serialized.type, message }
  const stack = typeof error.stack === 'string' ? error.stack.replace(error.message, () => message) : undefined
  if (stack !== undefined) out.stack = stack
  for (const name of Object.keys(serialized)) {
    if (name in out || name === 'raw' || name === 'cause' || name === 'aggregateErrors' || VALUE_FIELDS.has(name)) continue
    const value = (error as unknown as Record<string, unknown>)[name]
    out[name] = value instanceof Error ? serializeError(value, depth + 1) : value
  }
  if (error.cause !== undefined) out.cause = serializeError(error.cause, depth + 1)
  if (error instanceof AggregateError) out.aggregateErrors = error.errors.map((inner) => serializeError(inner, depth + 1))
  return out
}
