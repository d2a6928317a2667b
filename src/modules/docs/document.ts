import { toOpenAPISchema } from '@elysiajs/openapi'
import type { AnyElysia } from 'elysia'
import packageJson from '../../../package.json' with { type: 'json' }
import type { KeyGuardDetail } from '../auth/guard'
import { TIER_POLICY, TIERS } from '../auth/tiers'
import type { MarketplaceSource } from '../ingest/source'
import examples from './examples.json' with { type: 'json' }

// The document's skeleton (paths, operations, parameters, tags) comes from @elysiajs/openapi; every
// schema in it is then taken from the route's own TypeBox schemas, the ones that validate requests
// and responses, because the generator rewrites them on the way: a union of literals becomes a
// string enum without its description (`is_active: 0 | 1` read as strings), and names registered
// with `.model()` come out as bare `$ref`s ("Game") beside `$id: "#/components/schemas/Game"`, which
// Swagger UI cannot resolve (it then showed the error envelope as every 200 example). A union of
// literals is then written as a typed enum with its description kept. Parameter descriptions are
// lifted out of their schemas, where Swagger UI does not show them.

// biome-ignore lint: an OpenAPI document is plain JSON, walked generically.
type Json = any

const LOWEST_TIER = TIER_POLICY[TIERS[0]].label

// Statuses of routes that take neither a key nor a session (sign-up and login).
const ERROR_DESCRIPTIONS: Record<string, string> = {
  '400': '`INVALID_PARAMETER`: a parameter or the body is invalid; `details` names each field and what it must be',
  '401': '`UNAUTHORIZED`: the email or password is wrong',
  '403': '`FORBIDDEN`: the `Origin` header names another site',
  '404': '`NOT_FOUND`: no such resource (the message names it)',
  '409': '`CONFLICT`: the request conflicts with what exists (the message says how)',
  '408': '`REQUEST_TIMEOUT`: the body did not arrive whole within `REQUEST_TIMEOUT_SECONDS` (10 s by default); the connection is closed',
  '413': '`PAYLOAD_TOO_LARGE`: the body is larger than the configured limit (1 MiB by default)',
  '415': '`UNSUPPORTED_MEDIA_TYPE`: the body must be JSON (`Content-Type: application/json` or a `+json` type)',
  '429': '`TOO_MANY_ATTEMPTS`: too many login attempts for this email or address, or sign-ups from this address; `Retry-After` says when to try again',
}
const KEY_ERROR_DESCRIPTIONS: Record<string, string> = {
  '401': '`API_KEY_REQUIRED` (no `X-API-Key` header) or `INVALID_API_KEY` (unknown or revoked key)',
  '403': "`TIER_REQUIRED`: the key's account is on a tier below the one this endpoint needs",
  '429': '`RATE_LIMIT_EXCEEDED`: the daily quota is used up; it resets at 00:00 UTC (`Retry-After` gives the seconds)',
}
const SESSION_ERROR_DESCRIPTIONS: Record<string, string> = {
  '401': '`UNAUTHORIZED`: no valid `session` cookie (log in first)',
  '403': '`FORBIDDEN`: the `Origin` header names another site',
  '429': '`TOO_MANY_ATTEMPTS`: too many attempts in a short time; `Retry-After` says when to try again',
}

const RATE_LIMIT_HEADERS = {
  'X-RateLimit-Limit': { description: "The account's daily request quota", schema: { type: 'integer' } },
  'X-RateLimit-Remaining': { description: 'Units left today', schema: { type: 'integer' } },
  'X-RateLimit-Reset': { description: 'When the quota resets (the next 00:00 UTC), ISO 8601', schema: { type: 'string', format: 'date-time' } },
}
const RETRY_AFTER = { description: 'Seconds until the quota resets', schema: { type: 'integer' } }
const UNAVAILABLE = {
  description:
    '`SERVICE_UNAVAILABLE`: the database cannot be reached; `Retry-After` says when to try again. Bulk prices, top movers ' +
    'and changes keep answering keys this node confirmed within the hour',
  headers: { 'Retry-After': { description: 'Seconds to wait before trying again', schema: { type: 'integer' } } },
  content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
}

export const TITLE = 'Trading Card Catalog and Price API'

