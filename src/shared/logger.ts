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

/** The line with every key-shaped value replaced by the prefix and `[redacted]`. */
const redactKeys = (line: string) => line.replace(KEY_SHAPED, `${API_KEY_PREFIX}[redacted]`)

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

/** How many characters of frequent lines wait before they are written: one write(2) for about 40 access lines. */
const FREQUENT_LINES_BUFFER_CHARS = 8_192

/**
 * Where lines built by hand (the access line, docs/adr/0121-request-ids-and-the-access-log.md) are
 * written: each line scrubbed of key-shaped values like every other, into the logger's own
 * destination, so they never interleave with its other lines. A stdout logger's get there in
 * chunks of 8 KiB and at each `flush`, kept in an array (sonic-boom's own minLength buffer
 * measures the whole buffer again at every line); a logger with a destination of its own (tests)
 * gets each line at once.
 */
export function frequentLines(logger: Logger): { write(line: string): void; flush(): void } {
  const destination = (logger as unknown as Record<symbol, pino.DestinationStream>)[pino.symbols.streamSym]!
  if (!toStdout.has(logger)) return { write: (line) => destination.write(redactKeys(line)), flush() {} }
  let waiting: string[] = []
  let waitingChars = 0
  const flush = () => {
    if (waiting.length === 0) return
    const chunk = waiting.join('')
    waiting = []
    waitingChars = 0
    destination.write(chunk)
  }
  return {
    write(line) {
      waiting.push(redactKeys(line))
      waitingChars += line.length
      if (waitingChars >= FREQUENT_LINES_BUFFER_CHARS) flush()
    },
    flush,
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
