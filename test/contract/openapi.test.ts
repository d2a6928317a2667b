import { afterAll, describe, expect, test } from 'bun:test'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { Validator } from '@seriousme/openapi-schema-validator'
import Ajv2020 from 'ajv/dist/2020'
import addFormats from 'ajv-formats'
import { sql } from 'drizzle-orm'
import { unpack } from 'msgpackr'
import { loadConfig } from '../../src/config'
import { openPostgres } from '../../src/db/client'
import { createKey } from '../../src/modules/auth/keys'
import { SIGNUP_THROTTLE } from '../../src/modules/auth/login-throttle'
import { TIER_POLICY, type Tier, TIERS } from '../../src/modules/auth/tiers'
import { utcDate } from '../../src/shared/clock'
import { accountWithKey, type TestAccount, testRedis } from '../helpers/auth'
import { freshDatabase, PRIMARY_PRINTING_FIRST, selectRows, testLogger } from '../helpers/db'
import { TEST_NOW, TEST_REDIS_URL } from '../helpers/env'
import { startServer } from '../helpers/server'
import { createHttpSource } from '../../src/modules/ingest/sources/http'
import { startFakeMarketplace } from '../fixtures/fake-marketplace'
import { testClock, tinySource } from '../helpers/db'
import { declaredSource, NO_LISTINGS } from '../helpers/sources'
import { testWebhookSettings } from '../helpers/webhooks'
import { startWebhookReceiver } from '../fixtures/webhook-receiver'
import { MAX_WEBHOOKS, PING_LIMIT } from '../../src/modules/webhooks/service'
import { systemResolver } from '../../src/modules/webhooks/target-guard'

// The contract test: every operation /openapi.json lists is called for every status it declares,
// and each real answer must match what the document itself declares for that status (schema,
// media type, headers). Drift between what is documented and what is sent fails here.
// `UPDATE_EXAMPLES=1 bun test test/contract` also writes each operation's 200 (or 201) answer,
// arrays cut to two items, as the document's examples.

type Json = any

const database = await freshDatabase('seeded')

const [fixture] = await selectRows<{ game_slug: string; set_id: number; card_id: number; marketplace_id: number; card_name: string }>(
  database.db,
  sql`select g.slug as game_slug, c.set_id, c.id as card_id, c.marketplace_id, c.name as card_name
      from cards c join games g on g.id = c.game_id join card_prices cp on cp.card_id = c.id
      group by g.slug, c.set_id, c.id having count(*) > 1 order by c.id limit 1`,
)
const { game_slug: gameSlug, set_id: setId, card_id: cardId, marketplace_id: marketplaceId, card_name: cardName } = fixture!
// The next priced card: asked for beside the fixture card in bulk prices.
const [{ id: unsoldCardId }] = (await selectRows<{ id: number }>(database.db, sql`select min(card_id) as id from card_prices where card_id > ${cardId}`)) as [{ id: number }]

// What a real source leaves out is null (docs/decisions.md "A real source's gaps are null"), so the
// answers checked below carry such nulls, written before the server builds its price snapshot: the
// fixture card's listing count, its second printing's listing prices and buylist (and their
// history), and the next card's primary printing, never sold. One game and one set have an image.
await database.db.execute(sql`update cards set total_listings = null where id = ${cardId}`)
const [secondPrinting] = await selectRows<{ printing: string }>(
  database.db,
  sql`select cp.printing from card_prices cp join cards c on c.id = cp.card_id join games g on g.id = c.game_id
      where cp.card_id = ${cardId} order by ${PRIMARY_PRINTING_FIRST} offset 1 limit 1`,
)
await database.db.execute(sql`update card_prices set low_price = null, median_price = null, lowest_with_shipping = null, buylist_price = null
                              where card_id = ${cardId} and printing = ${secondPrinting!.printing}`)
await database.db.execute(sql`update price_history set low_price = null where card_id = ${cardId} and printing = ${secondPrinting!.printing}`)
await database.db.execute(sql`update card_prices set market_price = null, market_price_as_of = null, low_price = null,
                                price_change_24h = null, price_change_7d = null, price_change_30d = null
                              where (card_id, printing) = (select cp.card_id, cp.printing from card_prices cp join cards c on c.id = cp.card_id
                                                           join games g on g.id = c.game_id where cp.card_id = ${unsoldCardId}
                                                           order by ${PRIMARY_PRINTING_FIRST} limit 1)`)
await database.db.execute(sql`update games set image_url = 'https://marketplace.example/images/category/' || marketplace_category_id || '.png'
                              where slug = ${gameSlug} or id = (select id from games order by priority desc, name, id limit 1)`)
await database.db.execute(sql`update sets set image_url = 'https://marketplace.example/images/group/' || marketplace_group_id || '.png'
                              where id = (select s.id from sets s join games g on g.id = s.game_id where g.slug = ${gameSlug}
                                          order by s.release_date desc, s.id limit 1)`)