const QUOTAS = TIERS.map((tier) => `${TIER_POLICY[tier].label} ${TIER_POLICY[tier].dailyQuota.toLocaleString('en-US')}`).join(', ')

/** Where the data this server answers comes from: a reader must know when prices are made up. */
function dataSource(source: Pick<MarketplaceSource, 'name' | 'capabilities'>): string {
  if (source.name === 'demo') {
    return `**Demo data.** This server answers generated demo data: the game names are real, but every set, card,
price, sale and listing is made up, for trying the API. Do not use these prices for anything real.`
  }
  const origin = source.name === 'tcgcsv' ? "TCGplayer's public catalog, read through the TCGCSV mirror (tcgcsv.com)" : 'the marketplace this server is connected to'
  const lacks = [
    !source.capabilities.listings && 'condition prices (404 `CONDITION_PRICES_UNAVAILABLE`)',
    !source.capabilities.sales && 'sales (`avg_sales_price` and `sales_volume` are null)',
    !source.capabilities.pastPrices && "prices before this server's first sync (history starts there)",
  ].filter(Boolean)
  return `**Data.** Catalog and prices come from ${origin}, synced on a schedule (the most popular games daily);
\`GET /ready\` says when each group of games was last synced.${lacks.length > 0 ? ` This source has no ${lacks.join(', no ')}.` : ''}`
}

/** The document's introduction, shown at the top of the docs page. */
function description(source: Pick<MarketplaceSource, 'name' | 'capabilities'>): string {
  return `Games, sets, cards and sealed products of trading card games, with prices per printing, price history,
top movers, bulk lookups, set export and price-alert webhooks.

${dataSource(source)}

**Authentication.** Each endpoint takes one of three:

- **Nothing (public):** \`GET /v1/games\`, \`GET /v1/games/{slug}\`, \`GET /v1/games/{slug}/sets\`, sign-up and
  login (\`POST /v1/auth/signup\`, \`POST /v1/auth/login\`), \`GET /\`, \`/health\` and \`/ready\`.
- **The \`session\` cookie**, which sign-up and login set: your account (\`POST /v1/auth/logout\`,
  \`GET /v1/auth/me\`), API keys (\`/v1/keys\`) and webhooks (\`/v1/webhooks\`). In this page, sign up or log in
  first: the browser then sends the cookie with the other calls.
- **An API key** in the \`X-API-Key\` header: every other \`/v1\` endpoint (the catalog beyond the games, prices,
  history, search, bulk, export and \`GET /v1/usage\`). Create one with \`POST /v1/keys\`, then click
  **Authorize** and paste it under \`ApiKey\` to try these endpoints here.

Each endpoint's description opens with what it needs (and, for a key, the lowest tier and the quota it costs).

**Quotas.** Each account has a daily request quota by tier (${QUOTAS}), reset at 00:00 UTC. Every answer to a
request with a valid key carries \`X-RateLimit-Limit\`, \`X-RateLimit-Remaining\`, \`X-RateLimit-Reset\` and the
same numbers in the body's \`rate_limit\`.

**Errors** use \`{ "error": { "message", "code", "details"? } }\`.

**Paging.** List endpoints that take \`page\` and \`per_page\` (default 50; above 100 is served as 100) answer
\`meta: { total, page, per_page, has_more }\`. The others say in their description what they return; query
parameters an endpoint does not list are ignored.`
}

/** The OpenAPI 3.1 document of every visible route of `app`. */
export function buildOpenApiDocument(app: AnyElysia, source: Pick<MarketplaceSource, 'name' | 'capabilities'>): Json {
  const generated: Json = toOpenAPISchema(app)
  // The whole app's routes and models, as the generator reads them (protected in Elysia's types).
  const whole = app as unknown as { getGlobalRoutes(): AnyElysia['routes']; getGlobalDefinitions(): { type: Record<string, unknown> } }
  const schemas: Json = {}
  for (const [name, schema] of Object.entries(whole.getGlobalDefinitions().type)) schemas[name] = schemaOf(schema)
  for (const route of whole.getGlobalRoutes()) {
    const path = route.path.replace(/:([^/]+)/g, '{$1}')
    const operation = generated.paths[path]?.[route.method.toLowerCase()]
    if (!operation) continue // hidden
    useRouteSchemas(operation, route.hooks as Json)
    completeOperation(route.method, path, operation)
  }
  return {
    openapi: '3.1.1',
    info: { title: TITLE, version: packageJson.version, description: description(source) },
    servers: [{ url: '/', description: 'This server' }],
    tags: TAGS,
    paths: generated.paths,
    components: {
      securitySchemes: {
        ApiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key', description: 'An API key: `tcg_live_` and 32 characters' },
        Session: { type: 'apiKey', in: 'cookie', name: 'session', description: 'Set by `POST /v1/auth/login` or `/v1/auth/signup`' },
      },
      schemas,
    },
  }
}

