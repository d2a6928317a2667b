import { Kind, type NumberOptions, type SchemaOptions, type Static, type TProperties, type TSchema, Type, TypeRegistry } from '@sinclair/typebox'
import { ERROR_STATUS, type ErrorCode } from './errors'

// Shared TypeBox models. Response integers use typebox's Type.Integer (Elysia's t.Integer shows as
// a string/integer union in OpenAPI). Query and path integers use QueryInt, which reads the text itself.

/**
 * A string that is one of `values` (static type: their union), e.g. an enum parameter. Validated as
 * a union of literals, whose 400 says "must be one of: …"; /openapi.json shows it as a string enum.
 */
export function LiteralUnion<T extends string>(values: readonly T[], options: SchemaOptions = {}) {
  return Type.Unsafe<T>(
    Type.Union(
      values.map((value) => Type.Literal(value)),
      options,
    ),
  )
}

/** An integer as a URL writes it: decimal digits, an optional minus, no leading zero (docs/adr/0001-query-integers.md). */
const DECIMAL_INTEGER = /^-?(?:0|[1-9][0-9]*)$/
/** A number as a URL writes it: that integer with an optional fraction. */
const DECIMAL_NUMBER = /^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?$/

/** What a query number's check applies: bounds only (no exclusive bounds or multiples, which it would not check). */
type QueryNumberOptions = Pick<NumberOptions, 'minimum' | 'maximum' | 'default' | 'description'>

/**
 * A number read from the query string or path as text of `pattern`, published as `type`: a kind of
 * its own, which Elysia leaves alone. Elysia's coercion of TypeBox's Number kind reads '0x10', '1e1',
 * '+16', '16.' and ' 16' as numbers, and checks such parameters one at a time after the rest of the
 * query, so a 400 named only the first bad one (docs/adr/0084-every-bad-field-in-one-400.md).
 * The static type says number for the text too, as Elysia's own coerced numbers do.
 */
function queryNumberKind(kind: string, type: 'integer' | 'number', pattern: RegExp) {
  // Never Number()'s reading of hex, exponents, signs or spaces; NaN for anything else.
  const numberOf = (value: unknown) => (typeof value === 'number' ? value : typeof value === 'string' && pattern.test(value) ? Number(value) : Number.NaN)
  const fits = type === 'integer' ? Number.isInteger : Number.isFinite
  // The number a default or an already decoded value is comes through as is (Elysia decodes a query twice).
  TypeRegistry.Set<QueryNumberOptions>(kind, (schema, value) => {
    const number = numberOf(value)
    return fits(number) && (schema.minimum === undefined || number >= schema.minimum) && (schema.maximum === undefined || number <= schema.maximum)
  })
  return (options: QueryNumberOptions = {}) =>
    Type.Transform(Type.Unsafe<number>({ ...options, type, [Kind]: kind }))
      .Decode((value) => numberOf(value))
      .Encode((value) => value)
}

/** An integer read from the query string or path, e.g. `QueryInt({ minimum: 1, maximum: 100 })`. */
export const QueryInt = queryNumberKind('QueryInt', 'integer', DECIMAL_INTEGER)

/** A number read from the query string, e.g. a price filter: QueryInt with an optional fraction. */
export const QueryNumber = queryNumberKind('QueryNumber', 'number', DECIMAL_NUMBER)

/** The largest id: ids are PostgreSQL `integer`s (serial). */
export const MAX_ID = 2147483647

export const Id = Type.Integer({ minimum: 1, maximum: MAX_ID, description: 'Positive integer id' })

export const Timestamp = Type.String({ format: 'date-time', description: 'ISO 8601 timestamp (UTC)' })

export const MAX_PER_PAGE = 100

/**
 * Where a named parameter travels, for the wording of its 400. A symbol key, so it never reaches
 * the OpenAPI document (serialising drops it); Elysia's schema copies keep it.
 */
export const PARAM_IN = Symbol.for('tcg.param-in')

export type ParamLocation = 'query' | 'path'