const redis = await testRedis()
// Webhook settings with a secret box and local targets allowed, so test pings reach the receiver
// below, which the examples call receiver.example.
const pingReceiver = await startWebhookReceiver()
afterAll(() => pingReceiver.stop(), 30_000)
const receiverUrl = `${pingReceiver.url.replace('127.0.0.1', 'receiver.example')}/hooks/prices`
const resolveReceiver = async (host: string) => (host === 'receiver.example' ? [{ address: '127.0.0.1', family: 4 }] : systemResolver(host))
const webhookSettings = await testWebhookSettings({ allowPrivateTargets: true, resolve: resolveReceiver })
const server = startServer({ db: database.db, redis, logger: testLogger, webhooks: webhookSettings })
await server.ready()
// A database without a catalog, for the 503 of /ready.
const emptyServer = startServer({ db: (await freshDatabase('empty')).db, redis: undefined, logger: testLogger })
// A database nobody listens for (port 1 refuses at once), for the 503 every API operation declares.
const unreachable = await openPostgres('postgres://postgres@127.0.0.1:1/none', { connectTimeoutSeconds: 1 })
const outageServer = startServer({ db: unreachable.db, redis: undefined, logger: testLogger })
afterAll(() => unreachable.close(), 30_000)
// A marketplace answering 500 to everything, for the 503 of a live refresh that found no cached rows.
const failingMarketplace = await startFakeMarketplace({ source: tinySource(), fault: { kind: 'status', status: 500 } })
afterAll(() => failingMarketplace.stop(), 30_000)
// A source without live listings (as the TCGCSV mirror), for the 404 of bulk condition prices.
const noListingsServer = startServer({ db: database.db, redis: undefined, logger: testLogger, source: declaredSource('tcgcsv', NO_LISTINGS).source })
// A body limit of one second, for the 408 of a body that stops arriving.
const slowBodyServer = startServer({ db: database.db, redis: undefined, logger: testLogger, config: { requestTimeoutSeconds: 1 } })
const upstreamOutageServer = startServer({
  db: database.db,
  redis: undefined,
  logger: testLogger,
  source: createHttpSource({ url: failingMarketplace.url, timeoutMs: 1_000, clock: testClock }),
})

const doc: Json = await (await server.get('/openapi.json')).json()

// One account per tier, so each operation is called with exactly the tier the document names.
const accounts = {} as Record<Tier, TestAccount>
for (const tier of TIERS) accounts[tier] = await accountWithKey(database.db, tier)
// A Business account with its day's quota used up (set in Redis, where the counters live).
const exhausted = await accountWithKey(database.db, 'business')
await redis?.hset(`quota:${utcDate(TEST_NOW)}:${exhausted.accountId}`, 'used', TIER_POLICY.business.dailyQuota)
const loggedOut = await accountWithKey(database.db, 'free')
const fullOfKeys = await accountWithKey(database.db, 'pro')
for (let n = 1; n < 25; n++) await createKey(database.db, { id: fullOfKeys.accountId }, `key ${n}`)
const revocable = await createKey(database.db, { id: accounts.free.accountId }, 'to revoke')

/** A webhook made over HTTP by `owner` (a Pro account) watching `card`, to the ping receiver. */
async function webhookOf(owner: TestAccount, card: number): Promise<number> {
  const response = await fetch(`${server.base}/v1/webhooks`, {
    method: 'POST',
    headers: { cookie: owner.cookie, 'content-type': 'application/json' },
    body: JSON.stringify({ url: receiverUrl, card_id: card, condition: 'above', threshold: 1000 }),
  })
  if (response.status !== 201) throw new Error(`webhook setup failed: ${response.status} ${await response.text()}`)
  return ((await response.json()) as Json).data.id
}

const UNKNOWN = 999_999_999
// A card nothing else here asks condition prices of: never refreshed when the failing marketplace is asked.
const unrefreshedCardId = (await selectRows<{ id: number }>(database.db, sql`select max(id) as id from cards`))[0]!.id
const MAX_BODY_BYTES = loadConfig({}).maxBodyBytes

const webhook = await webhookOf(accounts.pro, cardId)
const deletableWebhook = await webhookOf(accounts.pro, cardId)
// One ping already made, so the deliveries and the list have an attempt to show.
await fetch(`${server.base}/v1/webhooks/${webhook}/test`, { method: 'POST', headers: { cookie: accounts.pro.cookie } }).then((r) => r.arrayBuffer())
// An account at the webhook limit, and one that has used up its test pings for the minute.
const fullOfWebhooks = await accountWithKey(database.db, 'pro')
for (let n = 0; n < MAX_WEBHOOKS; n++) await webhookOf(fullOfWebhooks, cardId)
const pingedOut = await accountWithKey(database.db, 'pro')
const pingedOutWebhook = await webhookOf(pingedOut, cardId)
for (let n = 0; n < PING_LIMIT.perWindow; n++) {
  await fetch(`${server.base}/v1/webhooks/${pingedOutWebhook}/test`, { method: 'POST', headers: { cookie: pingedOut.cookie } }).then((r) => r.arrayBuffer())
}

