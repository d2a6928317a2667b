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
import { TIER_POLICY, TIERS, type Tier } from '../../src/modules/auth/tiers'
import { createHttpSource } from '../../src/modules/ingest/sources/http'
import { MAX_WEBHOOKS, PING_LIMIT } from '../../src/modules/webhooks/service'
import { systemResolver } from '../../src/modules/webhooks/target-guard'
import { utcDate } from '../../src/shared/clock'
import { startFakeMarketplace } from '../fixtures/fake-marketplace'
import { startWebhookReceiver } from '../fixtures/webhook-receiver'
import { accountWithKey, type TestAccount, testRedis } from '../helpers/auth'
import { freshDatabase, PRIMARY_PRINTING_FIRST, selectRows, testClock, testLogger, tinySource } from '../helpers/db'
import { TEST_NOW, TEST_REDIS_URL } from '../helpers/env'
import { startServer } from '../helpers/server'
import { declaredSource, NO_LISTINGS } from '../helpers/sources'
import { testWebhookSettings } from '../helpers/webhooks'

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

// What a real source leaves out is null (docs/adr/0094-a-real-source-s-gaps-are-null.md), so the
// answers checked below carry such nulls, written before the server builds its price snapshot: the
// fixture card's listing count, its second printing's listing prices and buylist (and their
// history), and the next card's primary printing, never sold. The demo marketplace gives games and
// sets images (and most a logo or icon): a game listed first and the fixture game's newest set lose
// theirs, as from a source without them, so the answers carry both.
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
await database.db.execute(sql`update games set image_url = null, logo_url = null
                              where id = (select id from games where slug <> ${gameSlug} order by priority desc, name, id limit 1)`)
await database.db.execute(sql`update sets set image_url = null, set_icon_url = null
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
  'GET /': { path: '/' },
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
  'GET /v1/cards/autocomplete': { path: `/v1/cards/autocomplete?q=${encodeURIComponent(cardName.slice(0, 4))}`, key: 'min' },
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
  'DELETE /v1/keys/{keyId}': { method: 'DELETE', path: `/v1/keys/${revocable.publicId}`, cookie: accounts.free.cookie },
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
  'GET /': { 302: { path: '/', headers: { accept: 'text/html,application/xhtml+xml,*/*;q=0.8' } } },
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
  'GET /v1/cards/autocomplete': { 400: { path: '/v1/cards/autocomplete?q=a', key: 'min' }, 404: { path: '/v1/cards/autocomplete?q=dr&game=no-such-game', key: 'min' } },
  'GET /v1/prices/top-movers': { 400: { path: '/v1/prices/top-movers?limit=51', key: 'min' }, 404: { path: '/v1/prices/top-movers?game=no-such-game', key: 'min' } },
  'GET /v1/prices/changes': {
    400: { path: '/v1/prices/changes?since=yesterday', key: 'min' },
    404: { path: '/v1/prices/changes?since=2026-11-19T00:00:00Z&game=no-such-game', key: 'min' },
  },
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
    404: { method: 'DELETE', path: `/v1/keys/${accounts.pro.publicKeyId}`, cookie: accounts.free.cookie },
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
  // A redirect is an answer to check, not to follow.
  return fetch((call.base ?? server.base) + call.path, {
    method: call.method ?? 'GET',
    headers,
    body,
    redirect: 'manual',
    ...(call.stallBody ? { duplex: 'half' } : {}),
  } as RequestInit)
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

/** Calls `visit` on every object and array under `node`, with its JSON pointer. */
function walk(node: Json, at: string, visit: (node: Json, at: string) => void): void {
  if (node === null || typeof node !== 'object') return
  visit(node, at)
  for (const [key, value] of Object.entries(node)) walk(value, `${at}/${pointer(key)}`, visit)
}

/** The schema a `$ref` (or a chain of them) points to. */
function resolved(schema: Json): Json {
  while (typeof schema?.$ref === 'string') {
    schema = schema.$ref
      .slice(2)
      .split('/')
      .reduce((node: Json, part: string) => node?.[part.replaceAll('~1', '/').replaceAll('~0', '~')], doc)
  }
  return schema
}

// An optional property is one a client must be told about: its description, or its object's next
// to its name, says when it is there (docs/adr/0088-every-answer-field-is-required-unless-said.md).
const SAYS_WHEN = /\b(present|absent|omitted)\b/i
const explainsAbsence = (name: string, property: Json, object: Json) =>
  SAYS_WHEN.test(resolved(property)?.description ?? '') || (SAYS_WHEN.test(object.description ?? '') && (object.description as string).includes(`\`${name}\``))

