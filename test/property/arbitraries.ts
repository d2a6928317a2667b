// biome-ignore-all lint/suspicious/noTemplateCurlyInString: '${7*7}' is a template-injection probe, meant to be sent literally.
import fc from 'fast-check'
import type { World } from './world'

/**
 * Generators of hostile HTTP requests, built per operation of `/openapi.json` from its parameter
 * and body schemas, mixed with generic hostile values. A request is data (method, target, headers,
 * body bytes, transport) so fast-check can shrink it and print it.
 *
 * Convention: in `target` and header values, the lone surrogates U+DC80…U+DCFF stand for the raw
 * bytes 0x80…0xFF (as Python's surrogateescape), so a target can carry invalid UTF-8 on the wire.
 * Such requests go over the raw socket.
 */
export interface HostileRequest {
  /** Which generator made it: the OpenAPI operation, or 'request line'. */
  operation: string
  method: string
  target: string
  headers: [string, string][]
  body: Uint8Array | undefined
  /** The preferred client: `fetch`, unless the request is one fetch cannot send as is. */
  transport: 'fetch' | 'raw'
  version: string
  /** Send no Host header (raw only). */
  omitHost: boolean
}

export interface Operation {
  method: string
  /** The OpenAPI path template, `{name}` for parameters. */
  path: string
  params: { name: string; in: 'path' | 'query'; required: boolean; schema: any }[]
  body: any | undefined
  auth: 'key' | 'session' | 'none'
}

/** Every operation `/openapi.json` lists. */
export function operationsOf(openapi: any): Operation[] {
  const operations: Operation[] = []
  for (const [path, methods] of Object.entries<any>(openapi.paths)) {
    for (const [method, op] of Object.entries<any>(methods)) {
      const security: string[] = (op.security ?? []).flatMap((s: object) => Object.keys(s))
      operations.push({
        method: method.toUpperCase(),
        path,
        params: (op.parameters ?? []).filter((p: any) => p.in === 'path' || p.in === 'query'),
        body: op.requestBody?.content?.['application/json']?.schema,
        auth: security.includes('ApiKey') ? 'key' : security.includes('Session') ? 'session' : 'none',
      })
    }
  }
  return operations
}

/** Raw bytes written as lone surrogates (see above): `rawBytes(0xff)` is the byte 0xFF on the wire. */
export const rawBytes = (...bytes: number[]) => bytes.map((b) => String.fromCharCode(0xdc00 + b)).join('')

/** Encodes a target or header value for the raw socket: UTF-8, except escaped raw bytes. */
export function wireBytes(text: string): Buffer {
  const parts: Buffer[] = []
  let plain = ''
  for (const ch of text) {
    const code = ch.codePointAt(0)!
    if (code >= 0xdc80 && code <= 0xdcff) {
      parts.push(Buffer.from(plain, 'utf8'), Buffer.from([code - 0xdc00]))
      plain = ''
    } else plain += ch
  }
  parts.push(Buffer.from(plain, 'utf8'))
  return Buffer.concat(parts)
}

// ---------------------------------------------------------------------------------------------
// Hostile values, as decoded text (how they go on the wire is chosen separately).