/** A request: `key` is a tier's key, `min` the tier the operation states, `below` the one under it. */
interface Call {
  method?: string
  path: string
  key?: Tier | 'min' | 'below' | 'exhausted'
  cookie?: string
  body?: unknown
  headers?: Record<string, string>
  base?: string
  /** Send the body's first bytes and then nothing more, as a stalled upload. */
  stallBody?: boolean
}

const json = (body: unknown) => ({ body, headers: { 'content-type': 'application/json' } })

/** The call each operation answers with its success status; the refusals derive from it where they can. */
const SUCCESS: Record<string, Call> = {
  'GET /health': { path: '/health' },
  'GET /ready': { path: '/ready' },
  'GET /v1/games': { path: '/v1/games?per_page=5' },
  'GET /v1/games/{slug}': { path: `/v1/games/${gameSlug}` },
  'GET /v1/games/{slug}/sets': { path: `/v1/games/${gameSlug}/sets?per_page=5` },
  'GET /v1/sets': { path: `/v1/sets?game=${gameSlug}&per_page=5`, key: 'min' },
  'GET /v1/sets/{id}': { path: `/v1/sets/${setId}`, key: 'min' },
  'GET /v1/sets/{id}/cards': { path: `/v1/sets/${setId}/cards?per_page=5`, key: 'min' },
  'GET /v1/sets/{id}/prices': { path: `/v1/sets/${setId}/prices`, key: 'min' },
  'GET /v1/cards/{id}': { path: `/v1/cards/${cardId}`, key: 'min' },
  'GET /v1/cards/marketplace/{marketplaceId}': { path: `/v1/cards/marketplace/${marketplaceId}`, key: 'min' },
  'GET /v1/cards/{id}/prices': { path: `/v1/cards/${cardId}/prices`, key: 'min' },
  'GET /v1/cards/{id}/history': { path: `/v1/cards/${cardId}/history`, key: 'min' },
  'GET /v1/cards/{id}/history/detailed': { path: `/v1/cards/${cardId}/history/detailed`, key: 'min' },
  'GET /v1/search': { path: `/v1/search?q=${encodeURIComponent(cardName.split(' ')[0]!)}&per_page=5`, key: 'min' },
  'GET /v1/prices/top-movers': { path: '/v1/prices/top-movers?limit=5', key: 'min' },
  'GET /v1/prices/changes': { path: '/v1/prices/changes?since=2026-11-19T00:00:00Z&limit=5', key: 'min' },
  'GET /v1/bulk/prices': { path: `/v1/bulk/prices?ids=${cardId},${unsoldCardId},${UNKNOWN}`, key: 'min' },
  'GET /v1/bulk/cards': { path: `/v1/bulk/cards?ids=${cardId},${UNKNOWN}`, key: 'min' },
  'GET /v1/bulk/history': { path: `/v1/bulk/history?ids=${cardId},${UNKNOWN}`, key: 'min' },
  'GET /v1/export/set/{id}': { path: `/v1/export/set/${setId}`, key: 'min' },
  'POST /v1/bulk/resolve/marketplace': { method: 'POST', path: '/v1/bulk/resolve/marketplace', key: 'min', ...json({ ids: [marketplaceId, UNKNOWN] }) },
  'POST /v1/bulk/resolve/name': { method: 'POST', path: '/v1/bulk/resolve/name', key: 'min', ...json({ names: [cardName, 'no such card name'] }) },
  'GET /v1/usage': { path: '/v1/usage', key: 'min' },
  'GET /v1/cards/{id}/prices/conditions': { path: `/v1/cards/${cardId}/prices/conditions`, key: 'min' },
  'GET /v1/bulk/conditions': { path: `/v1/bulk/conditions?ids=${cardId},${UNKNOWN}`, key: 'min' },
  'POST /v1/auth/signup': { method: 'POST', path: '/v1/auth/signup', ...json({ email: 'new-user@example.com', password: 'a long enough password' }) },
  'POST /v1/auth/login': { method: 'POST', path: '/v1/auth/login', ...json({ email: accounts.free.email, password: accounts.free.password }) },
  'POST /v1/auth/logout': { method: 'POST', path: '/v1/auth/logout', cookie: loggedOut.cookie },
  'GET /v1/auth/me': { path: '/v1/auth/me', cookie: accounts.pro.cookie },
  'POST /v1/keys': { method: 'POST', path: '/v1/keys', cookie: accounts.pro.cookie, ...json({ name: 'inventory repricer' }) },
  'GET /v1/keys': { path: '/v1/keys', cookie: accounts.pro.cookie },
  'DELETE /v1/keys/{keyId}': { method: 'DELETE', path: `/v1/keys/${revocable.id}`, cookie: accounts.free.cookie },
  'POST /v1/webhooks': {
    method: 'POST',
    path: '/v1/webhooks',
    cookie: accounts.business.cookie,
    ...json({ url: 'https://example.com/hooks/prices', card_id: cardId, condition: 'above', threshold: 25 }),
  },
  'GET /v1/webhooks': { path: '/v1/webhooks', cookie: accounts.pro.cookie },
  'DELETE /v1/webhooks/{webhookId}': { method: 'DELETE', path: `/v1/webhooks/${deletableWebhook}`, cookie: accounts.pro.cookie },
  'GET /v1/webhooks/{webhookId}/deliveries': { path: `/v1/webhooks/${webhook}/deliveries`, cookie: accounts.pro.cookie },
  'POST /v1/webhooks/{webhookId}/test': { method: 'POST', path: `/v1/webhooks/${webhook}/test`, cookie: accounts.pro.cookie },
}

