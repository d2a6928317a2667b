/**
 * Generated hostile requests at every operation `/openapi.json` lists (path
 * parameters, query strings, JSON bodies, headers, methods, content types, request lines), over
 * real HTTP to the real service on PostgreSQL (PGlite without TEST_DATABASE_URL) and Redis (the
 * in-process quota store without TEST_REDIS_URL). For every answer:
 *   - the status is below 500;
 *   - a 4xx the app writes carries the spec's envelope `{ error: { message, code, details?, request_id } }`, in JSON,
 *     its request_id the answer's X-Request-Id
 *     whatever Accept asks for;
 *   - a request is not accepted with a number parameter spelt otherwise than in decimal (`0x10`, `+16`,
 *     `16.`, ` 16`, `1e1`: what Number() reads as a number);
 *   - no body shows a stack trace, an absolute file path or `node_modules`;
 *   - a refused request (4xx, or none at all) changed no stored row (usage counters aside, which
 *     docs/adr/0036-quota-accounting.md charges even for a 400 after a valid key).
 * With PostgreSQL the service runs as its own process, started as the README starts it.
 *
 * Replay: the seed is printed first ("[hostile] seed …"); failures print fast-check's seed and path.
 *   HOSTILE_SEED=<seed> bun test test/property                        the whole run again
 *   HOSTILE_SEED=<seed> HOSTILE_PATH=<path> bun test test/property -t '<METHOD /path>'   one counterexample
 *   HOSTILE_RUNS=<n>  runs per operation (default 60: about a minute in all, PostgreSQL or PGlite)
 * (with the same TEST_DATABASE_URL / TEST_REDIS_URL as the failing run).
 */
import { expect, test } from 'bun:test'
import fc from 'fast-check'
import { ROOT } from '../helpers/process'
import { FETCH_METHODS, type HostileRequest, KNOWN_METHODS, looseSpellings, type Operation, operationsOf, requestFor, requestLineFor, wireBytes } from './arbitraries'
import { type RawOutcome, rawExchange } from './raw-http'
import { createWorld, LIVE_SESSION } from './world'

const SEED = process.env.HOSTILE_SEED ? Number(process.env.HOSTILE_SEED) : Math.floor(Math.random() * 2 ** 31)
const PATH = process.env.HOSTILE_PATH || undefined
const RUNS = Number(process.env.HOSTILE_RUNS ?? 60)
/** A generous bound for one answer: the slowest legitimate one (a throttled login) takes about a second. */
const ANSWER_TIMEOUT_MS = 15_000
/**
 * HOSTILE_COLLECT=1 (exploration, not CI): properties never stop at a failure; every failing request
 * is kept and the distinct failures (operation, problem, status) are printed at the end.
 */
const COLLECT = Boolean(process.env.HOSTILE_COLLECT)
/** HOSTILE_EXAMPLES=0 leaves out the regressions tried first (which stop a property while they still fail). */
const EXAMPLES = process.env.HOSTILE_EXAMPLES !== '0'
/** HOSTILE_VERBOSE=1 prints every request and its status. */
const VERBOSE = Boolean(process.env.HOSTILE_VERBOSE)

console.log(`[hostile] seed ${SEED}, ${RUNS} runs per operation; replay with HOSTILE_SEED=${SEED}`)

const world = await createWorld()
const operations = operationsOf(world.openapi)
console.log(`[hostile] ${operations.length} operations from /openapi.json; service ${world.mode === 'process' ? 'as its own process' : 'in-process'} at ${world.base}`)
const catalogBefore = await world.digest({ catalogHistory: true })

// ---------------------------------------------------------------------------------------------
// Sending.

interface Answer {
  status: number
  headers: [string, string][]
  body: Uint8Array
  via: 'fetch' | 'raw'
}
type Outcome = { kind: 'answer'; answer: Answer } | { kind: 'no answer'; why: string }

/** Whether fetch would send this request byte for byte as generated (else the raw socket does). */
function fetchCanSend(request: HostileRequest): boolean {
  if (!FETCH_METHODS.has(request.method) || request.version !== 'HTTP/1.1' || request.omitHost) return false
  if (request.body && (request.method === 'GET' || request.method === 'HEAD')) return false
  if (!request.target.startsWith('/')) return false
  // The URL parser would resolve dot segments, drop a fragment or percent-encode characters.
  try {
    const url = new URL(request.target, world.base)
    if (url.pathname + url.search !== request.target) return false
  } catch {
    return false
  }
  const names = request.headers.map(([name]) => name)
  if (new Set(names).size !== names.length) return false // fetch would join duplicates with a comma
  return request.headers.every(([, value]) => /^[\x20-\x7e\x80-\xff]*$/.test(value) && value === value.trim())
}