const branchValidators = new Map<Json, (value: unknown) => boolean>()
/** Whether `value` fits `schema`, a part of the document (its `$ref`s point into the document). */
function fits(schema: Json, value: unknown): boolean {
  let validate = branchValidators.get(schema)
  if (!validate) {
    validate = ajv.compile(JSON.parse(JSON.stringify(schema).replaceAll('"$ref":"#/', '"$ref":"openapi.json#/'))) as (value: unknown) => boolean
    branchValidators.set(schema, validate)
  }
  return validate(value)
}

/**
 * The fields of a real answer the document leaves loose: carried but not declared, or declared
 * optional without saying when they are absent. Walks the answer beside its schema, into the
 * union branches the value matches and every item and entry of arrays and maps.
 */
function looseFields(schema: Json, value: unknown, at: string, found: Set<string>): void {
  schema = resolved(schema)
  const branches: Json[] | undefined = schema.anyOf ?? schema.oneOf
  if (branches) {
    for (const branch of branches.filter((branch) => fits(branch, value))) looseFields(branch, value, at, found)
    return
  }
  for (const part of schema.allOf ?? []) looseFields(part, value, at, found)
  if (Array.isArray(value)) {
    if (schema.items) value.forEach((item) => looseFields(schema.items, item, `${at}[]`, found))
    return
  }
  if (value === null || typeof value !== 'object') return
  for (const [name, item] of Object.entries(value)) {
    const property = schema.properties?.[name]
    const pattern = Object.keys(schema.patternProperties ?? {}).find((source) => new RegExp(source, 'u').test(name))
    if (property) {
      if (!(schema.required ?? []).includes(name) && !explainsAbsence(name, property, schema)) found.add(`${at}.${name}: optional, and no description says when it is absent`)
      looseFields(property, item, `${at}.${name}`, found)
    } else if (pattern !== undefined) looseFields(schema.patternProperties[pattern], item, `${at}{}`, found)
    else if (typeof schema.additionalProperties === 'object') looseFields(schema.additionalProperties, item, `${at}{}`, found)
    else if (schema.type === 'object' || schema.properties) found.add(`${at}.${name}: not declared`)
  }
}