/** Refusals that need their own request: a bad parameter, an unknown id, a conflict. */
const REFUSALS: Record<string, Partial<Record<number, Call>>> = {
  'GET /ready': { 503: { path: '/ready', base: emptyServer.base } },
  'GET /v1/games': { 400: { path: '/v1/games?per_page=0' } },
  'GET /v1/games/{slug}': { 400: { path: `/v1/games/${'x'.repeat(101)}` }, 404: { path: '/v1/games/no-such-game' } },
  'GET /v1/games/{slug}/sets': { 400: { path: `/v1/games/${gameSlug}/sets?page=0` }, 404: { path: '/v1/games/no-such-game/sets' } },
  'GET /v1/sets': { 400: { path: '/v1/sets?page=abc', key: 'min' }, 404: { path: '/v1/sets?game=no-such-game', key: 'min' } },
  'GET /v1/sets/{id}': { 400: { path: '/v1/sets/0', key: 'min' }, 404: { path: `/v1/sets/${UNKNOWN}`, key: 'min' } },
  'GET /v1/sets/{id}/cards': { 400: { path: `/v1/sets/${setId}/cards?sort=price`, key: 'min' }, 404: { path: `/v1/sets/${UNKNOWN}/cards`, key: 'min' } },
  'GET /v1/sets/{id}/prices': { 400: { path: `/v1/sets/${setId}/prices?type=cards`, key: 'min' }, 404: { path: `/v1/sets/${UNKNOWN}/prices`, key: 'min' } },
  'GET /v1/cards/{id}': { 400: { path: '/v1/cards/1.5', key: 'min' }, 404: { path: `/v1/cards/${UNKNOWN}`, key: 'min' } },
  'GET /v1/cards/marketplace/{marketplaceId}': {
    400: { path: '/v1/cards/marketplace/-1', key: 'min' },
    404: { path: `/v1/cards/marketplace/${UNKNOWN}`, key: 'min' },
  },
  'GET /v1/cards/{id}/prices': { 400: { path: `/v1/cards/${cardId}/prices?printing=Gold`, key: 'min' }, 404: { path: `/v1/cards/${UNKNOWN}/prices`, key: 'min' } },
  'GET /v1/cards/{id}/history': { 400: { path: `/v1/cards/${cardId}/history?range=decade`, key: 'min' }, 404: { path: `/v1/cards/${UNKNOWN}/history`, key: 'min' } },
  'GET /v1/cards/{id}/history/detailed': {
    400: { path: `/v1/cards/${cardId}/history/detailed?printing=Gold`, key: 'min' },
    404: { path: `/v1/cards/${UNKNOWN}/history/detailed`, key: 'min' },
  },
  'GET /v1/search': { 400: { path: '/v1/search?q=a', key: 'min' }, 404: { path: '/v1/search?q=dragon&game=no-such-game', key: 'min' } },
  'GET /v1/prices/top-movers': { 400: { path: '/v1/prices/top-movers?limit=51', key: 'min' }, 404: { path: '/v1/prices/top-movers?game=no-such-game', key: 'min' } },
  'GET /v1/prices/changes': { 400: { path: '/v1/prices/changes?since=yesterday', key: 'min' }, 404: { path: '/v1/prices/changes?since=2026-11-19T00:00:00Z&game=no-such-game', key: 'min' } },
  'GET /v1/bulk/prices': { 400: { path: '/v1/bulk/prices?ids=1,,2', key: 'min' } },
  'GET /v1/cards/{id}/prices/conditions': {
    400: { path: `/v1/cards/${cardId}/prices/conditions?printing=Gold`, key: 'min' },
    404: { path: `/v1/cards/${UNKNOWN}/prices/conditions`, key: 'min' },
    503: { path: `/v1/cards/${unrefreshedCardId}/prices/conditions`, key: 'min', base: upstreamOutageServer.base },
  },
  'GET /v1/bulk/conditions': {
    400: { path: '/v1/bulk/conditions?ids=1,,2', key: 'min' },
    404: { path: `/v1/bulk/conditions?ids=${cardId}`, key: 'min', base: noListingsServer.base },
  },
  'GET /v1/bulk/cards': { 400: { path: '/v1/bulk/cards?ids=', key: 'min' } },
  'GET /v1/bulk/history': { 400: { path: `/v1/bulk/history?ids=${cardId}&range=decade`, key: 'min' } },
  'GET /v1/export/set/{id}': { 400: { path: `/v1/export/set/${setId}?format=xml`, key: 'min' }, 404: { path: `/v1/export/set/${UNKNOWN}`, key: 'min' } },
  'POST /v1/bulk/resolve/marketplace': { 400: { method: 'POST', path: '/v1/bulk/resolve/marketplace', key: 'min', ...json({ ids: [] }) } },
  'POST /v1/bulk/resolve/name': {
    400: { method: 'POST', path: '/v1/bulk/resolve/name', key: 'min', ...json({ names: 'Pikachu' }) },
    404: { method: 'POST', path: '/v1/bulk/resolve/name', key: 'min', ...json({ names: [cardName], game: 'no-such-game' }) },
  },
  'POST /v1/auth/signup': {
    400: { method: 'POST', path: '/v1/auth/signup', ...json({ email: 'not an email', password: 'a long enough password' }) },
    409: { method: 'POST', path: '/v1/auth/signup', ...json({ email: accounts.pro.email, password: 'a long enough password' }) },
  },
  'POST /v1/auth/login': {
    400: { method: 'POST', path: '/v1/auth/login', ...json({ email: accounts.free.email }) },
    401: { method: 'POST', path: '/v1/auth/login', ...json({ email: accounts.free.email, password: 'wrong password' }) },
  },
  'POST /v1/keys': {
    400: { method: 'POST', path: '/v1/keys', cookie: accounts.pro.cookie, ...json({ name: '' }) },
    409: { method: 'POST', path: '/v1/keys', cookie: fullOfKeys.cookie, ...json({ name: 'one too many' }) },
  },
  'DELETE /v1/keys/{keyId}': {
    400: { method: 'DELETE', path: '/v1/keys/0', cookie: accounts.free.cookie },
    404: { method: 'DELETE', path: `/v1/keys/${accounts.pro.keyId}`, cookie: accounts.free.cookie },
  },
  'POST /v1/webhooks': {
    400: { method: 'POST', path: '/v1/webhooks', cookie: accounts.pro.cookie, ...json({ url: 'ftp://example.com', card_id: cardId, condition: 'above', threshold: 25 }) },
    404: { method: 'POST', path: '/v1/webhooks', cookie: accounts.pro.cookie, ...json({ url: 'https://example.com/h', card_id: UNKNOWN, condition: 'above', threshold: 25 }) },
    409: { method: 'POST', path: '/v1/webhooks', cookie: fullOfWebhooks.cookie, ...json({ url: 'https://example.com/h', card_id: cardId, condition: 'below', threshold: 5 }) },
  },
  'DELETE /v1/webhooks/{webhookId}': {
    400: { method: 'DELETE', path: '/v1/webhooks/0', cookie: accounts.pro.cookie },
    404: { method: 'DELETE', path: `/v1/webhooks/${webhook}`, cookie: accounts.business.cookie },
  },
  'GET /v1/webhooks/{webhookId}/deliveries': {
    400: { path: `/v1/webhooks/${webhook}/deliveries?per_page=0`, cookie: accounts.pro.cookie },
    404: { path: `/v1/webhooks/${webhook}/deliveries`, cookie: accounts.business.cookie },
  },
  'POST /v1/webhooks/{webhookId}/test': {
    400: { method: 'POST', path: '/v1/webhooks/abc/test', cookie: accounts.pro.cookie },
    403: { method: 'POST', path: `/v1/webhooks/${webhook}/test`, cookie: accounts.starter.cookie },
    404: { method: 'POST', path: `/v1/webhooks/${UNKNOWN}/test`, cookie: accounts.pro.cookie },
    429: { method: 'POST', path: `/v1/webhooks/${pingedOutWebhook}/test`, cookie: pingedOut.cookie },
  },
}