function nameParams<T extends TProperties>(properties: T, location: ParamLocation) {
  for (const [name, schema] of Object.entries(properties)) {
    ;(schema as TSchema)['x-param'] = name
    ;(schema as TSchema)[PARAM_IN as never] = location
  }
  return Type.Object(properties)
}

/**
 * A query-string object whose parameters carry their own name (`x-param`): Elysia reports a
 * coerced parameter's range error against the parameter schema alone, and the 400 must name it.
 */
export const QueryParams = <T extends TProperties>(properties: T) => nameParams(properties, 'query')

/** The path parameters of a route, named like QueryParams' (`/v1/cards/0` is a 400 naming `id`). */
export const PathParams = <T extends TProperties>(properties: T) => nameParams(properties, 'path')

// `per_page` has no schema maximum: the public service's clients page with per_page=200, so a
// larger value is served as MAX_PER_PAGE (toPage) instead of refused (docs/adr/0025-compatibility-superset.md).
export const PaginationQuery = QueryParams({
  page: Type.Optional(QueryInt({ minimum: 1, maximum: 1_000_000, default: 1, description: 'Page number, from 1' })),
  per_page: Type.Optional(
    QueryInt({
      minimum: 1,
      default: 50,
      description: `Items per page, 1 to ${MAX_PER_PAGE}; values above ${MAX_PER_PAGE} are served as ${MAX_PER_PAGE} (and \`meta.per_page\` says ${MAX_PER_PAGE})`,
    }),
  ),
})
export type PaginationQuery = Static<typeof PaginationQuery>

export const PageMeta = Type.Object({
  total: Type.Integer({ minimum: 0 }),
  page: Type.Integer({ minimum: 1 }),
  per_page: Type.Integer({ minimum: 1, maximum: MAX_PER_PAGE, description: `The page size served (a per_page above ${MAX_PER_PAGE} is served as ${MAX_PER_PAGE})` }),
  has_more: Type.Boolean(),
})
export type PageMeta = Static<typeof PageMeta>

/** `meta.total` of a list answer that is not paged: its items, all in `data` (docs/adr/0083-every-list-answer-counts-its-items.md). */
export const ListTotal = (description = 'Items in `data`: every one is in this answer (no paging)') => Type.Integer({ minimum: 0, description })

export interface Page {
  page: number
  perPage: number
}

export function toPage(query: PaginationQuery): Page {
  return { page: query.page ?? 1, perPage: Math.min(query.per_page ?? 50, MAX_PER_PAGE) }
}

export function pageMeta(page: Page, total: number): PageMeta {
  return { total, page: page.page, per_page: page.perPage, has_more: page.page * page.perPage < total }
}

/** The spec's `rate_limit` body object; the same numbers travel in the X-RateLimit-* headers. */
export const RateLimit = Type.Object(
  {
    daily_limit: Type.Integer({ minimum: 0, description: "The account's daily request quota" }),
    daily_remaining: Type.Integer({ minimum: 0, description: 'Units left today' }),
    daily_reset: Type.String({ format: 'date-time', description: 'When the counter resets: the next 00:00 UTC' }),
  },
  { description: 'Quota state after this request (every response to a request with a valid key)' },
)
export type RateLimit = Static<typeof RateLimit>

export const ErrorBody = Type.Object(
  {
    error: Type.Object({
      message: Type.String(),
      code: LiteralUnion(Object.keys(ERROR_STATUS) as ErrorCode[]),
      details: Type.Optional(
        Type.Array(
          Type.Object({
            field: Type.String({ description: 'The parameter or body field, dotted for a nested one (`ids.3`)' }),
            message: Type.String({ description: 'What it must be, e.g. "must be one of: up, down"' }),
          }),
          { description: 'Present with 400 `INVALID_PARAMETER`: one entry per invalid field' },
        ),
      ),
      request_id: Type.String({ description: 'The id of the request this answers, as in its `X-Request-Id` header: quote it when reporting a problem' }),
    }),
    rate_limit: Type.Optional(RateLimit),
  },
  { description: 'Error envelope; `rate_limit` is present when the request carried a valid key' },
)