/** `value` without the property at `path` (array steps are indexes). */
function without(value: unknown, path: (string | number)[]): unknown {
  const copy = structuredClone(value) as Json
  const parent = path.slice(0, -1).reduce((node: Json, step) => node?.[step], copy)
  if (parent === null || typeof parent !== 'object' || !(path.at(-1)! in parent)) throw new Error(`nothing at ${path.join('.')}`)
  delete parent[path.at(-1)!]
  return copy
}

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
        expect(
          TIERS.map((tier) => TIER_POLICY[tier].label),
          id,
        ).toContain(operation['x-min-tier'])
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

  test('closed values are enums (a dropdown in Swagger UI), never a union of literals; open ones stay strings', () => {
    const unions: string[] = []
    walk(doc, '#', (node, at) => {
      if (Array.isArray(node.anyOf) && node.anyOf.some((member: Json) => member !== null && typeof member === 'object' && 'const' in member)) unions.push(at)
    })
    expect(unions).toEqual([])
    const parameter = (path: string, name: string) => doc.paths[path].get.parameters.find((p: Json) => p.name === name)?.schema
    const types = ['Cards', 'Sealed Products']
    const closed: [string, string, string[]][] = [
      ['/v1/prices/top-movers', 'direction', ['up', 'down']],
      ['/v1/prices/top-movers', 'period', ['24h', '7d', '30d']],
      ['/v1/prices/top-movers', 'type', types],
      ['/v1/sets/{id}/cards', 'type', types],
      ['/v1/sets/{id}/cards', 'sort', ['number', 'name', 'price_asc', 'price_desc']],
      ['/v1/sets/{id}/prices', 'type', types],
      ['/v1/search', 'type', types],
      ['/v1/search', 'sort', ['relevance', 'price_asc', 'price_desc', 'name']],
      ['/v1/cards/{id}/history', 'range', ['month', 'quarter', 'year', 'all']],
      ['/v1/bulk/history', 'range', ['month', 'quarter', 'year']],
      ['/v1/export/set/{id}', 'format', ['json', 'csv']],
    ]
    // Read, not matched with toMatchObject: Bun 1.4's asymmetric matchers there rewrite the array they match.
    const shape = (schema: Json) => ({ type: schema?.type, enum: schema?.enum })
    for (const [path, name, values] of closed) {
      const { type, enum: listed } = shape(parameter(path, name))
      expect({ type, missing: values.filter((value) => !listed?.includes(value)) }, `${path} ${name}`).toEqual({ type: 'string', missing: [] })
    }
    const webhookBody = resolved(doc.paths['/v1/webhooks'].post.requestBody.content['application/json'].schema)
    expect(shape(webhookBody.properties.condition)).toEqual({ type: 'string', enum: ['above', 'below'] })
    // A printing's name depends on the game: an open set, a string.
    expect(shape(parameter('/v1/prices/top-movers', 'printing'))).toEqual({ type: 'string', enum: undefined })
  })

  test('the introduction says which endpoints are public, which take the session cookie and which an API key', () => {
    const intro: string = doc.info.description
    const part = (start: string) => {
      const from = intro.indexOf(start)
      expect(from, start).toBeGreaterThanOrEqual(0)
      const next = intro.indexOf('\n- **', from + 1)
      return intro.slice(from, next < 0 ? intro.indexOf('\n\n', from) : next)
    }
    const open = part('- **Nothing (public):**')
    const session = part('- **The `session` cookie**')
    const keyed = part('- **An API key** in the `X-API-Key` header')
    expect(keyed).toContain('every other `/v1` endpoint')
    for (const { id, operation } of operations) {
      const [method, path] = id.split(' ') as [string, string]
      const schemes = (operation.security ?? []).flatMap((scheme: Json) => Object.keys(scheme))
      const named = (text: string) => text.includes(`\`${method} ${path}\``) || text.includes(`\`${path}\``) || text.includes(`\`${path.split('/').slice(0, 3).join('/')}\``)
      if (schemes.includes('Session')) expect(named(session), `${id} in the session cookie's list`).toBe(true)
      else if (!schemes.includes('ApiKey')) expect(named(open), `${id} in the public list`).toBe(true)
      else expect(named(open) || named(session), `${id} is keyed`).toBe(false)
    }
    // The seeded test server runs the demo source.
    expect(intro).toContain('**Demo data.**')
  })

  test('no description or summary speaks of the specification or of how the service was made', () => {
    const internal = /\bspec\b|\bspec['’]s|specification|superset|fidelity|\bissue #?\d/i
    const found: string[] = []
    walk(doc, '#', (node, at) => {
      for (const key of ['description', 'summary', 'title']) {
        if (typeof node[key] === 'string' && internal.test(node[key])) found.push(`${at}/${key}: ${node[key].slice(0, 120)}`)
      }
    })
    expect(found).toEqual([])
  })

  test('every property of a response object is required, unless its description says when it is absent', () => {
    const loose: string[] = []
    const check = (schema: Json, at: string) =>
      walk(schema, at, (node, where) => {
        if (!node.properties || Array.isArray(node)) return
        for (const [name, property] of Object.entries<Json>(node.properties)) {
          if (!(node.required ?? []).includes(name) && !explainsAbsence(name, property, node)) loose.push(`${where}/properties/${name}`)
        }
      })
    check(doc.components.schemas, '#/components/schemas')
    for (const { id, operation } of operations) {
      for (const [status, response] of Object.entries<Json>(operation.responses)) {
        for (const [type, media] of Object.entries<Json>(response.content ?? {})) check(media.schema, `${id} ${status} ${type}`)
      }
    }
    expect(loose).toEqual([])
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
      test.skipIf(needsRedis && !TEST_REDIS_URL)(
        `${id} → ${status}`,
        async () => {
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
        },
        20_000,
      )
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
      ['GET /v1/games', 'logo_url'],
      ['GET /v1/games/{slug}/sets', 'image_url'],
      ['GET /v1/games/{slug}/sets', 'set_icon_url'],
      ['GET /v1/sets', 'set_icon_url'],
    ]
    expect(gaps.filter(([id, field]) => !carriesNull(id, field))).toEqual([])
    const images = (id: string, field = 'image_url') => (answers[id] as Json).data.map((item: Json) => typeof item[field])
    expect(images('GET /v1/games')).toContain('string')
    expect(images('GET /v1/games', 'logo_url')).toContain('string')
    expect(images('GET /v1/games/{slug}/sets')).toContain('string')
    expect(images('GET /v1/games/{slug}/sets', 'set_icon_url')).toContain('string')
    expect((answers['GET /v1/games/{slug}'] as Json).data.image_url).toBeString()
    expect((answers['GET /v1/games/{slug}'] as Json).data.logo_url).toBeString()
  })

  test("a sealed product's number is null wherever it is answered, as the document allows", async () => {
    const [sealed] = await selectRows<{ id: number; set_id: number; marketplace_id: number }>(
      database.db,
      sql`select id, set_id, marketplace_id from cards where product_type = 'Sealed Products' order by id limit 1`,
    )
    const calls: [string, string][] = [
      ['/v1/cards/{id}', `/v1/cards/${sealed!.id}`],
      ['/v1/cards/marketplace/{marketplaceId}', `/v1/cards/marketplace/${sealed!.marketplace_id}`],
      ['/v1/sets/{id}/cards', `/v1/sets/${sealed!.set_id}/cards?type=Sealed%20Products`],
    ]
    for (const [path, url] of calls) {
      const response = await send({ path: url, key: 'min' }, doc.paths[path].get)
      expect(response.status, url).toBe(200)
      const body = await response.json()
      expect(JSON.stringify(body), url).toContain('"number":null')
      const validate = schemaAt('paths', path, 'get', 'responses', '200', 'content', 'application/json', 'schema')
      expect(validate(body) ? [] : validate.errors, url).toEqual([])
    }
  })

  test('every field of every success answer is declared, and required unless its description says when it is absent', () => {
    const loose = new Set<string>()
    for (const { id, operation } of operations) {
      const status = operation.responses['200'] ? '200' : '201'
      expect(answers[id], `${id} answered`).toBeDefined()
      looseFields(operation.responses[status].content['application/json'].schema, answers[id], id, loose)
    }
    expect([...loose]).toEqual([])
  }, 30_000)

  test('a value outside an enum is a 400 that names every allowed value', async () => {
    let checked = 0
    const refusal = async (id: string, operation: Json, call: Call, field: string, values: unknown[]) => {
      const response = await send(call, operation)
      const body = (await response.json()) as Json
      expect({ id, status: response.status, details: body.error?.details }).toEqual({
        id,
        status: 400,
        details: [{ field, message: `must be one of: ${values.join(', ')}` }],
      })
      checked++
    }
    for (const { id, operation } of operations) {
      const success = SUCCESS[id]!
      for (const parameter of operation.parameters ?? []) {
        if (parameter.in !== 'query' || !Array.isArray(parameter.schema?.enum)) continue
        const url = new URL(success.path, 'http://localhost')
        url.searchParams.set(parameter.name, 'not-a-choice')
        await refusal(id, operation, { ...success, path: url.pathname + url.search }, parameter.name, parameter.schema.enum)
      }
      const body = resolved(operation.requestBody?.content?.['application/json']?.schema)
      for (const [name, property] of Object.entries<Json>(body?.properties ?? {})) {
        if (Array.isArray(resolved(property).enum))
          await refusal(id, operation, { ...success, body: { ...(success.body as object), [name]: 'not-a-choice' } }, name, resolved(property).enum)
      }
    }
    expect(checked).toBeGreaterThanOrEqual(12)
  }, 30_000)

  test('the fields clients of the public service read are in the answers, and an answer without one fails its schema', async () => {
    const schemaOf = (id: string) => {
      const [method, path] = id.split(' ') as [string, string]
      const status = doc.paths[path][method.toLowerCase()].responses['200'] ? '200' : '201'
      return schemaAt('paths', path, method.toLowerCase(), 'responses', status, 'content', 'application/json', 'schema')
    }
    // A Pro key's card prices carry the sales fields (a lower tier's do not).
    const proPrices = await send({ ...SUCCESS['GET /v1/cards/{id}/prices']!, key: 'pro' }, doc.paths['/v1/cards/{id}/prices'].get)
    const withSales: Record<string, unknown> = { ...answers, 'GET /v1/cards/{id}/prices (Pro)': await proPrices.json() }
    const first = (value: Json) => (Array.isArray(value) ? [0] : [])
    const fields: [string, (answer: Json) => (string | number)[][]][] = [
      ['GET /v1/games', () => ['marketplace_id', 'image_url', 'logo_url'].map((field) => ['data', 0, field])],
      ['GET /v1/games/{slug}', () => ['marketplace_id', 'image_url', 'logo_url'].map((field) => ['data', field])],
      ['GET /v1/games/{slug}/sets', () => ['marketplace_id', 'image_url', 'set_icon_url'].map((field) => ['data', 0, field])],
      ['GET /v1/sets', () => ['marketplace_id', 'image_url', 'set_icon_url'].map((field) => ['data', 0, field])],
      ['GET /v1/sets/{id}', () => ['marketplace_id', 'image_url', 'set_icon_url'].map((field) => ['data', field])],
      ...[
        'GET /v1/cards/{id}/history',
        'GET /v1/cards/{id}/history/detailed',
        'GET /v1/prices/top-movers',
        'GET /v1/bulk/prices',
        'GET /v1/bulk/cards',
        'GET /v1/bulk/conditions',
        'GET /v1/bulk/history',
        'GET /v1/export/set/{id}',
      ].map((id) => [id, () => [['meta', 'total']]] as [string, () => (string | number)[][]]),
      ['GET /v1/bulk/prices', () => [['meta', 'unpriced']]],
      ['GET /v1/cards/{id}/prices (Pro)', (answer) => ['sales_volume', 'avg_sales_price', 'sales_as_of'].map((field) => ['data', ...first(answer.data), field])],
    ]
    const problems: string[] = []
    for (const [id, pathsOf] of fields) {
      const answer = withSales[id] as Json
      const validate = schemaOf(id.replace(' (Pro)', ''))
      for (const path of pathsOf(answer)) {
        const parent = path.slice(0, -1).reduce((node: Json, step) => node?.[step], answer)
        if (parent === null || typeof parent !== 'object' || !(path.at(-1)! in parent)) problems.push(`${id}: no ${path.join('.')}`)
        // The sales fields are absent below Pro, which one schema for every tier cannot require: their
        // presence is checked above, and the description saying so by the test of optional fields.
        else if (!id.endsWith('(Pro)') && validate(without(answer, path))) problems.push(`${id}: an answer without ${path.join('.')} still fits the document`)
      }
    }
    // Below Pro they are absent, not null.
    const freePrices = (answers['GET /v1/cards/{id}/prices'] as Json).data
    for (const field of ['sales_volume', 'avg_sales_price', 'sales_as_of']) {
      if ([freePrices].flat().some((price: Json) => field in price)) problems.push(`GET /v1/cards/{id}/prices below Pro: carries ${field}`)
    }
    // Key ids are strings, `key_` and 32 hex digits, wherever a key is shown.
    const keyIdsOf: [string, (answer: Json) => unknown[]][] = [
      ['GET /v1/keys', (answer) => answer.data.map((key: Json) => key.id)],
      ['POST /v1/keys', (answer) => [answer.data.id]],
      ['GET /v1/usage', (answer) => answer.data.keys.map((key: Json) => key.id)],
    ]
    for (const [id, idsOf] of keyIdsOf) {
      const ids = idsOf(answers[id] as Json)
      if (ids.length === 0 || !ids.every((keyId) => typeof keyId === 'string' && /^key_[0-9a-f]{32}$/.test(keyId))) problems.push(`${id}: key ids are not key_ strings`)
    }
    expect(problems).toEqual([])
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