const operations = Object.entries<Json>(doc.paths).flatMap(([path, methods]) =>
  Object.entries<Json>(methods).map(([method, operation]) => ({ id: `${method.toUpperCase()} ${path}`, operation })),
)

function tierFor(call: Call, operation: Json): string | undefined {
  const min = TIERS.find((tier) => TIER_POLICY[tier].label === operation['x-min-tier'])
  if (call.key === 'exhausted') return exhausted.key
  if (call.key === 'min') return accounts[min!].key
  if (call.key === 'below') return accounts[TIERS[TIERS.indexOf(min!) - 1]!].key
  return call.key && accounts[call.key].key
}

async function send(call: Call, operation: Json): Promise<Response> {
  const headers: Record<string, string> = { ...call.headers }
  const key = tierFor(call, operation)
  if (key) headers['x-api-key'] = key
  if (call.cookie) headers.cookie = call.cookie
  const text = call.body === undefined ? undefined : typeof call.body === 'string' ? call.body : JSON.stringify(call.body)
  // A stalled upload: its first half, then silence (the stream is never closed).
  const body = call.stallBody && text ? new ReadableStream({ start: (controller) => controller.enqueue(new TextEncoder().encode(text.slice(0, text.length >> 1))) }) : text
  return fetch((call.base ?? server.base) + call.path, { method: call.method ?? 'GET', headers, body, ...(call.stallBody ? { duplex: 'half' } : {}) } as RequestInit)
}