/** A route schema as JSON Schema: a model name becomes a `$ref`, and a copy is made to normalise. */
function schemaOf(schema: Json): Json {
  const copy = typeof schema === 'string' ? { $ref: schema } : JSON.parse(JSON.stringify(schema))
  normaliseSchemas(copy)
  return copy
}

function useRouteSchemas(operation: Json, hooks: Json): void {
  for (const parameter of operation.parameters ?? []) {
    const source = (parameter.in === 'path' ? hooks.params : hooks.query)?.properties?.[parameter.name]
    if (source) parameter.schema = schemaOf(source)
  }
  // Every body is JSON (request-rules.ts); the generator lists only media types of string parsers.
  if (operation.requestBody && hooks.body) operation.requestBody.content = { 'application/json': { schema: schemaOf(hooks.body) } }
  for (const [status, response] of Object.entries<Json>(operation.responses ?? {})) {
    const source = hooks.response?.[status]
    for (const media of Object.values<Json>(response.content ?? {})) {
      if (source) media.schema = schemaOf(source)
    }
  }
}

const TAGS = [
  { name: 'Games', description: 'Public catalog: no API key needed' },
  { name: 'Sets', description: 'Sets, their cards and prices' },
  { name: 'Cards', description: 'Cards, sealed products and their prices' },
  { name: 'Prices', description: 'Bulk prices, top movers and the change feed, answered from the in-memory price snapshot' },
  { name: 'Bulk', description: 'Batched cards and history, set export and bulk resolve' },
  { name: 'History', description: 'Price history (window by tier)' },
  { name: 'Search', description: 'Card search by name, misspellings forgiven, and name autocomplete' },
  { name: 'Account', description: 'Sign up, log in (session cookie) and daily usage' },
  { name: 'Keys', description: 'API keys, managed with the session cookie' },
  { name: 'Webhooks', description: 'Price-alert webhooks, managed with the session cookie' },
  { name: 'Health', description: 'Liveness and readiness' },
  { name: 'Index', description: 'Where to start: links to this page, the OpenAPI document and the health checks' },
]

/** Bare `$ref`s point into components, `$id`s go, and a union of literals is written as an enum. */
function normaliseSchemas(node: Json): void {
  if (Array.isArray(node)) {
    for (const item of node) normaliseSchemas(item)
    return
  }
  if (node === null || typeof node !== 'object') return
  if (typeof node.$ref === 'string' && !node.$ref.startsWith('#')) node.$ref = `#/components/schemas/${node.$ref}`
  delete node.$id
  delete node['x-param']
  literalsAsEnum(node)
  for (const value of Object.values(node)) normaliseSchemas(value)
}

/**
 * `anyOf: [{ const: 'up' }, { const: 'down' }]` (LiteralUnion, Type.Union of literals) becomes
 * `{ type: 'string', enum: ['up', 'down'] }`, which Swagger UI shows as a dropdown and client
 * generators read as an enum; only the document changes, validation keeps the union and its
 * "must be one of" message (docs/adr/0085-closed-values-are-enums-in-the-document.md).
 */
function literalsAsEnum(node: Json): void {
  const members: Json[] | undefined = node.anyOf
  if (!Array.isArray(members) || members.length === 0) return
  const literal = (member: Json) => member !== null && typeof member === 'object' && 'const' in member && Object.keys(member).every((key) => key === 'const' || key === 'type')
  if (!members.every(literal)) return
  const values = members.map((member) => member.const)
  const types = new Set(values.map((value) => (Number.isInteger(value) ? 'integer' : typeof value)))
  if (types.size !== 1 || !['string', 'integer', 'number'].includes([...types][0]!)) return
  delete node.anyOf
  node.type = [...types][0]
  node.enum = values
}

