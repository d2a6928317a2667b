import { type NumberOptions, type SchemaOptions, type Static, type TProperties, type TSchema, Type } from '@sinclair/typebox'
import { ERROR_STATUS, type ErrorCode } from './errors'

// Shared TypeBox models. Response integers use typebox's Type.Integer (Elysia's t.Integer shows as
// a string/integer union in OpenAPI). Query and path integers use QueryInt: Elysia coerces query
// strings only for the Number kind, so an integer there is a number that must be a multiple of 1.

/** A string that is one of `values` (static type: their union), e.g. an enum parameter. */
export function LiteralUnion<T extends string>(values: readonly T[], options: SchemaOptions = {}) {
  return Type.Unsafe<T>(Type.Union(values.map((value) => Type.Literal(value)), options))
}

/** An integer read from the query string or path, e.g. `QueryInt({ minimum: 1, maximum: 100 })`. */
export const QueryInt = (options: NumberOptions = {}) => Type.Number({ ...options, multipleOf: 1 })

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
// larger value is served as MAX_PER_PAGE (toPage) instead of refused (docs/decisions.md "Compatibility superset").
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
      details: Type.Optional(Type.Array(Type.Object({ field: Type.String(), message: Type.String() }))),
    }),
    rate_limit: Type.Optional(RateLimit),
  },
  { description: 'Error envelope; `rate_limit` is present when the request carried a valid key' },
)