/** The call that should answer `status`, from the table or derived from the success call. */
async function callFor(id: string, operation: Json, status: number): Promise<Call | undefined> {
  const success = SUCCESS[id]
  const explicit = REFUSALS[id]?.[status]
  if (explicit || !success) return explicit
  if (status === 200 || status === 201) return success
  const keyed = success.key !== undefined
  if (status === 401) return keyed ? { ...success, key: undefined } : success.cookie ? { ...success, cookie: undefined } : undefined
  if (status === 403 && keyed) return { ...success, key: 'below' }
  if (status === 403) return { ...success, headers: { ...success.headers, origin: 'https://elsewhere.example' } }
  if (status === 408) return { ...success, base: slowBodyServer.base, stallBody: true }
  if (status === 413) return { ...success, body: JSON.stringify(success.body) + ' '.repeat(MAX_BODY_BYTES) }
  if (status === 415) return { ...success, body: 'name=x', headers: { 'content-type': 'text/plain' } }
  if (status === 429 && keyed) return { ...success, key: 'exhausted' }
  if (status === 503) return { ...success, base: outageServer.base }
  if (status === 304) {
    const first = await send(success, operation)
    await first.arrayBuffer()
    return { ...success, headers: { ...success.headers, 'if-none-match': first.headers.get('etag') ?? 'none' } }
  }
  return undefined
}

const ajv = new Ajv2020({ strict: false, allErrors: true, validateSchema: false })
addFormats(ajv)
ajv.addSchema(doc, 'openapi.json')
const pointer = (...parts: string[]) => parts.map((part) => part.replaceAll('~', '~0').replaceAll('/', '~1')).join('/')
const schemaAt = (...parts: string[]) => ajv.compile({ $ref: `openapi.json#/${pointer(...parts)}` })

const examples: Record<string, unknown> = {}
/** Each operation's success answer, whole. */
const answers: Record<string, unknown> = {}

/** Arrays cut to two items (and objects keyed by card id to two keys): an example, not a dump. */
function trimmed(value: unknown): unknown {
  if (Array.isArray(value)) return value.slice(0, 2).map(trimmed)
  if (value === null || typeof value !== 'object') return value
  const entries = Object.entries(value)
  const byId = entries.length > 2 && entries.every(([name]) => /^\d+$/.test(name))
  return Object.fromEntries((byId ? entries.slice(0, 2) : entries).map(([name, item]) => [name, trimmed(item)]))
}