/**
 * Bun's HTTP parser, not the app, answers requests that are not well-formed HTTP/1.1 (a bare
 * 400 or 505, or a closed connection): unknown methods, control bytes or spaces in the request
 * line or a header, an unsupported version, no Host.
 */
function malformedHttp(request: HostileRequest): boolean {
  const line = `${request.method} ${request.target} ${request.version}`
  return (
    !KNOWN_METHODS.has(request.method) ||
    (request.version !== 'HTTP/1.1' && request.version !== 'HTTP/1.0') ||
    request.omitHost ||
    request.target === '' ||
    // CONNECT takes only the authority form (host:port); Bun drops the connection otherwise.
    (request.method === 'CONNECT' && !/^[^/?#\s]+:\d+$/.test(request.target)) ||
    /[\x00-\x20\x7f]/.test(request.method + request.target) ||
    line.split(' ').length !== 3 ||
    request.headers.some(([name, value]) => /[\x00-\x08\x0a-\x1f\x7f]/.test(name + value) || /[\udc80-\udcff]/.test(value))
  )
}

function rawRequestBytes(request: HostileRequest): Buffer {
  const head: Buffer[] = [wireBytes(`${request.method} ${request.target} ${request.version}\r\n`)]
  if (!request.omitHost) head.push(Buffer.from(`host: 127.0.0.1:${world.port}\r\n`))
  for (const [name, value] of request.headers) head.push(wireBytes(`${name}: ${value}\r\n`))
  if (request.body) head.push(Buffer.from(`content-length: ${request.body.length}\r\n`))
  head.push(Buffer.from('connection: close\r\n\r\n'))
  return Buffer.concat([...head, ...(request.body ? [Buffer.from(request.body)] : [])])
}

async function send(generated: HostileRequest): Promise<Outcome> {
  const request = { ...generated, headers: generated.headers.map(([name, value]): [string, string] => [name, value.replaceAll(LIVE_SESSION, world.liveSession())]) }
  if (request.transport === 'fetch' && fetchCanSend(request)) {
    try {
      const response = await fetch(world.base + request.target, {
        method: request.method,
        headers: request.headers,
        body: request.body,
        redirect: 'manual',
        signal: AbortSignal.timeout(ANSWER_TIMEOUT_MS),
      })
      const body = new Uint8Array(await response.arrayBuffer())
      return { kind: 'answer', answer: { status: response.status, headers: [...response.headers], body, via: 'fetch' } }
    } catch (error) {
      return { kind: 'no answer', why: `fetch failed: ${error}` }
    }
  }
  const outcome: RawOutcome = await rawExchange(world.port, rawRequestBytes(request), { head: request.method === 'HEAD', timeoutMs: ANSWER_TIMEOUT_MS })
  if (outcome.kind === 'response') return { kind: 'answer', answer: { ...outcome.response, via: 'raw' } }
  return {
    kind: 'no answer',
    why: `${outcome.kind === 'timeout' ? `no answer within ${ANSWER_TIMEOUT_MS} ms` : 'connection closed'} (received ${JSON.stringify(Buffer.from(outcome.received).toString('latin1').slice(0, 300))})`,
  }
}

// ---------------------------------------------------------------------------------------------
// Judging.

const ERROR_CODES = new Set<string>(world.openapi.components.schemas.Error.properties.error.properties.code.enum as string[])
/** What must never reach a client: a stack frame, a file of this checkout, dependencies' paths. */
const LEAKS: [RegExp, string][] = [
  [/\bat .{0,200}?[(\s](?:file:\/\/)?\/[^\s)]+:\d+:\d+/, 'a stack frame'],
  [/node_modules/, 'node_modules'],
  [new RegExp(ROOT.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')), 'the checkout path'],
  [/\/(?:home|root|usr|work|tmp|app)\/[\w.-]+\/[\w.-]+\.(?:ts|js|mjs)\b/, 'an absolute source path'],
]

const header = (answer: Answer, name: string) => answer.headers.find(([n]) => n.toLowerCase() === name)?.[1]
const text = (bytes: Uint8Array) => Buffer.from(bytes).toString('utf8')
const excerpt = (value: string, max = 600) => (value.length > max ? `${value.slice(0, max)}… (${value.length} characters)` : value)

/** An answer Bun's HTTP parser wrote before the app saw the request: no Date, no Content-Type, no body. */
const fromParser = (answer: Answer) => header(answer, 'date') === undefined && header(answer, 'content-type') === undefined && answer.body.length === 0

/** Problems with one answer (empty when it is fine). */
function judge(request: HostileRequest, outcome: Outcome): string[] {
  const malformed = malformedHttp(request)
  if (outcome.kind === 'no answer') return malformed && !outcome.why.startsWith('no answer within') ? [] : [`no answer: ${outcome.why}`]
  const { answer } = outcome
  const problems: string[] = []
  const parserAnswer = fromParser(answer)
  // Bun answers 505 (HTTP Version Not Supported) to request lines it cannot parse: the app never sees them.
  if (answer.status >= 500 && !(parserAnswer && malformed && answer.status === 505)) problems.push(`status ${answer.status} (5xx)`)
  if (answer.status === 0) problems.push('no status line')
  const body = text(answer.body)
  const staticAsset = answer.status < 300 && /javascript|css|image|font/.test(header(answer, 'content-type') ?? '')
  if (!staticAsset) for (const [pattern, what] of LEAKS) if (pattern.test(body)) problems.push(`the body shows ${what}`)
  if (answer.status >= 400 && answer.status < 500 && !parserAnswer && request.method !== 'HEAD') {
    problems.push(...envelopeProblems(answer))
  }
  problems.push(...mediaTypeProblems(request, answer), ...bodyLimitProblems(request, answer), ...looseNumberProblems(request, answer))
  return problems
}

/** How a URL writes a number parameter: decimal digits, a fraction for a number (docs/adr/0001-query-integers.md). */
const DECIMAL = { integer: /^-?(?:0|[1-9][0-9]*)$/, number: /^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?$/ }

/** An accepted request had no number parameter that Number() reads as a number but that is not written in decimal. */
function looseNumberProblems(request: HostileRequest, answer: Answer): string[] {
  const op = operationOf(request)
  if (!op || answer.status >= 400 || request.method !== op.method || !reachesOperation(op, request.target)) return []
  const problems: string[] = []
  for (const [name, value] of parameterValues(op, request.target)) {
    const kind = op.params.find((param) => param.name === name)?.schema?.type as keyof typeof DECIMAL
    if (!(kind in DECIMAL) || value === '' || Number.isNaN(Number(value)) || DECIMAL[kind].test(value)) continue
    problems.push(`${answer.status} for ${name}=${JSON.stringify(value)}, ${kind === 'integer' ? 'an integer' : 'a number'} not written in decimal`)
  }
  return problems
}

/** Percent-decoded, or as written when that fails (as Elysia does). */
function decoded(text: string): string {
  try {
    return decodeURIComponent(text)
  } catch {
    return text
  }
}

/**
 * Whether the target still names the operation's path once its dot segments are resolved, as the
 * server resolves them: `/v1/games/x/sets/..?page=0x1` is the game route, which has no `page`.
 */
function reachesOperation(op: Operation, target: string): boolean {
  const path = target.replace(/^[a-z]+:\/\/[^/]*/i, '').split(/[?#]/)[0]!
  let resolved: string
  try {
    resolved = new URL(path, 'http://host').pathname
  } catch {
    return false
  }
  return templateOf(op).test(resolved)
}

/** The operation's path as a pattern capturing each path parameter. */
const templateOf = (op: Operation) => new RegExp(`^${op.path.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^}]+\}/g, '([^/]*)')}$`)

/**
 * The path and query parameters the service reads from a target for `op`, decoded: none from a path
 * that does not fit its template; in the query, `+` is a space and the last of a repeated name wins.
 */
function parameterValues(op: Operation, target: string): Map<string, string> {
  const [path = '', query = ''] = target
    .replace(/^[a-z]+:\/\/[^/]*/i, '')
    .split('#')[0]!
    .split(/\?(.*)/s)
  const names = [...op.path.matchAll(/\{([^}]+)\}/g)].map((match) => match[1]!)
  const values = new Map((templateOf(op).exec(path)?.slice(1) ?? []).map((value, i) => [names[i]!, decoded(value)]))
  for (const pair of query.split('&')) {
    const equals = pair.indexOf('=')
    if (equals > 0) values.set(decoded(pair.slice(0, equals).replaceAll('+', ' ')), decoded(pair.slice(equals + 1).replaceAll('+', ' ')))
  }
  return values
}

/**
 * One media-type rule on every operation that takes a body: `application/json` or any
 * `…+json`, case-insensitive, parameters allowed; anything else (or none) is 415. So a JSON type is
 * never refused as 415, and a non-JSON one is never accepted.
 */
function mediaTypeProblems(request: HostileRequest, answer: Answer): string[] {
  const op = operationOf(request)
  if (!op?.body || request.method !== op.method || request.body === undefined) return []
  const types = request.headers.filter(([name]) => name === 'content-type').map(([, value]) => value)
  const json = types.length === 1 && JSON_MEDIA_TYPE.test(types[0]!)
  if (json && answer.status === 415) return [`415 for the JSON media type ${JSON.stringify(types[0])}`]
  if (!json && answer.status < 300) return [`${answer.status} for a body sent as ${types.length ? JSON.stringify(types.join(', ')) : 'no Content-Type'}`]
  return []
}
const JSON_MEDIA_TYPE = /^\s*application\/(?:[\w.!#$&^-]+\+)?json\s*(?:;.*)?$/i

/** A body over the limit (1 MiB by default) is refused (413), never served. */
function bodyLimitProblems(request: HostileRequest, answer: Answer): string[] {
  if ((request.body?.length ?? 0) <= BODY_LIMIT || answer.status >= 400) return []
  return [`${answer.status} for a ${request.body!.length}-byte body (the limit is ${BODY_LIMIT})`]
}
const BODY_LIMIT = 1_048_576

const operationOf = (request: HostileRequest) => operations.find((op) => `${op.method} ${op.path}` === request.operation)

/** The error envelope, in JSON: a client that asked for msgpack gets its refusals in JSON too. */
function envelopeProblems(answer: Answer): string[] {
  const type = header(answer, 'content-type') ?? ''
  let body: any
  if (/^application\/json\b/i.test(type)) {
    try {
      body = JSON.parse(text(answer.body))
    } catch {
      return ['an error body labelled JSON that does not parse']
    }
  } else return [`a ${answer.status} whose body is not the JSON envelope (Content-Type ${JSON.stringify(type)})`]
  const problems: string[] = []
  const error = body?.error
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return ['the error body is not an object']
  const extraTop = Object.keys(body).filter((k) => k !== 'error' && k !== 'rate_limit')
  if (extraTop.length) problems.push(`unexpected top-level fields ${extraTop.join(', ')}`)
  if (typeof error !== 'object' || error === null) return [...problems, 'no `error` object']
  if (typeof error.message !== 'string' || error.message === '') problems.push('`error.message` is not a non-empty string')
  if (typeof error.code !== 'string' || !ERROR_CODES.has(error.code)) problems.push(`\`error.code\` ${JSON.stringify(error.code)} is not one of the spec's codes`)
  const extraError = Object.keys(error).filter((k) => !['message', 'code', 'details', 'request_id'].includes(k))
  if (typeof error.request_id !== 'string' || error.request_id !== answer.headers.find(([name]) => name.toLowerCase() === 'x-request-id')?.[1])
    problems.push("`error.request_id` is not the answer's X-Request-Id")
  if (extraError.length) problems.push(`unexpected error fields ${extraError.join(', ')}`)
  if (error.details !== undefined) {
    const ok = Array.isArray(error.details) && error.details.every((d: any) => typeof d?.field === 'string' && typeof d?.message === 'string' && Object.keys(d).length === 2)
    if (!ok) problems.push('`error.details` is not a list of { field, message }')
  }
  return problems
}

function describeRequest(request: HostileRequest): string {
  const transport = request.transport === 'fetch' && fetchCanSend(request) ? 'fetch' : 'raw socket'
  const body = request.body === undefined ? '(none)' : `${request.body.length} bytes: ${JSON.stringify(excerpt(text(request.body), 300))}`
  return [
    `${request.method} ${JSON.stringify(excerpt(request.target, 400))} ${request.version} via ${transport}${request.omitHost ? ', no Host' : ''}`,
    ...request.headers.map(([name, value]) => `  ${name}: ${JSON.stringify(excerpt(value, 200))}`),
    `  body ${body}`,
  ].join('\n')
}

function describeOutcome(outcome: Outcome): string {
  if (outcome.kind === 'no answer') return outcome.why
  const { answer } = outcome
  return [`${answer.status} via ${answer.via}`, ...answer.headers.map(([name, value]) => `  ${name}: ${value}`), `  body: ${JSON.stringify(excerpt(text(answer.body), 800))}`].join(
    '\n',
  )
}

/** Which tables changed, by name. */
function changedTables(before: Record<string, string>, after: Record<string, string>): string[] {
  return [...new Set([...Object.keys(before), ...Object.keys(after)])].filter((t) => before[t] !== after[t])
}

// Rows as they were before the previous request: refreshed after every request, so a 2xx that
// legitimately writes (a signup, a new key) is never blamed on the next refused request.
let rows = await world.digest()

/** Sends one request and throws, describing request and answer, if anything is wrong. */
async function check(request: HostileRequest) {
  const logged = world.logCount()
  const outcome = await send(request)
  const problems = judge(request, outcome)
  const after = await world.digest()
  const refused = outcome.kind === 'no answer' || outcome.answer.status >= 400
  const changed = changedTables(rows, after)
  if (refused && changed.length > 0) problems.push(`a refused request changed stored rows in ${changed.join(', ')}`)
  rows = after
  if (outcome.kind === 'answer' && outcome.answer.status < 300 && request.method === 'POST' && request.target.includes('/v1/auth/logout')) {
    // The session was ended as asked: start another so later cookie routes still get past the guard.
    await world.renewSession()
    rows = await world.digest()
  }
  if (VERBOSE)
    console.log(
      `[hostile] ${request.operation} | ${request.method} ${excerpt(request.target, 120)} -> ${outcome.kind === 'answer' ? `${outcome.answer.status} ${excerpt(text(outcome.answer.body), 100)}` : outcome.why}`,
    )
  if (problems.length > 0) {
    // What the service logged while answering (warnings and errors), often the cause.
    const logs = world
      .logsSince(logged)
      .filter((l) => !/"level":(10|20|30)\b/.test(l))
      .slice(-5)
    if (COLLECT) {
      collected.push({ request, outcome, problems, logs })
      return
    }
    throw new Error(
      [
        `${problems.join('; ')}`,
        `request:\n${describeRequest(request)}`,
        `answer:\n${describeOutcome(outcome)}`,
        ...(logs.length ? [`service log:\n${logs.map((l) => excerpt(l, 1500)).join('\n')}`] : []),
      ].join('\n'),
    )
  }
}

// fast-check prints the counterexample with this; the request object itself can be megabytes.
function printable(request: HostileRequest): HostileRequest {
  return Object.assign(request, { [fc.toStringMethod]: () => describeRequest(request) })
}

/** Requests that once gave a 5xx or a wrong answer, tried first on every run so they stay fixed. */
function regressions(label: string): HostileRequest[] {
  const keyed = (target: string): HostileRequest => plain('GET', target, [['x-api-key', world.keys.pro]])
  const plain = (method: string, target: string, headers: [string, string][] = [], body?: string): HostileRequest => ({
    operation: label,
    method,
    target,
    headers,
    body: body === undefined ? undefined : new Uint8Array(Buffer.from(body)),
    transport: 'fetch',
    version: 'HTTP/1.1',
    omitHost: false,
  })
  const deep = (field: string, inner = '"x"') => `{"${field}":${'['.repeat(10_000)}${inner}${']'.repeat(10_000)}}`
  const jsonPost = (target: string, body: string, auth: [string, string][]) => plain('POST', target, [['content-type', 'application/json'], ...auth], body)
  const byOperation: Record<string, HostileRequest[]> = {
    'GET /v1/sets': [keyed('/v1/sets?game=%00')],
    'GET /v1/cards/{id}/history': [keyed('/v1/cards/1/history?printing=%00')],
    'GET /v1/cards/{id}/history/detailed': [keyed('/v1/cards/1/history/detailed?printing=a%00b')],
    'GET /v1/search': [
      ...['game', 'rarity', 'printing'].map((name) => keyed(`/v1/search?q=dragon&${name}=%00`)),
      keyed('/v1/search?q=dragon&min_price=0x10'),
      keyed(`/v1/search?q=dragon&set_id=%20${world.samples.setIds[0]}`),
    ],
    'GET /v1/games/{slug}': [plain('GET', '/v1/games/%00')],
    'GET /v1/games/{slug}/sets': [plain('GET', '/v1/games/1%00/sets')],
    // An object whose own `toString` is not a function, where a string is due (found by this test).
    'POST /v1/auth/signup': [jsonPost('/v1/auth/signup', deep('email'), []), jsonPost('/v1/auth/signup', '{"email":{"toString":1},"password":"aaaaaaaaaaaa"}', [])],
    'POST /v1/auth/login': [
      jsonPost('/v1/auth/login', deep('email'), []),
      jsonPost('/v1/auth/login', '{"email":"a@b.co","password":{"toString":1}}', []),
      plain('POST', '/v1/auth/login', [['content-type', 'application/jsonx']], '{}'),
    ],
    'POST /v1/keys': [
      jsonPost('/v1/keys', deep('name'), [['cookie', world.cookie]]),
      jsonPost('/v1/keys', '{"name":{"toString":1}}', [['cookie', world.cookie]]),
      plain(
        'POST',
        '/v1/keys',
        [
          ['content-type', 'APPLICATION/JSON'],
          ['cookie', world.cookie],
        ],
        '{"name":"upper"}',
      ),
    ],
    'POST /v1/bulk/resolve/name': [
      jsonPost('/v1/bulk/resolve/name', deep('names'), [['x-api-key', world.keys.business]]),
      jsonPost('/v1/bulk/resolve/name', '{"names":["x"],"game":{"toString":1}}', [['x-api-key', world.keys.business]]),
      plain(
        'POST',
        '/v1/bulk/resolve/name',
        [
          ['content-type', 'application/jsonx'],
          ['x-api-key', world.keys.business],
        ],
        '{"names":["x"]}',
      ),
    ],
    // Other spellings of an id or a page (found by an outside attack): each was answered as the number Number() reads.
    'GET /v1/cards/{id}': looseSpellings(world.samples.cardIds[0]!, 'integer').map((id) => keyed(`/v1/cards/${id}`)),
    'GET /v1/games': ['per_page=0x10', 'page=1e3', 'page=%2B2', 'per_page=16.'].map((query) => plain('GET', `/v1/games?${query}`)),
    // Key ids were integers before they were opaque strings: an old one is a 400, never a revocation.
    'DELETE /v1/keys/{keyId}': ['1', '0x1', world.ownKeyIds[0]!.toUpperCase()].map((id) => plain('DELETE', `/v1/keys/${id}`, [['cookie', world.cookie]])),
    // Refusals answered in msgpack to a client that asked for it.
    'GET /v1/bulk/cards': [
      plain('GET', '/v1/bulk/cards?ids=abc', [
        ['x-api-key', world.keys.business],
        ['accept', 'application/msgpack'],
      ]),
    ],
    'GET /v1/bulk/history': [
      plain('GET', '/v1/bulk/history?ids=1&range=zz', [
        ['x-api-key', world.keys.business],
        ['accept', 'application/msgpack'],
      ]),
    ],
    'GET /v1/bulk/prices': [
      plain('GET', '/v1/bulk/prices?ids=abc', [
        ['x-api-key', world.keys.business],
        ['accept', 'application/x-msgpack'],
      ]),
    ],
    'request line': [
      { ...plain('CONNECT', `127.0.0.1:${world.port}`), transport: 'raw' },
      ...['constructor', '__proto__', 'toString', 'hasOwnProperty', 'foo'].map((file) => plain('GET', `/docs/assets/${file}`)),
    ],
  }
  return (byOperation[label] ?? []).map(printable)
}

const parameters = (runs: number, label: string): fc.Parameters<[HostileRequest]> => ({
  seed: SEED,
  examples: PATH || !EXAMPLES ? [] : regressions(label).map((request): [HostileRequest] => [request]),
  path: PATH,
  numRuns: runs,
  // Shrinking re-sends requests: bound the whole property so a failing CI run still ends.
  interruptAfterTimeLimit: 120_000,
  // The default per-test timeout of bun is far shorter than a property.
})

/** A value each parameter accepts, by name: real rows where the parameter names one. */
function validValue(op: Operation, name: string): number | string {
  if (name === 'keyId') return world.ownKeyIds[0]!
  if (name === 'marketplaceId') return world.samples.marketplaceIds[0]!
  if (name === 'id') return op.path.startsWith('/v1/cards') ? world.samples.cardIds[0]! : world.samples.setIds[0]!
  if (name === 'set_id') return world.samples.setIds[0]!
  return 16
}

// Before the fix, `DELETE /v1/keys/0x34` revoked key 52: this runs before the generated requests, which may revoke keys as asked.
test('every integer and number parameter is plain decimal: each other spelling of a valid value is a 400 naming it', async () => {
  const session = `session=${world.liveSession()}`
  const wrong: string[] = []
  for (const op of operations) {
    const credentials: Record<string, string> = op.auth === 'key' ? { 'x-api-key': world.keys.business } : op.auth === 'session' ? { cookie: session } : {}
    const required = op.params.filter((param) => param.in === 'query' && param.required).map((param) => `${param.name}=${param.name === 'q' ? 'dragon' : '1'}`)
    for (const param of op.params) {
      const kind = param.schema?.type
      if (kind !== 'integer' && kind !== 'number') continue
      for (const spelling of looseSpellings(validValue(op, param.name) as number, kind)) {
        const path = op.path.replace(/\{([^}]+)\}/g, (_, name: string) => (name === param.name ? spelling : String(validValue(op, name))))
        const query = [...required, ...(param.in === 'query' ? [`${param.name}=${spelling}`] : [])]
        const target = query.length ? `${path}?${query.join('&')}` : path
        const response = await fetch(world.base + target, { method: op.method, headers: credentials })
        const error = ((await response.json().catch(() => ({}))) as any).error
        const named = error?.code === 'INVALID_PARAMETER' && error.details?.some((detail: { field: string }) => detail.field === param.name)
        if (response.status !== 400 || !named) wrong.push(`${op.method} ${target}: ${response.status} ${JSON.stringify(error)}`)
      }
    }
  }
  expect(wrong).toEqual([])
  const keys = (await (await fetch(`${world.base}/v1/keys`, { headers: { cookie: session } })).json()) as { data: { id: string; is_active: number }[] }
  expect(keys.data.filter((key) => world.ownKeyIds.includes(key.id)).map((key) => key.is_active)).toEqual([1, 1])
}, 120_000)

for (const op of operations) {
  test(`${op.method} ${op.path}`, async () => {
    await fc.assert(
      fc.asyncProperty(requestFor(op, world).map(printable), (request) => check(request)),
      parameters(RUNS, `${op.method} ${op.path}`),
    )
  }, 300_000)
}

test('request lines: authority form (CONNECT host:port), *, absolute form, odd versions, no Host', async () => {
  const paths = [...new Set(operations.map((op) => op.path.replace(/\{[^}]+\}/g, '1')))]
  await fc.assert(
    fc.asyncProperty(requestLineFor(world, paths).map(printable), (request) => check(request)),
    parameters(RUNS * 2, 'request line'),
  )
}, 300_000)

const collected: { request: HostileRequest; outcome: Outcome; problems: string[]; logs: string[] }[] = []

if (COLLECT) {
  test('exploration: distinct failures', () => {
    const groups = new Map<string, typeof collected>()
    for (const entry of collected) {
      const status = entry.outcome.kind === 'answer' ? entry.outcome.answer.status : 'none'
      const signature = `${entry.request.operation} | ${status} | ${entry.problems.map((p) => p.replace(/\d{3,}/g, 'N')).join('; ')}`
      groups.set(signature, [...(groups.get(signature) ?? []), entry])
    }
    for (const [signature, entries] of groups) {
      // The shortest request of each kind is the easiest to read.
      const smallest = entries.sort((a, b) => describeRequest(a.request).length - describeRequest(b.request).length)[0]!
      console.log(
        `\n=== ${entries.length}× ${signature}\n${describeRequest(smallest.request)}\n--> ${excerpt(describeOutcome(smallest.outcome), 1200)}${smallest.logs.map((l) => `\n  log: ${excerpt(l, 400)}`).join('')}`,
      )
    }
    console.log(`[hostile] ${collected.length} failing requests in ${groups.size} kinds`)
  })
}

test('no refused request changed the catalog (price history included)', async () => {
  // Nothing but ingest writes the catalog: any change here came from a hostile request. Condition
  // prices are the exception: an accepted request refreshes them live from the marketplace.
  const written = ['accounts', 'sessions', 'api_keys', 'condition_prices', 'condition_refreshes']
  expect(changedTables(catalogBefore, await world.digest({ catalogHistory: true })).filter((t) => !written.includes(t))).toEqual([])
}, 30_000)