/** Strings that have broken or could break parsers, SQL, lookups by key and number coercion. */
const NASTY = [
  '\u0000',
  'a\u0000b',
  '1\u0000',
  '\u0000\u0000',
  '..',
  '.',
  '../..',
  '../../etc/passwd',
  '/',
  '//',
  '\\',
  '*',
  'constructor',
  '__proto__',
  'prototype',
  'toString',
  'hasOwnProperty',
  'valueOf',
  '__defineGetter__',
  '-1',
  '0',
  '-0',
  '1.5',
  '1e3',
  '1e1',
  '1e309',
  '-1e309',
  'NaN',
  'Infinity',
  '-Infinity',
  '0x10',
  '0X10',
  '0b1',
  '0b10000',
  '0o7',
  '0o20',
  '1_000',
  '16.',
  '.5',
  ' 1',
  '1 ',
  '+1',
  '00001',
  '2147483647',
  '2147483648',
  '-2147483649',
  '9007199254740993',
  '99999999999999999999999999',
  '',
  ' ',
  'null',
  'undefined',
  'true',
  'false',
  '[]',
  '{}',
  '[object Object]',
  "' OR '1'='1",
  "'; drop table accounts; --",
  '%',
  '%%',
  '%zz',
  '%0',
  '%00',
  '%C3%28',
  '%FF',
  '%E2%82',
  '%ED%A0%80',
  '%2F',
  '%2e%2e',
  '😀',
  'é',
  'e\u0301',
  '\u202e',
  '\ufeff',
  '\u2028',
  'ſ',
  'İ',
  '\uffff',
  '\u{10ffff}',
  '<script>alert(1)</script>',
  '${7*7}',
  '{{7*7}}',
  'a,b',
  ',',
  ',,,',
  '1,2,3',
  '1;2',
  'a=b',
  'a&b',
  '#',
  '?',
  '\t',
  ' \n',
]

/** Numbers as strings: the edges of int32, JS safe integers, floats and exponent forms. */
const numberish = fc.oneof(
  fc.integer().map(String),
  fc.bigInt({ min: -(2n ** 70n), max: 2n ** 70n }).map(String),
  fc.double({ noNaN: false }).map(String),
  fc.constantFrom('2147483647', '2147483648', '-2147483648', '4294967296', '9223372036854775807', '9223372036854775808', '1e2', '1.0', '01'),
)