describe('the OpenAPI document', () => {
  test('is a valid OpenAPI 3.1 document', async () => {
    const result = await new Validator().validate(doc)
    expect(result.errors).toBeUndefined()
    expect(result.valid).toBe(true)
    expect(doc.openapi).toStartWith('3.1.')
  }, 30_000) // CPU-bound validation of the whole document

  test('every $ref resolves inside the document', () => {
    const refs: string[] = []
    const walk = (node: Json) => {
      if (node === null || typeof node !== 'object') return
      if (typeof node.$ref === 'string') refs.push(node.$ref)
      Object.values(node).forEach(walk)
    }
    walk(doc)
    expect(refs.length).toBeGreaterThan(20)
    for (const ref of refs) {
      expect(ref).toStartWith('#/')
      const target = ref
        .slice(2)
        .split('/')
        .reduce((node: Json, part) => node?.[part.replaceAll('~1', '/').replaceAll('~0', '~')], doc)
      expect(target, ref).toBeObject()
    }
    const ids: string[] = []
    const findIds = (node: Json) => {
      if (node === null || typeof node !== 'object') return
      if ('$id' in node) ids.push(node.$id)
      Object.values(node).forEach(findIds)
    }
    findIds(doc)
    expect(ids).toEqual([])
  })

  test('names the package version and a server', async () => {
    const { version } = await Bun.file(join(import.meta.dir, '../../package.json')).json()
    expect(doc.info.version).toBe(version)
    expect(doc.servers).toEqual([{ url: '/', description: expect.any(String) }])
  })

  test('describes every operation and parameter, and types integers as integer', () => {
    expect(operations.length).toBeGreaterThanOrEqual(31)
    for (const { id, operation } of operations) {
      expect(operation.summary, id).toBeString()
      expect(operation.description?.length ?? 0, `${id} has no description`).toBeGreaterThan(20)
      for (const parameter of operation.parameters ?? []) {
        expect(parameter.description?.length ?? 0, `${id} ${parameter.name} has no description`).toBeGreaterThan(5)
        expect(parameter.schema.multipleOf, `${id} ${parameter.name}`).toBeUndefined()
      }
    }
    const idParameter = doc.paths['/v1/cards/{id}'].get.parameters.find((p: Json) => p.name === 'id')
    expect(idParameter.schema.type).toBe('integer')
  })

  test('states what each operation needs: the tier of a key, the session cookie, or nothing', () => {
    for (const { id, operation } of operations) {
      const schemes = (operation.security ?? []).flatMap((scheme: Json) => Object.keys(scheme))
      if (schemes.includes('ApiKey')) {
        expect(TIERS.map((tier) => TIER_POLICY[tier].label), id).toContain(operation['x-min-tier'])
        expect(operation.description, id).toStartWith('**Auth:** an API key on ')
      } else if (schemes.includes('Session')) {
        expect(operation.description, id).toStartWith('**Auth:** the `session` cookie')
      } else {
        expect(operation['x-min-tier'], id).toBeUndefined()
      }
    }
    expect(doc.paths['/v1/bulk/history'].get['x-min-tier']).toBe('Business')
    expect(doc.paths['/v1/sets/{id}/prices'].get.description).toContain('the **Pro** tier or higher')
  })

  test('gives every success answer an example that fits its schema', () => {
    for (const { id, operation } of operations) {
      const status = operation.responses['200'] ? '200' : '201'
      const media = operation.responses[status]?.content?.['application/json']
      expect(media?.example, `${id} has no example`).toBeDefined()
      const validate = schemaAt('paths', id.slice(id.indexOf(' ') + 1), id.split(' ')[0]!.toLowerCase(), 'responses', status, 'content', 'application/json', 'schema')
      expect(validate(media.example) ? [] : validate.errors, id).toEqual([])
    }
  }, 30_000)
})