function completeOperation(method: string, path: string, operation: Json): void {
  const keyed: KeyGuardDetail | undefined = operation['x-min-tier'] ? operation : undefined
  const session = operation.security?.some((scheme: Json) => 'Session' in scheme)
  operation.description = [access(keyed, session), operation.description].filter(Boolean).join('\n\n')
  for (const parameter of operation.parameters ?? []) {
    parameter.description ??= parameter.schema?.description
  }
  const responses: Json = operation.responses ?? {}
  if (keyed?.['x-min-tier'] === LOWEST_TIER) delete responses['403']
  if (keyed?.['x-quota-cost'] === 0) delete responses['429']
  // Refused by request-rules.ts on every operation that takes a body.
  if (operation.requestBody) {
    for (const status of ['408', '413', '415']) responses[status] ??= { content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } }
  }
  // Every API operation reads the database (a key or session not yet cached, if nothing else).
  if (path.startsWith('/v1/')) responses['503'] = structuredClone(UNAVAILABLE)
  for (const [status, response] of Object.entries<Json>(responses)) {
    const described = (keyed && KEY_ERROR_DESCRIPTIONS[status]) || (session && SESSION_ERROR_DESCRIPTIONS[status]) || ERROR_DESCRIPTIONS[status]
    if (described) response.description = described
    // Codes a route adds to a shared status (its detail's `x-error-notes`: status → what else it means).
    const note = operation['x-error-notes']?.[status]
    if (note) response.description = response.description ? `${response.description}; ${note}` : note
    if (status === '304') {
      delete response.content
      response.description = 'Not modified: the `If-None-Match` tag is still current (no body)'
    }
    if (status === '302') {
      const [media] = Object.values<Json>(response.content ?? {})
      response.description = media?.schema?.description ?? 'A redirect to `Location`'
      delete response.content
      response.headers = { Location: { description: 'Where to go, relative to this URL', schema: { type: 'string' } } }
    }
    // 401, 408 and 413 come before the key is charged, and a 503 may come before it is known: no quota headers.
    if (keyed && !['401', '408', '413', '503'].includes(status)) {
      response.headers = { ...RATE_LIMIT_HEADERS, ...(status === '429' ? { 'Retry-After': RETRY_AFTER } : {}) }
    } else if (status === '429') {
      // The attempt limits (login, sign-up, webhook test pings) say when to try again too.
      response.headers = { 'Retry-After': UNAVAILABLE.headers['Retry-After'] }
    }
    if (status.startsWith('2') && response.description?.startsWith('Response for status')) response.description = 'OK'
  }
  const example = (examples as Record<string, unknown>)[`${method} ${path}`]
  const success = responses['200'] ?? responses['201']
  const media = success?.content?.['application/json']
  if (media && example !== undefined) media.example = example
  // Other forms of the same answer a route offers (`x-also-as` in its detail: media type → what it is).
  for (const [type, description] of Object.entries<string>(operation['x-also-as'] ?? {})) {
    success.content[type] = { schema: type.includes('msgpack') ? media.schema : { type: 'string', description } }
  }
  delete operation['x-also-as']
  delete operation['x-error-notes']
}

function access(keyed: KeyGuardDetail | undefined, session: boolean): string {
  if (session) return '**Auth:** the `session` cookie (log in first). Writes take a JSON body and refuse a foreign `Origin`.'
  if (!keyed) return ''
  const tier = keyed['x-min-tier'] === LOWEST_TIER ? 'any tier' : `the **${keyed['x-min-tier']}** tier or higher`
  const cost = keyed['x-quota-cost']
  const charge =
    cost === 0
      ? 'Costs no quota and is answered even over quota.'
      : cost === 'per-item'
        ? 'Costs quota credits per item (see below).'
        : `Costs ${cost === 1 ? 'one quota unit' : `${cost} quota units`}, also when refused with 400 or 404.`
  return `**Auth:** an API key on ${tier}. ${charge}`
}