/** Any hostile text: the list above, arbitrary code points (NUL and control characters included), very long strings. */
export const hostileText: fc.Arbitrary<string> = fc.oneof(
  { weight: 5, arbitrary: fc.constantFrom(...NASTY) },
  { weight: 2, arbitrary: numberish },
  { weight: 2, arbitrary: fc.string({ unit: 'binary', maxLength: 24 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary-ascii', maxLength: 24 }) },
  { weight: 1, arbitrary: fc.tuple(fc.constantFrom('a', '\u0000', 'é', '%', '9'), fc.constantFrom(256, 256, 2_000, 2_000, 9_000, 70_000)).map(([c, n]) => c.repeat(n)) },
)

/**
 * How a decoded value goes into a URL: percent-encoded as a client should; "minimal" (only what
 * would split the request line is encoded, so `%zz`, `..`, UTF-8 and NUL-free bytes arrive as
 * typed); verbatim (NUL and spaces too: Bun's parser refuses most); with invalid UTF-8 appended.
 */
type UrlForm = 'encoded' | 'minimal' | 'verbatim' | 'invalid-utf8'
const urlForm = fc.constantFrom<UrlForm>('encoded', 'encoded', 'encoded', 'minimal', 'minimal', 'invalid-utf8', 'verbatim')

function inUrl(value: string, form: UrlForm): string {
  if (form === 'verbatim') return value
  if (form === 'minimal') return value.replace(/[\x00-\x20\x7f#?&=]/g, (c) => `%${c.charCodeAt(0).toString(16).padStart(2, '0').toUpperCase()}`)
  if (form === 'invalid-utf8') return `${encode(value)}${rawBytes(0xff)}%C3%28${rawBytes(0xc3, 0x28)}`
  return encode(value)
}

function encode(value: string): string {
  try {
    return encodeURIComponent(value)
  } catch {
    return value // a lone surrogate: sent as is
  }
}

/**
 * Other spellings of a valid number that Number() reads as the same value (URL-encoded): hex,
 * binary, octal, a sign, a trailing point, spaces, a leading zero, exponents; for an integer, a
 * fraction of zeros too. A number in a URL is plain decimal (docs/adr/0001-query-integers.md).
 */
export function looseSpellings(value: number, kind: 'integer' | 'number'): string[] {
  const spellings = [
    `0x${value.toString(16)}`,
    `0X${value.toString(16).toUpperCase()}`,
    `0b${value.toString(2)}`,
    `0o${value.toString(8)}`,
    `%2B${value}`,
    `${value}.`,
    `%20${value}`,
    `${value}%20`,
    `%09${value}`,
    `0${value}`,
    `${value}e0`,
    `${value / 10}e1`,
  ]
  return kind === 'integer' ? [...spellings, `${value}.0`] : spellings
}

/** For an integer or number parameter: a valid value of it, spelt another way (looseSpellings). */
function looselySpelt(name: string, schema: any, world: World, path: string): fc.Arbitrary<string>[] {
  if (schema?.type !== 'integer' && schema?.type !== 'number') return []
  const loose = plausible(name, schema, world, path).chain((value) =>
    fc.constantFrom(...looseSpellings(typeof value === 'number' && Number.isSafeInteger(value) && value > 0 ? value : 16, schema.type)),
  )
  return [loose]
}

// ---------------------------------------------------------------------------------------------
// Values the schema asks for, so some requests get past validation and reach the database.

function enumValues(schema: any): string[] | undefined {
  if (Array.isArray(schema?.enum)) return schema.enum
  if (Array.isArray(schema?.anyOf) && schema.anyOf.every((s: any) => 'const' in s)) return schema.anyOf.map((s: any) => s.const)
  return undefined
}

/** A plausible, mostly valid value for a named parameter or field, from its schema and the seeded data. */
function plausible(name: string, schema: any, world: World, path = ''): fc.Arbitrary<unknown> {
  const s = world.samples
  const values = enumValues(schema)
  if (values) return fc.constantFrom(...values)
  if (name === 'keyId') return fc.constantFrom(...world.ownKeyIds, ...world.otherKeyIds)
  if (name === 'marketplaceId') return fc.constantFrom(...s.marketplaceIds)
  if (name === 'id' || name === 'set_id') return fc.constantFrom(...(path.includes('/cards') ? s.cardIds : s.setIds))
  if (name === 'slug' || name === 'game') return fc.constantFrom(...s.gameSlugs, ...s.gameIds.map(String))
  if (name === 'printing') return fc.constantFrom(...s.printings)
  if (name === 'rarity') return fc.constantFrom(...s.rarities)
  if (name === 'q') return fc.constantFrom(...s.cardNames, 'dragon', 'pika')
  if (name === 'ids' && schema?.type === 'string') {
    // A comma-separated id list: real ids, unknown ids, duplicates and empty elements.
    return fc.array(fc.oneof(fc.constantFrom(...s.cardIds), fc.integer({ min: 1, max: 2 ** 31 - 1 })), { minLength: 1, maxLength: 40 }).map((ids) => ids.join(','))
  }
  if (name === 'ids') return fc.array(fc.constantFrom(...s.marketplaceIds), { minLength: 1, maxLength: 40 })
  if (name === 'names') return fc.array(fc.oneof(fc.constantFrom(...s.cardNames), fc.string({ maxLength: 30 })), { minLength: 1, maxLength: 20 })
  if (name === 'email') return fc.oneof(fc.constant(world.email), fc.emailAddress(), fc.constant(world.email.toUpperCase()))
  if (name === 'password') return fc.oneof(fc.constant(world.password), fc.string({ minLength: 10, maxLength: 40 }))
  if (schema?.format === 'date-time') return fc.date({ min: new Date('2025-01-01'), max: new Date('2027-01-01'), noInvalidDate: true }).map((d) => d.toISOString())
  if (schema?.type === 'integer') return fc.integer({ min: schema.minimum ?? -(2 ** 31), max: Math.min(schema.maximum ?? 2 ** 31 - 1, 2 ** 31 - 1) })
  if (schema?.type === 'number') return fc.double({ min: schema.minimum ?? -1e9, max: schema.maximum ?? 1e9, noNaN: true })
  if (schema?.type === 'boolean') return fc.boolean()
  if (schema?.type === 'array') return fc.array(plausible('', schema.items, world, path), { maxLength: 5 })
  return fc.string({ minLength: schema?.minLength ?? 0, maxLength: Math.min(schema?.maxLength ?? 30, 30) })
}

// ---------------------------------------------------------------------------------------------
// Path and query.

/** One path parameter: plausible (to reach the handler) or hostile (NUL, `..`, `%2F`, huge, unicode …). */
function pathParameter(name: string, schema: any, world: World, path: string): fc.Arbitrary<string> {
  return fc.oneof(
    { weight: 1, arbitrary: plausible(name, schema, world, path).map((v) => encode(String(v))) },
    { weight: 1, arbitrary: fc.tuple(hostileText, urlForm).map(([v, form]) => inUrl(v, form)) },
    ...looselySpelt(name, schema, world, path).map((arbitrary) => ({ weight: 1, arbitrary })),
  )
}

type QueryPair = [name: string, value: string | undefined]

/** One query pair for a declared parameter: right type, wrong type, hostile, array syntax, bare name. */
function declaredQueryPair(param: Operation['params'][number], world: World, path: string): fc.Arbitrary<QueryPair[]> {
  const value = fc.oneof(
    { weight: 3, arbitrary: plausible(param.name, param.schema, world, path).map((v) => encode(String(v))) },
    { weight: 4, arbitrary: fc.tuple(hostileText, urlForm).map(([v, form]) => inUrl(v, form)) },
    ...looselySpelt(param.name, param.schema, world, path).map((arbitrary) => ({ weight: 2, arbitrary })),
  )
  return fc.oneof(
    { weight: 6, arbitrary: value.map((v): QueryPair[] => [[param.name, v]]) },
    // Repeated: `page=1&page=2`, which Elysia may turn into an array.
    { weight: 1, arbitrary: fc.array(value, { minLength: 2, maxLength: 4 }).map((vs) => vs.map((v): QueryPair => [param.name, v])) },
    // Array and object syntaxes: `ids[]=1`, `page[0]=1`, `game[__proto__]=x`.
    {
      weight: 1,
      arbitrary: fc.tuple(fc.constantFrom('[]', '[0]', '[a]', '[__proto__]', '.x', '%5B%5D'), value).map(([suffix, v]): QueryPair[] => [[param.name + suffix, v]]),
    },
    // Present without a value (`?page`) or with an empty one (`?page=`).
    { weight: 1, arbitrary: fc.constantFrom<QueryPair[]>([[param.name, undefined]], [[param.name, '']]) },
  )
}

/** Query pairs nobody declared: unknown names, prototype names, hostile names. */
const unknownQueryPair: fc.Arbitrary<QueryPair> = fc.tuple(
  fc.oneof(fc.constantFrom('__proto__', 'constructor', 'prototype', 'toString', 'x', 'api_key', 'X-API-Key', '', '%', '%00', 'a%zz'), hostileText.map(encode)),
  fc.option(
    fc.tuple(hostileText, urlForm).map(([v, form]) => inUrl(v, form)),
    { nil: undefined },
  ),
)

function queryString(pairs: QueryPair[], separator: string): string {
  if (pairs.length === 0) return ''
  return `?${pairs.map(([name, value]) => (value === undefined ? name : `${name}=${value}`)).join(separator)}`
}

function queryArbitrary(op: Operation, world: World): fc.Arbitrary<string> {
  const declared = op.params.filter((p) => p.in === 'query')
  const perParam = declared.map((p) =>
    // Required parameters are there most of the time, so requests get past "is required".
    fc.option(declaredQueryPair(p, world, op.path), { nil: [] as QueryPair[], freq: p.required ? 8 : 2 }),
  )
  return fc
    .tuple(fc.tuple(...perParam), fc.array(unknownQueryPair, { maxLength: 3 }), fc.constantFrom('&', '&', '&', ';', '&&', '&amp;'), fc.boolean())
    .chain(([groups, unknown, separator, shuffle]) => {
      const pairs = [...groups.flat(), ...unknown]
      return (shuffle ? fc.shuffledSubarray(pairs, { minLength: pairs.length, maxLength: pairs.length }) : fc.constant(pairs)).map((ordered) => queryString(ordered, separator))
    })
}

function pathArbitrary(op: Operation, world: World): fc.Arbitrary<string> {
  const names = [...op.path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]!)
  const schemas = new Map(op.params.filter((p) => p.in === 'path').map((p) => [p.name, p.schema]))
  return fc
    .tuple(
      fc.tuple(...names.map((name) => pathParameter(name, schemas.get(name), world, op.path))),
      // Trailing slash, doubled slashes, a dot segment, a fragment-ish suffix.
      fc.oneof({ weight: 12, arbitrary: fc.constant('') }, { weight: 1, arbitrary: fc.constantFrom('/', '//', '/.', '/..', '%2F', ';x=1', '#frag') }),
    )
    .map(([values, suffix]) => {
      let i = 0
      return op.path.replace(/\{[^}]+\}/g, () => values[i++] ?? '') + suffix
    })
}

// ---------------------------------------------------------------------------------------------
// JSON bodies, as text (so invalid JSON, duplicate keys and `__proto__` keys can be written).

const json = (value: unknown) => JSON.stringify(value)

/** Scalars of every JSON type, and strings that are hostile once decoded (`\u0000` and all). */
const hostileJsonScalar: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom('null', 'true', 'false', '0', '-1', '1e309', '-0', '1.5', '99999999999999999999999', '[]', '{}', '""', '[null]', '{"":""}'),
  hostileText.map(json),
)

/** A value wrapped `depth` times in arrays or objects: deep nesting inside a field (up to 20,000 levels). */
function deeplyNested(inner: fc.Arbitrary<string>): fc.Arbitrary<string> {
  const depth = fc.oneof(fc.integer({ min: 1, max: 64 }), fc.constantFrom(500, 2_000, 10_000, 20_000))
  return fc.tuple(depth, fc.constantFrom('array', 'object', 'mixed'), inner).map(([n, kind, v]) => {
    if (kind === 'array') return `${'['.repeat(n)}${v}${']'.repeat(n)}`
    if (kind === 'object') return `${'{"a":'.repeat(n)}${v}${'}'.repeat(n)}`
    return `${'[{"a":'.repeat(n)}${v}${'}]'.repeat(n)}`
  })
}

/** A long array: one element repeated 1,000 to 150,000 times (about 1 MB at most). */
const hugeArray: fc.Arbitrary<string> = fc
  .tuple(fc.constantFrom(1_000, 5_000, 40_000, 150_000), fc.constantFrom('1', '"x"', 'null', '{}', '"Dragon Shield"'))
  .map(([n, element]) => `[${new Array(n).fill(element).join(',')}]`)

/** The same field with the other JSON types: an object where a string is due, a string where an array is … */
const wrongType: fc.Arbitrary<string> = fc.constantFrom('{"$gt":""}', '["a"]', '[1,2]', '{"length":1}', '123', 'true', '"1"', '{"toString":1}')

/** Prototype-pollution keys with values that would matter if they were merged into an object. */
const protoEntry: fc.Arbitrary<[string, string]> = fc.tuple(
  fc.constantFrom('__proto__', 'constructor', 'prototype', '__defineGetter__', 'toString', 'hasOwnProperty'),
  fc.constantFrom('{"isAdmin":true,"tier":"business"}', '{"prototype":{"polluted":true}}', 'null', '1', '"x"', '[]'),
)

function fieldValue(name: string, schema: any, world: World, path: string): fc.Arbitrary<string> {
  return fc.oneof(
    { weight: 5, arbitrary: plausible(name, schema, world, path).map(json) },
    { weight: 3, arbitrary: hostileJsonScalar },
    { weight: 2, arbitrary: deeplyNested(fc.oneof(plausible(name, schema, world, path).map(json), fc.constant('1'))) },
    { weight: 1, arbitrary: hugeArray },
    { weight: 1, arbitrary: wrongType },
  )
}

/** A JSON object for the operation's body schema: each field plausible or hostile, plus extra and prototype keys. */
function objectBody(schema: any, world: World, path: string): fc.Arbitrary<string> {
  const properties = Object.entries<any>(schema?.properties ?? {})
  const required = new Set<string>(schema?.required ?? [])
  const fields = properties.map(([name, s]) =>
    fc.option(
      fieldValue(name, s, world, path).map((v): [string, string] => [name, v]),
      { nil: undefined, freq: required.has(name) ? 10 : 2 },
    ),
  )
  const extras = fc.array(fc.oneof(protoEntry, fc.tuple(hostileText, hostileJsonScalar), fc.tuple(fc.constantFrom('tier', 'account_id', 'is_active', 'id'), hostileJsonScalar)), {
    maxLength: 3,
  })
  return fc.tuple(fc.tuple(...fields), extras, fc.boolean()).map(([given, extra, duplicate]) => {
    const entries = [...given.filter((e): e is [string, string] => e !== undefined), ...extra]
    // A repeated key: which one wins must not matter to safety.
    if (duplicate && entries.length > 0) entries.push([entries[0]![0], '"second"'])
    return `{${entries.map(([k, v]) => `${json(k)}:${v}`).join(',')}}`
  })
}

/** Whole bodies: an object for the schema (often), other JSON, truncated JSON, non-JSON, invalid UTF-8, empty, oversized. */
function bodyArbitrary(op: Operation, world: World): fc.Arbitrary<Uint8Array | undefined> {
  const utf8 = (text: string) => new Uint8Array(Buffer.from(text, 'utf8'))
  const object = objectBody(op.body ?? { type: 'object', properties: { name: { type: 'string' } } }, world, op.path)
  const invalidUtf8 = fc
    .tuple(
      fc.constantFrom(...Object.keys(op.body?.properties ?? { name: 1 })),
      fc.constantFrom([0xff], [0xc3, 0x28], [0xed, 0xa0, 0x80], [0xc0, 0xaf], [0xe2, 0x82], [0xfe, 0xff], [0x00]),
    )
    .map(([field, bytes]) => new Uint8Array(Buffer.concat([Buffer.from(`{"${field}":"a`), Buffer.from(bytes), Buffer.from('b"}')])))
  return fc.oneof(
    { weight: 8, arbitrary: object.map(utf8) },
    {
      weight: 1,
      arbitrary: fc
        .oneof(hostileJsonScalar, deeplyNested(fc.constant('1')), hugeArray, fc.constantFrom('[{}]', '"{}"', 'NaN', '{"a":1,}', '{a:1}', "{'a':1}", '{"a":1}/*c*/', '\ufeff{}'))
        .map(utf8),
    },
    { weight: 1, arbitrary: fc.tuple(object, fc.nat()).map(([text, cut]) => utf8(text.slice(0, cut % Math.max(1, text.length)))) },
    {
      weight: 1,
      arbitrary: fc.oneof(
        fc.constantFrom('email=a%40b.c&password=x', '<xml/>', 'null\u0000', '\u0000', '--x\r\nContent-Disposition: form-data; name="a"\r\n\r\nb\r\n--x--').map(utf8),
        fc.uint8Array({ maxLength: 64 }),
      ),
    },
    { weight: 1, arbitrary: invalidUtf8 },
    { weight: 1, arbitrary: fc.constant(new Uint8Array()) },
    // Past the configured body limit (1 MB by default): refused with 413, never read into memory.
    { weight: 1, arbitrary: fc.constantFrom(1_100_000, 3_000_000).map((n) => utf8(`{"name":"${'a'.repeat(n)}"}`)) },
  )
}

// ---------------------------------------------------------------------------------------------
// Headers and methods.

const CONTENT_TYPES = [
  'application/json',
  'application/json; charset=utf-8',
  'APPLICATION/JSON',
  'Application/Json; Charset=UTF-8',
  'application/jsonx',
  'application/vnd.x+json',
  'application/problem+json',
  'application/json; charset=latin1',
  'application/json;;',
  'text/json',
  'text/plain',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=x',
  'multipart/form-data',
  'application/msgpack',
  'application/octet-stream',
  '',
  ';',
  'json',
  '*/*',
  'application/*',
  'application/json, text/plain',
  ' application/json',
  'application/json\u0000',
  'application/ json',
]

function credentialHeaders(op: Operation, world: World): fc.Arbitrary<[string, string][]> {
  const keys = world.keys
  const junkKey = fc.oneof(
    fc.constantFrom('', ' ', 'tcg_live_', `${keys.pro} `, keys.pro.toUpperCase(), keys.pro.slice(0, -1), `${keys.pro}\u0000`, 'null', 'undefined'),
    fc.string({ unit: 'grapheme-ascii', minLength: 32, maxLength: 32 }).map((s) => `tcg_live_${s}`),
    hostileText,
  )
  const apiKey = fc.oneof(
    { weight: op.auth === 'key' ? 8 : 2, arbitrary: fc.constantFrom(keys.pro, keys.business, keys.free) },
    { weight: 1, arbitrary: fc.constant(keys.revoked) },
    { weight: 2, arbitrary: junkKey },
  )
  const junkCookie = fc.oneof(
    fc.constantFrom('session=', 'session', ';;;', 'session=%00', `${world.cookie}; session=junk`, `session=junk; ${world.cookie}`, `${world.cookie}x`, 'session="x"', '=;='),
    hostileText.map((v) => `session=${v}`),
  )
  const cookie = fc.oneof({ weight: op.auth === 'session' ? 8 : 1, arbitrary: fc.constant(world.cookie) }, { weight: 2, arbitrary: junkCookie })
  const origin = fc.constantFrom(world.base, world.base, 'https://evil.example', 'null', `${world.base}.evil.example`, 'http://127.0.0.1', 'file://', '*')
  return fc
    .tuple(
      fc.option(apiKey, { nil: undefined, freq: op.auth === 'key' ? 8 : 2 }),
      fc.option(cookie, { nil: undefined, freq: op.auth === 'session' ? 8 : 2 }),
      fc.option(origin, { nil: undefined, freq: 2 }),
    )
    .map(([k, c, o]) => [
      ...(k === undefined ? [] : [['x-api-key', k] as [string, string]]),
      ...(c === undefined ? [] : [['cookie', c] as [string, string]]),
      ...(o === undefined ? [] : [['origin', o] as [string, string]]),
    ])
}

/** Headers beside credentials: content types (one, none or two), Accept, and other odd ones. */
function otherHeaders(): fc.Arbitrary<[string, string][]> {
  const contentType = fc.oneof({ weight: 4, arbitrary: fc.constantFrom(...CONTENT_TYPES) }, { weight: 1, arbitrary: hostileText })
  return fc
    .tuple(
      fc.array(contentType, { maxLength: 2 }),
      fc.option(fc.constantFrom('application/msgpack', 'application/x-msgpack', '*/*', 'text/html', 'application/json;q=0', 'application/msgpack;q=abc', ''), {
        nil: undefined,
      }),
      fc.array(
        fc.tuple(fc.constantFrom('x-forwarded-for', 'authorization', 'if-none-match', 'range', 'accept-encoding', 'x-requested-with', 'accept-language', 'x-api-key'), hostileText),
        { maxLength: 2 },
      ),
    )
    .map(([types, accept, extra]) => [
      ...types.map((t): [string, string] => ['content-type', t]),
      ...(accept === undefined ? [] : [['accept', accept] as [string, string]]),
      ...extra,
    ])
}

/** Methods fetch sends; the rest go over the raw socket. */
export const FETCH_METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'])
/** Methods Bun's HTTP parser knows; others it may refuse before the app sees them. */
export const KNOWN_METHODS = new Set([...FETCH_METHODS, 'TRACE', 'CONNECT'])

function methodArbitrary(op: Operation): fc.Arbitrary<string> {
  return fc.oneof(
    { weight: 12, arbitrary: fc.constant(op.method) },
    { weight: 3, arbitrary: fc.constantFrom('GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS') },
    { weight: 1, arbitrary: fc.constantFrom('TRACE', 'CONNECT', 'TRACK', 'FOO', 'get', 'PROPFIND', 'QUERY', 'M-SEARCH', 'G\u0000T') },
  )
}

// ---------------------------------------------------------------------------------------------
// Requests.

/** Hostile requests aimed at one operation. */
export function requestFor(op: Operation, world: World): fc.Arbitrary<HostileRequest> {
  const label = `${op.method} ${op.path}`
  return fc
    .record({
      method: methodArbitrary(op),
      path: pathArbitrary(op, world),
      query: queryArbitrary(op, world),
      credentials: credentialHeaders(op, world),
      other: otherHeaders(),
      // Operations with a body get one most of the time; the others sometimes (a GET with a body).
      body: fc.option(bodyArbitrary(op, world), { nil: undefined, freq: op.body ? 12 : 1 }),
      transport: fc.constantFrom<'fetch' | 'raw'>('fetch', 'fetch', 'raw'),
      // Absolute-form request targets, as proxies send them (raw only).
      absolute: fc.constantFrom(false, false, false, false, false, false, true),
    })
    .map(({ method, path, query, credentials, other, body, transport, absolute }) => ({
      operation: label,
      method,
      target: absolute ? `http://127.0.0.1:${world.port}${path}${query}` : `${path}${query}`,
      headers: [...credentials, ...other],
      body,
      transport: absolute ? 'raw' : transport,
      version: 'HTTP/1.1',
      omitHost: false,
    }))
}

/**
 * Request lines no OpenAPI operation describes: authority form (`CONNECT host:port`), `*`,
 * absolute form to this or another host, odd versions, no Host. Only the raw socket sends these.
 */
export function requestLineFor(world: World, paths: string[]): fc.Arbitrary<HostileRequest> {
  const target = fc.oneof(
    fc.constantFrom(`127.0.0.1:${world.port}`, 'evil.example:443', 'localhost:1', '[::1]:80', ':0', '*', '', '?', '#', '/?#', '//evil.example/v1/games'),
    fc.constantFrom(...paths).map((p) => `http://127.0.0.1:${world.port}${p}`),
    fc.constantFrom(...paths).map((p) => `http://evil.example${p}`),
    fc.constantFrom(...paths).map((p) => `https://user:pass@127.0.0.1:${world.port}${p}?x=%00`),
    fc.constantFrom(
      '/docs',
      '/docs/assets/__proto__',
      '/docs/assets/constructor',
      '/docs/assets/toString',
      '/docs/assets/foo',
      '/docs/assets/%00',
      '/openapi.json',
      '/',
      '/v1',
      '/v1/',
      '/%00',
      '/health/%2e%2e',
    ),
  )
  return fc
    .record({
      method: fc.constantFrom('CONNECT', 'CONNECT', 'OPTIONS', 'GET', 'HEAD', 'POST', 'TRACE', 'DELETE', 'PUT'),
      target,
      version: fc.constantFrom('HTTP/1.1', 'HTTP/1.1', 'HTTP/1.1', 'HTTP/1.0', 'HTTP/2.0', 'HTTP/0.9', 'HTTP/1.1 x'),
      omitHost: fc.constantFrom(false, false, false, true),
      credentials: fc.constantFrom<[string, string][]>([], [['x-api-key', world.keys.pro]], [['cookie', world.cookie]]),
    })
    .map(({ method, target, version, omitHost, credentials }) => ({
      operation: 'request line',
      method,
      target,
      headers: credentials,
      body: undefined,
      transport: 'raw' as const,
      version,
      omitHost,
    }))
}