describe('every declared answer of every operation matches the document', () => {
  test('each operation has a success call in this test', () => {
    expect(operations.map(({ id }) => id).filter((id) => !SUCCESS[id])).toEqual([])
  })

  for (const { id, operation } of operations) {
    const [method, path] = id.split(' ') as [string, string]
    for (const status of Object.keys(operation.responses).map(Number)) {
      // Their own tests below: they take repeated attempts.
      if ((id === 'POST /v1/auth/login' || id === 'POST /v1/auth/signup') && status === 429) continue
      const needsRedis = status === 429 && SUCCESS[id]?.key !== undefined
      test.skipIf(needsRedis && !TEST_REDIS_URL)(`${id} → ${status}`, async () => {
        const call = await callFor(id, operation, status)
        expect(call, `no call in this test yields ${status}`).toBeDefined()
        const response = await send(call!, operation)
        const text = await response.text()
        expect({ status: response.status, body: text.slice(0, 300) }).toMatchObject({ status })
        const declared = operation.responses[String(status)]
        for (const header of Object.keys(declared.headers ?? {})) {
          expect(response.headers.get(header), `header ${header}`).not.toBeNull()
        }
        if (!declared.content) {
          expect(text).toBe('')
          return
        }
        const mediaType = (response.headers.get('content-type') ?? '').split(';')[0]!.trim()
        expect(Object.keys(declared.content)).toContain(mediaType)
        if (mediaType !== 'application/json') return
        const body = JSON.parse(text)
        const validate = schemaAt('paths', path, method.toLowerCase(), 'responses', String(status), 'content', mediaType, 'schema')
        expect(validate(body) ? [] : validate.errors).toEqual([])
        if (status < 300) {
          examples[id] = trimmed(body)
          answers[id] = body
        }
      }, 20_000)
    }
  }

  test("the answers checked carry a real source's gaps as null, and images both known and not", () => {
    const carriesNull = (id: string, field: string) => JSON.stringify(answers[id]).includes(`"${field}":null`)
    const gaps: [string, string][] = [
      ['GET /v1/cards/{id}', 'total_listings'],
      ['GET /v1/cards/{id}/prices', 'low_price'],
      ['GET /v1/cards/marketplace/{marketplaceId}', 'median_price'],
      ['GET /v1/sets/{id}/prices', 'lowest_with_shipping'],
      ['GET /v1/bulk/prices', 'market_price'],
      ['GET /v1/bulk/prices', 'low_price'],
      ['GET /v1/bulk/cards', 'lowest_with_shipping'],
      ['GET /v1/cards/{id}/history', 'low_price'],
      ['GET /v1/cards/{id}/history/detailed', 'low_price'],
      ['GET /v1/bulk/history', 'low_price'],
      ['GET /v1/export/set/{id}', 'median_price'],
      ['POST /v1/bulk/resolve/marketplace', 'low_price'],
      ['GET /v1/games', 'image_url'],
      ['GET /v1/games/{slug}/sets', 'image_url'],
    ]
    expect(gaps.filter(([id, field]) => !carriesNull(id, field))).toEqual([])
    const images = (id: string) => (answers[id] as Json).data.map((item: Json) => typeof item.image_url)
    expect(images('GET /v1/games')).toContain('string')
    expect(images('GET /v1/games/{slug}/sets')).toContain('string')
    expect((answers['GET /v1/games/{slug}'] as Json).data.image_url).toBeString()
  })

  test('the login refusal after repeated failures matches the document', async () => {
    const operation = doc.paths['/v1/auth/login'].post
    const guess = { method: 'POST', path: '/v1/auth/login', ...json({ email: accounts.hobby.email, password: 'a wrong guess' }) }
    let response: Response | undefined
    for (let attempt = 0; attempt < 11 && response?.status !== 429; attempt++) response = await send(guess, operation)
    expect(response!.status).toBe(429)
    expect(response!.headers.get('retry-after')).not.toBeNull()
    const validate = schemaAt('paths', '/v1/auth/login', 'post', 'responses', '429', 'content', 'application/json', 'schema')
    expect(validate(await response!.json()) ? [] : validate.errors).toEqual([])
  }, 60_000) // a password check per guess

  test('the sign-up refusal after too many sign-ups from an address matches the document', async () => {
    const operation = doc.paths['/v1/auth/signup'].post
    let response: Response | undefined
    for (let attempt = 0; attempt <= SIGNUP_THROTTLE.refuseAt && response?.status !== 429; attempt++) {
      response = await send({ method: 'POST', path: '/v1/auth/signup', ...json({ email: `throttled-${attempt}@example.com`, password: 'a long enough password' }) }, operation)
    }
    expect(response!.status).toBe(429)
    expect(response!.headers.get('retry-after')).not.toBeNull()
    const validate = schemaAt('paths', '/v1/auth/signup', 'post', 'responses', '429', 'content', 'application/json', 'schema')
    expect(validate(await response!.json()) ? [] : validate.errors).toEqual([])
  }, 30_000) // a password hash per sign-up

  test('the other media types a success answer lists are what the operation sends', async () => {
    let checked = 0
    for (const { id, operation } of operations) {
      const [method, path] = id.split(' ') as [string, string]
      const status = operation.responses['200'] ? '200' : '201'
      for (const type of Object.keys(operation.responses[status].content ?? {}).filter((type) => type !== 'application/json')) {
        const success = SUCCESS[id]!
        const call =
          type === 'text/csv'
            ? { ...success, path: `${success.path}${success.path.includes('?') ? '&' : '?'}format=csv` }
            : { ...success, headers: { ...success.headers, accept: type } }
        const response = await send(call, operation)
        expect(response.status, `${id} as ${type}`).toBe(Number(status))
        expect(response.headers.get('content-type')?.split(';')[0], id).toBe(type)
        const bytes = new Uint8Array(await response.arrayBuffer())
        const body = type.includes('msgpack') ? unpack(bytes) : new TextDecoder().decode(bytes)
        const validate = schemaAt('paths', path, method.toLowerCase(), 'responses', status, 'content', type, 'schema')
        expect(validate(body) ? [] : validate.errors, `${id} as ${type}`).toEqual([])
        checked++
      }
    }
    expect(checked).toBeGreaterThanOrEqual(7)
  }, 30_000)

  if (process.env.UPDATE_EXAMPLES === '1') {
    afterAll(() => {
      if (Object.keys(examples).length !== operations.length) throw new Error('not every operation answered: examples left as they were')
      const sorted = Object.fromEntries(Object.entries(examples).sort(([a], [b]) => a.localeCompare(b)))
      writeFileSync(join(import.meta.dir, '../../src/modules/docs/examples.json'), `${JSON.stringify(sorted, null, 2)}\n`)
    })
  }
})
