import { afterAll, describe, expect, test } from 'bun:test'
import { sql } from 'drizzle-orm'
import fc from 'fast-check'
import { Webhook } from 'standardwebhooks'
import { startWebhookReceiver } from '../../../test/fixtures/webhook-receiver'
import { accountWithKey, type TestAccount } from '../../../test/helpers/auth'
import { freshDatabase, PRIMARY_PRINTING_FIRST, selectRows, testLogger } from '../../../test/helpers/db'
import { startServer } from '../../../test/helpers/server'
import { testWebhookSettings } from '../../../test/helpers/webhooks'
import { systemClock } from '../../shared/clock'
import { setTier } from '../auth/accounts'
import type { Tier } from '../auth/tiers'
import { recordAttempt } from './attempts-repo'
import { DELIVERY_TIMEOUT_MS } from './send'
import { initiallyArmed, MAX_WEBHOOKS, PING_LIMIT } from './service'
import { systemResolver } from './target-guard'

// Webhook management over real HTTP on the seeded catalog. The servers run on the real clock: test
// pings are verified with the Standard Webhooks library, which checks the signed timestamp
// against the time now.
const { db } = await freshDatabase('seeded')
const settings = await testWebhookSettings()
const server = startServer({ db, redis: undefined, logger: testLogger, clock: systemClock, webhooks: settings })
const receiver = await startWebhookReceiver()
afterAll(() => receiver.stop(), 30_000)
const RECEIVER_URL = `${receiver.url}/hooks`

const json = async (response: Response) => (await response.json()) as any

function send(base: string, method: string, path: string, options: { body?: unknown; cookie?: string; headers?: Record<string, string> } = {}) {
  const headers: Record<string, string> = { ...options.headers }
  if (options.cookie) headers.cookie = options.cookie
  if (options.body !== undefined && !headers['content-type']) headers['content-type'] = 'application/json'
  const body = options.body === undefined ? undefined : typeof options.body === 'string' ? options.body : JSON.stringify(options.body)
  return fetch(base + path, { method, headers, body })
}
const call = (method: string, path: string, options?: Parameters<typeof send>[3]) => send(server.base, method, path, options)

const account = (tier: Tier = 'pro') => accountWithKey(db, tier, systemClock.now())

/** A card and its primary printing's market price, found with the test oracle for the primary printing. */
const [priced] = await selectRows<{ card_id: number; name: string; price: number }>(
  db,
  sql`select distinct on (c.id) c.id as card_id, c.name, cp.market_price as price
      from cards c join games g on g.id = c.game_id join card_prices cp on cp.card_id = c.id
      where cp.market_price is not null
        and (select count(distinct market_price) from card_prices where card_id = c.id) > 1
      order by c.id, ${PRIMARY_PRINTING_FIRST} limit 1`,
)
const card = priced!
const CARD_ID = card.card_id
const UNKNOWN_CARD = 2_000_000_000

const validBody = (overrides: Record<string, unknown> = {}) => ({ url: RECEIVER_URL, card_id: CARD_ID, condition: 'above', threshold: 25, ...overrides })

async function create(who: TestAccount, overrides: Record<string, unknown> = {}) {
  const response = await call('POST', '/v1/webhooks', { cookie: who.cookie, body: validBody(overrides) })
  expect(response.status).toBe(201)
  return (await json(response)).data
}

const list = async (who: TestAccount) => (await json(await call('GET', '/v1/webhooks', { cookie: who.cookie }))).data

describe('create', () => {
  test('answers the webhook and its secret once; the list shows it without the secret', async () => {
    const owner = await account('pro')
    const response = await call('POST', '/v1/webhooks', { cookie: owner.cookie, body: validBody({ condition: 'below', threshold: 12.5 }) })
    expect(response.status).toBe(201)
    const created = (await json(response)).data
    expect(created).toEqual({
      id: expect.any(Number),
      url: RECEIVER_URL,
      card_id: CARD_ID,
      card_name: card.name,
      condition: 'below',
      threshold: 12.5,
      is_active: 1,
      created_at: expect.any(String),
      secret: expect.stringMatching(/^whsec_[A-Za-z0-9+/]{43}=$/),
      message: expect.stringContaining('only once'),
    })
    expect(Buffer.from(created.secret.slice('whsec_'.length), 'base64')).toHaveLength(32)
    expect(Date.parse(created.created_at)).toBeGreaterThan(systemClock.now().getTime() - 60_000)

    const listed = await list(owner)
    const { secret: _, message: __, ...fields } = created
    expect(listed).toEqual([{ ...fields, last_triggered_at: null, last_delivery: null, disabled_at: null, disabled_reason: null }])
    expect(JSON.stringify(listed)).not.toContain(created.secret)
  })

  test('the secret is stored only sealed: the column does not contain it and opens to it with the box', async () => {
    const owner = await account('business')
    const created = await create(owner)
    const [row] = await selectRows<any>(db, sql`select * from webhooks where id = ${created.id}`)
    const secretBytes = created.secret.slice('whsec_'.length)
    const stored = JSON.stringify(row)
    expect(stored).not.toContain(secretBytes)
    expect(stored).not.toContain(Buffer.from(secretBytes, 'base64').toString('hex'))
    expect(row.secret_ciphertext).toStartWith('v1:')
    expect(await settings.secrets!.open(row.secret_ciphertext)).toBe(created.secret)
    // Two webhooks never share a secret.
    const other = await create(owner)
    expect(other.secret).not.toBe(created.secret)
  })

  test('Free, Hobby and Starter are 403 TIER_REQUIRED naming Pro; Pro and Business are 201', async () => {
    for (const tier of ['free', 'hobby', 'starter'] as const) {
      const who = await account(tier)
      const response = await call('POST', '/v1/webhooks', { cookie: who.cookie, body: validBody() })
      expect(response.status).toBe(403)
      const error = (await json(response)).error
      expect(error.code).toBe('TIER_REQUIRED')
      expect(error.message).toContain('Pro subscription')
      expect(await list(who)).toEqual([])
    }
    for (const tier of ['pro', 'business'] as const) {
      expect((await create(await account(tier))).is_active).toBe(1)
    }
  }, 60_000)

  test('a tier change takes effect on the next request (set like the CLI does)', async () => {
    const who = await account('free')
    expect((await call('POST', '/v1/webhooks', { cookie: who.cookie, body: validBody() })).status).toBe(403)
    await setTier(db, who.email, 'pro')
    const created = await create(who)
    await setTier(db, who.email, 'hobby')
    expect((await call('POST', '/v1/webhooks', { cookie: who.cookie, body: validBody() })).status).toBe(403)
    expect((await call('POST', `/v1/webhooks/${created.id}/test`, { cookie: who.cookie })).status).toBe(403)
    // Downgraded, it can still see and delete what it made.
    expect((await list(who)).map((w: any) => w.id)).toEqual([created.id])
    expect((await call('DELETE', `/v1/webhooks/${created.id}`, { cookie: who.cookie })).status).toBe(200)
    expect(await list(who)).toEqual([])
  })

  test('every field is validated: 400 INVALID_PARAMETER naming it', async () => {
    const who = await account('pro')
    const cases: [body: Record<string, unknown>, field: string][] = [
      [{ url: undefined }, 'url'],
      [{ url: 42 }, 'url'],
      [{ url: '' }, 'url'],
      [{ url: 'x'.repeat(2049) }, 'url'],
      [{ url: 'not a url' }, 'url'],
      [{ url: '/relative/path' }, 'url'],
      [{ url: 'ftp://example.com/hook' }, 'url'],
      [{ url: 'javascript:alert(1)' }, 'url'],
      [{ url: 'file:///etc/passwd' }, 'url'],
      [{ url: 'https://user:pass@example.com/hook' }, 'url'],
      [{ url: 'https://token@example.com/hook' }, 'url'],
      // Empty credentials, which the URL parser drops: refused on the text, never stored.
      [{ url: 'http://:@93.184.215.14/' }, 'url'],
      [{ url: 'http://@93.184.215.14/hook' }, 'url'],
      [{ url: 'https://example.com/hook#part' }, 'url'],
      [{ card_id: undefined }, 'card_id'],
      [{ card_id: '1' }, 'card_id'],
      [{ card_id: 1.5 }, 'card_id'],
      [{ card_id: 0 }, 'card_id'],
      [{ card_id: -3 }, 'card_id'],
      [{ card_id: 2 ** 31 }, 'card_id'],
      [{ condition: undefined }, 'condition'],
      [{ condition: 'sideways' }, 'condition'],
      [{ condition: 'ABOVE' }, 'condition'],
      [{ condition: 1 }, 'condition'],
      [{ threshold: undefined }, 'threshold'],
      [{ threshold: 0 }, 'threshold'],
      [{ threshold: -1 }, 'threshold'],
      [{ threshold: 0.001 }, 'threshold'],
      [{ threshold: 'NaN' }, 'threshold'],
      [{ threshold: 'Infinity' }, 'threshold'],
      [{ threshold: '25' }, 'threshold'],
      [{ threshold: null }, 'threshold'],
      [{ threshold: 1_000_000.01 }, 'threshold'],
      [{ threshold: 1e300 }, 'threshold'],
    ]
    for (const [overrides, field] of cases) {
      const response = await call('POST', '/v1/webhooks', { cookie: who.cookie, body: validBody(overrides) })
      const error = (await json(response)).error
      expect({ overrides, status: response.status, code: error?.code }).toEqual({ overrides, status: 400, code: 'INVALID_PARAMETER' })
      expect(error.details.map((d: any) => d.field)).toContain(field)
    }
    // JSON.parse reads 1e999 as Infinity: still a 400, never a stored Infinity.
    const infinite = await call('POST', '/v1/webhooks', { cookie: who.cookie, body: JSON.stringify(validBody()).replace('"threshold":25', '"threshold":1e999') })
    expect(infinite.status).toBe(400)
    expect((await json(infinite)).error.details[0].field).toBe('threshold')
    for (const body of ['{"url":', '[]', '"text"', 'null']) {
      expect((await call('POST', '/v1/webhooks', { cookie: who.cookie, body })).status).toBe(400)
    }
    expect(await list(who)).toEqual([])
  })

  test('the bounds themselves are accepted', async () => {
    const who = await account('pro')
    expect((await create(who, { threshold: 0.01 })).threshold).toBe(0.01)
    expect((await create(who, { threshold: 1_000_000 })).threshold).toBe(1_000_000)
    expect((await create(who, { url: 'https://example.com:8443/a/b?token=x%20y' })).url).toBe('https://example.com:8443/a/b?token=x%20y')
  })

  test('an unknown card is 404; no session is 401; a form body is 415; a foreign Origin is 403', async () => {
    const who = await account('pro')
    const unknown = await call('POST', '/v1/webhooks', { cookie: who.cookie, body: validBody({ card_id: UNKNOWN_CARD }) })
    expect(unknown.status).toBe(404)
    expect((await json(unknown)).error).toEqual({ code: 'NOT_FOUND', message: `Card ${UNKNOWN_CARD} not found`, request_id: expect.any(String) })

    for (const cookie of [undefined, 'session=forged']) {
      for (const [method, path] of [
        ['POST', '/v1/webhooks'],
        ['GET', '/v1/webhooks'],
        ['DELETE', '/v1/webhooks/1'],
        ['GET', '/v1/webhooks/1/deliveries'],
        ['POST', '/v1/webhooks/1/test'],
      ]) {
        const response = await call(method!, path!, { cookie, body: method === 'POST' && path === '/v1/webhooks' ? validBody() : undefined })
        expect({ method, path, status: response.status }).toEqual({ method, path, status: 401 })
        expect((await json(response)).error.code).toBe('UNAUTHORIZED')
      }
    }
    const form = await call('POST', '/v1/webhooks', {
      cookie: who.cookie,
      body: `url=${encodeURIComponent(RECEIVER_URL)}&card_id=${CARD_ID}&condition=above&threshold=25`,
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    })
    expect(form.status).toBe(415)
    const text = await call('POST', '/v1/webhooks', { cookie: who.cookie, body: JSON.stringify(validBody()), headers: { 'content-type': 'text/plain' } })
    expect(text.status).toBe(415)
    const foreign = await call('POST', '/v1/webhooks', { cookie: who.cookie, body: validBody(), headers: { origin: 'https://evil.example' } })
    expect(foreign.status).toBe(403)
    expect((await json(foreign)).error.code).toBe('FORBIDDEN')
    expect(await list(who)).toEqual([])
    // From the service's own origin it goes through.
    const own = await call('POST', '/v1/webhooks', { cookie: who.cookie, body: validBody(), headers: { origin: server.base } })
    expect(own.status).toBe(201)
  })

  test(`at most ${MAX_WEBHOOKS} per account: the next is 409, and deleting one makes room`, async () => {
    const who = await account('pro')
    const made = []
    for (let n = 0; n < MAX_WEBHOOKS; n++) made.push(await create(who, { threshold: n + 1 }))
    const over = await call('POST', '/v1/webhooks', { cookie: who.cookie, body: validBody() })
    expect(over.status).toBe(409)
    expect((await json(over)).error).toEqual({
      code: 'CONFLICT',
      message: `An account can have at most ${MAX_WEBHOOKS} webhooks; delete one first`,
      request_id: expect.any(String),
    })
    // Disabled webhooks count too: they still exist until deleted.
    await db.execute(sql`update webhooks set is_active = false where id = ${made[0].id}`)
    expect((await call('POST', '/v1/webhooks', { cookie: who.cookie, body: validBody() })).status).toBe(409)
    expect((await call('DELETE', `/v1/webhooks/${made[0].id}`, { cookie: who.cookie })).status).toBe(200)
    await create(who)
    expect(await list(who)).toHaveLength(MAX_WEBHOOKS)
    // Another account is not affected by this one's limit.
    await create(await account('pro'))
  }, 30_000)

  test(`30 concurrent creates leave exactly ${MAX_WEBHOOKS}`, async () => {
    const who = await account('business')
    const responses = await Promise.all(Array.from({ length: 30 }, (_, n) => call('POST', '/v1/webhooks', { cookie: who.cookie, body: validBody({ threshold: n + 1 }) })))
    const statuses = responses.map((r) => r.status).sort()
    expect(statuses.filter((s) => s === 201)).toHaveLength(MAX_WEBHOOKS)
    expect(statuses.filter((s) => s === 409)).toHaveLength(30 - MAX_WEBHOOKS)
    const [row] = await selectRows<{ n: number }>(db, sql`select count(*)::int as n from webhooks where account_id = ${who.accountId}`)
    expect(row!.n).toBe(MAX_WEBHOOKS)
  }, 30_000)

  test('without a secret key the answer is 503 naming WEBHOOK_SECRET_KEY, after the other checks', async () => {
    const keyless = startServer({ db, redis: undefined, logger: testLogger, clock: systemClock, webhooks: { secrets: undefined, targets: { allowPrivateTargets: true } } })
    const defaults = startServer({ db, redis: undefined, logger: testLogger, clock: systemClock })
    const who = await account('pro')
    // A name that never resolves passes the default target policy (public targets only).
    const body = validBody({ url: 'https://receiver.invalid/hook' })
    for (const base of [keyless.base, defaults.base]) {
      const response = await send(base, 'POST', '/v1/webhooks', { cookie: who.cookie, body })
      expect(response.status).toBe(503)
      const error = (await json(response)).error
      expect(error.code).toBe('SERVICE_UNAVAILABLE')
      expect(error.message).toContain('WEBHOOK_SECRET_KEY')
      // A bad body, an unknown card or a low tier are still told as such.
      expect((await send(base, 'POST', '/v1/webhooks', { cookie: who.cookie, body: { ...body, threshold: 0 } })).status).toBe(400)
      expect((await send(base, 'POST', '/v1/webhooks', { cookie: who.cookie, body: { ...body, card_id: UNKNOWN_CARD } })).status).toBe(404)
      const free = await account('free')
      expect((await send(base, 'POST', '/v1/webhooks', { cookie: free.cookie, body })).status).toBe(403)
    }
    expect(await list(who)).toEqual([])
    // Made where a key exists, the webhook cannot be pinged where none does.
    const created = await create(who)
    const ping = await send(keyless.base, 'POST', `/v1/webhooks/${created.id}/test`, { cookie: who.cookie })
    expect(ping.status).toBe(503)
    expect((await json(ping)).error.message).toContain('WEBHOOK_SECRET_KEY')
    // Listing and deleting need no key.
    expect((await send(keyless.base, 'GET', '/v1/webhooks', { cookie: who.cookie })).status).toBe(200)
    expect((await send(keyless.base, 'DELETE', `/v1/webhooks/${created.id}`, { cookie: who.cookie })).status).toBe(200)
  }, 60_000)
})

describe('the initial armed state: a webhook fires on a crossing, never for a price already past its threshold', () => {
  const armedOf = async (id: number) => (await selectRows<{ armed: boolean }>(db, sql`select armed from webhooks where id = ${id}`))[0]!.armed

  test("decided by the card's primary printing's market price", async () => {
    const who = await account('business')
    const p = card.price
    const cases: [condition: string, threshold: number, armed: boolean][] = [
      ['above', p + 1, true], // below the threshold: can rise through it
      ['above', p, false], // at it: already "at or above"
      ['above', p / 2, false], // past it
      ['below', p / 2, true], // above the threshold: can fall through it
      ['below', p, false],
      ['below', p + 1, false],
    ]
    for (const [condition, threshold, armed] of cases) {
      const created = await create(who, { condition, threshold })
      expect({ condition, threshold, armed: await armedOf(created.id) }).toEqual({ condition, threshold, armed })
    }
    // The message says when a webhook starts disarmed.
    const disarmed = await create(who, { condition: 'above', threshold: p })
    expect(disarmed.message).toContain('crossed back')
    expect((await create(who, { condition: 'above', threshold: p + 1 })).message).not.toContain('crossed back')
  })

  test('a card with no price yet: armed either way', async () => {
    const who = await account('pro')
    const [unpriced] = await selectRows<{ id: number }>(db, sql`select id from cards where id <> ${CARD_ID} order by id desc limit 1`)
    await db.execute(sql`delete from card_prices where card_id = ${unpriced!.id}`)
    for (const condition of ['above', 'below']) {
      const created = await create(who, { card_id: unpriced!.id, condition, threshold: 10 })
      expect(await armedOf(created.id)).toBe(true)
    }
  })

  test('property: with a price, exactly one direction is armed unless the price is at the threshold', () => {
    const money = fc.double({ min: 0.01, max: 1_000_000, noNaN: true })
    fc.assert(
      fc.property(money, money, (price, threshold) => {
        const above = initiallyArmed('above', threshold, price)
        const below = initiallyArmed('below', threshold, price)
        if (price === threshold) return !above && !below
        return above !== below && above === price < threshold
      }),
    )
    expect(initiallyArmed('above', 5, null) && initiallyArmed('below', 5, null)).toBe(true)
  })
})

describe('tenancy: accounts never see or touch each other’s webhooks', () => {
  test('B cannot list, read deliveries of, ping or delete A’s webhook: 404, and A’s is untouched', async () => {
    const alice = await account('pro')
    const bob = await account('pro')
    const hers = await create(alice)
    await create(bob)
    expect((await list(bob)).map((w: any) => w.id)).not.toContain(hers.id)
    for (const [method, path] of [
      ['DELETE', `/v1/webhooks/${hers.id}`],
      ['GET', `/v1/webhooks/${hers.id}/deliveries`],
      ['POST', `/v1/webhooks/${hers.id}/test`],
    ]) {
      const response = await call(method!, path!, { cookie: bob.cookie })
      expect({ path, status: response.status }).toEqual({ path, status: 404 })
      expect((await json(response)).error).toEqual({ code: 'NOT_FOUND', message: `Webhook ${hers.id} not found`, request_id: expect.any(String) })
    }
    // The same answer as for a webhook that does not exist.
    expect((await json(await call('DELETE', '/v1/webhooks/2147483647', { cookie: bob.cookie }))).error.code).toBe('NOT_FOUND')
    expect(receiver.received().filter((event) => event.body.includes(`"webhook_id":${hers.id}`))).toEqual([])
    expect((await list(alice)).map((w: any) => w.id)).toEqual([hers.id])
  })
})

describe('SSRF: targets on non-public addresses are refused at creation', () => {
  // A resolver that knows two names of its own and asks the system for the rest.
  const resolve = async (host: string) => {
    if (host === 'intranet.example') return [{ address: '10.20.30.40', family: 4 }]
    if (host === 'split.example')
      return [
        { address: '93.184.215.14', family: 4 },
        { address: 'fd00::1', family: 6 },
      ]
    if (host === 'public.example') return [{ address: '93.184.215.14', family: 4 }]
    return systemResolver(host)
  }
  const guarded = startServer({
    db,
    redis: undefined,
    logger: testLogger,
    clock: systemClock,
    webhooks: { secrets: settings.secrets, targets: { allowPrivateTargets: false, resolve } },
  })

  const refused = [
    'http://127.0.0.1/hook',
    'http://127.9.9.9:8080/hook',
    'http://[::1]/hook',
    'http://10.0.0.1/hook',
    'http://172.16.5.4/hook',
    'http://192.168.1.1/hook',
    'http://169.254.169.254/latest/meta-data/',
    'http://[fe80::1]/hook',
    'http://[fd12:3456::1]/hook',
    'http://[::ffff:10.0.0.1]/hook',
    // IPv6 forms that carry an IPv4 address: IPv4-compatible, 6to4, NAT64, Teredo, reserved space.
    'http://[::127.0.0.1]/',
    'http://[::7f00:1]/hook',
    'http://[::8.8.8.8]/hook',
    'http://[2002:a9fe:a9fe::1]/hook',
    'http://[64:ff9b::169.254.169.254]/hook',
    'http://[2001:0:a00:1::1]/hook',
    'http://[1::1]/hook',
    'http://0.0.0.0/hook',
    'http://100.64.0.1/hook',
    'http://0x7f.1/hook',
    'http://2130706433/hook',
    'http://localhost/hook',
    'http://localhost:9999/hook',
    'http://intranet.example/hook',
    'http://split.example/hook',
  ]
  for (const url of refused) {
    test(`${url} → 400`, async () => {
      const who = await account('pro')
      const response = await send(guarded.base, 'POST', '/v1/webhooks', { cookie: who.cookie, body: validBody({ url }) })
      const error = (await json(response)).error
      expect({ status: response.status, code: error.code }).toEqual({ status: 400, code: 'INVALID_PARAMETER' })
      expect(error.message).toContain('webhook targets must be public')
      expect(error.details).toEqual([{ field: 'url', message: error.message }])
      expect(await list(who)).toEqual([])
    })
  }

  test('a public name, and a name that does not resolve (judged again at delivery), are accepted', async () => {
    const who = await account('pro')
    for (const url of ['https://public.example/hook', 'https://nowhere.invalid/hook']) {
      const response = await send(guarded.base, 'POST', '/v1/webhooks', { cookie: who.cookie, body: validBody({ url }) })
      expect({ url, status: response.status }).toEqual({ url, status: 201 })
    }
  })

  test('a webhook made while private targets were allowed is refused when pinged without that allowance', async () => {
    const who = await account('pro')
    const created = await create(who) // on the permissive server, to the loopback receiver
    const before = receiver.received().length
    const response = await send(guarded.base, 'POST', `/v1/webhooks/${created.id}/test`, { cookie: who.cookie })
    expect(response.status).toBe(200)
    const result = (await json(response)).data
    expect(result).toMatchObject({ delivered: false, status_code: null })
    expect(result.error).toContain('loopback')
    expect(receiver.received().length).toBe(before)
  })
})

describe('test pings', () => {
  test('a signed ping reaches the receiver, verifies with the Standard Webhooks library, and is listed', async () => {
    const who = await account('pro')
    const created = await create(who)
    const before = receiver.received().length
    const response = await call('POST', `/v1/webhooks/${created.id}/test`, { cookie: who.cookie })
    expect(response.status).toBe(200)
    const result = (await json(response)).data
    expect(result).toEqual({ event_id: expect.stringMatching(/^msg_/), delivered: true, status_code: 200, duration_ms: expect.any(Number), error: null })
    expect(JSON.stringify(result)).not.toContain(created.secret)

    expect(receiver.received().length).toBe(before + 1)
    const event = receiver.received().at(-1)!
    const payload = new Webhook(created.secret).verify(event.body, event.headers) as any
    expect(Object.keys(payload)).toEqual(['event', 'webhook_id', 'timestamp'])
    expect(payload).toEqual({ event: 'ping', webhook_id: created.id, timestamp: expect.any(String) })
    expect(Math.abs(Date.parse(payload.timestamp) - systemClock.now().getTime())).toBeLessThan(60_000)
    expect(event.headers['webhook-id']).toBe(result.event_id)
    expect(event.headers['content-type']).toBe('application/json')
    expect({ method: event.method, path: event.path }).toEqual({ method: 'POST', path: '/hooks' })
    // A signature under another secret does not verify: the check above is not vacuous.
    const stranger = await create(who)
    expect(() => new Webhook(stranger.secret).verify(event.body, event.headers)).toThrow()

    const deliveries = await json(await call('GET', `/v1/webhooks/${created.id}/deliveries`, { cookie: who.cookie }))
    expect(deliveries).toEqual({
      data: [
        {
          event_id: result.event_id,
          event: 'ping',
          attempt: 1,
          attempted_at: expect.any(String),
          outcome: 'delivered',
          status_code: 200,
          duration_ms: result.duration_ms,
          error: null,
          next_retry_at: null,
        },
      ],
      meta: { total: 1, page: 1, per_page: 50, has_more: false },
    })
    const listed = (await list(who)).find((w: any) => w.id === created.id)
    expect(listed.last_delivery).toEqual({ outcome: 'delivered', status_code: 200, attempted_at: deliveries.data[0].attempted_at })
  })

  test('a receiver answering 500 is a failed delivery with its status, listed as such', async () => {
    const who = await account('business')
    const created = await create(who)
    receiver.script([], { kind: 'status', status: 500 })
    try {
      const result = (await json(await call('POST', `/v1/webhooks/${created.id}/test`, { cookie: who.cookie }))).data
      expect(result).toMatchObject({ delivered: false, status_code: 500, error: 'answered 500' })
      const deliveries = (await json(await call('GET', `/v1/webhooks/${created.id}/deliveries`, { cookie: who.cookie }))).data
      expect(deliveries).toEqual([expect.objectContaining({ event_id: result.event_id, outcome: 'failed', status_code: 500, error: 'answered 500', next_retry_at: null })])
      expect((await list(who))[0].last_delivery).toMatchObject({ outcome: 'failed', status_code: 500 })
    } finally {
      receiver.script([])
    }
  })

  test('no receiver listening: failed with no status and the reason', async () => {
    const who = await account('pro')
    const closed = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => new Response(null) })
    const url = `http://127.0.0.1:${closed.port}/gone`
    closed.stop(true)
    const created = await create(who, { url })
    const result = (await json(await call('POST', `/v1/webhooks/${created.id}/test`, { cookie: who.cookie }))).data
    expect(result).toMatchObject({ delivered: false, status_code: null })
    expect(result.error).toContain('could not connect')
  })

  test('a receiver that never answers: the ping gives up after the delivery timeout and still answers, however short the request timeout', async () => {
    // Real time throughout: the request timeout under test is Bun's own idle timeout.
    // biome-ignore lint/suspicious/noThenProperty: the receiver's option for every reply after the scripted ones
    const hanging = await startWebhookReceiver({ then: { kind: 'hang' } })
    afterAll(() => hanging.stop(), 30_000)
    const impatient = startServer({ db, redis: undefined, logger: testLogger, clock: systemClock, webhooks: settings, config: { requestTimeoutSeconds: 2 } })
    const who = await account('pro')
    const created = await create(who, { url: `${hanging.url}/slow` })
    const response = await send(impatient.base, 'POST', `/v1/webhooks/${created.id}/test`, { cookie: who.cookie })
    expect(response.status).toBe(200)
    const result = (await json(response)).data
    expect(result).toMatchObject({ delivered: false, status_code: null, error: `no response within ${DELIVERY_TIMEOUT_MS / 1000} s` })
    expect(result.duration_ms).toBeGreaterThanOrEqual(DELIVERY_TIMEOUT_MS)
    expect(result.duration_ms).toBeLessThan(2 * DELIVERY_TIMEOUT_MS)
    expect(hanging.received()).toHaveLength(1)
  }, 60_000)

  test('a disabled webhook can still be pinged (that is how an owner checks a fix)', async () => {
    const who = await account('pro')
    const created = await create(who)
    await db.execute(sql`update webhooks set is_active = false, disabled_at = now(), disabled_reason = 'failed for 24 hours' where id = ${created.id}`)
    const listed = (await list(who))[0]
    expect(listed).toMatchObject({ is_active: 0, disabled_reason: 'failed for 24 hours', disabled_at: expect.any(String) })
    const result = (await json(await call('POST', `/v1/webhooks/${created.id}/test`, { cookie: who.cookie }))).data
    expect(result.delivered).toBe(true)
  })

  test(`at most ${PING_LIMIT.perWindow} pings per account a minute: then 429 with Retry-After; other accounts are unaffected`, async () => {
    const who = await account('pro')
    const created = await create(who)
    const statuses = []
    for (let n = 0; n < PING_LIMIT.perWindow; n++) statuses.push((await call('POST', `/v1/webhooks/${created.id}/test`, { cookie: who.cookie })).status)
    expect(statuses).toEqual(Array(PING_LIMIT.perWindow).fill(200))
    const refused = await call('POST', `/v1/webhooks/${created.id}/test`, { cookie: who.cookie })
    expect(refused.status).toBe(429)
    expect((await json(refused)).error.code).toBe('TOO_MANY_ATTEMPTS')
    const retryAfter = Number(refused.headers.get('retry-after'))
    expect(retryAfter).toBeGreaterThan(0)
    expect(retryAfter).toBeLessThanOrEqual(PING_LIMIT.windowSeconds)
    // The refused ping was neither sent nor recorded.
    const meta = (await json(await call('GET', `/v1/webhooks/${created.id}/deliveries`, { cookie: who.cookie }))).meta
    expect(meta.total).toBe(PING_LIMIT.perWindow)
    const other = await account('pro')
    const theirs = await create(other)
    expect((await call('POST', `/v1/webhooks/${theirs.id}/test`, { cookie: other.cookie })).status).toBe(200)
  }, 30_000)

  test('concurrent pings are bounded too', async () => {
    const who = await account('pro')
    const created = await create(who)
    const responses = await Promise.all(Array.from({ length: 25 }, () => call('POST', `/v1/webhooks/${created.id}/test`, { cookie: who.cookie })))
    const statuses = responses.map((r) => r.status)
    expect(statuses.filter((s) => s === 200)).toHaveLength(PING_LIMIT.perWindow)
    expect(statuses.filter((s) => s === 429)).toHaveLength(25 - PING_LIMIT.perWindow)
  }, 30_000)
})

describe('deliveries', () => {
  test('newest first, paged with page and per_page, and the meta used elsewhere', async () => {
    const who = await account('pro')
    const created = await create(who)
    const start = Date.parse('2026-11-20T00:00:00Z')
    for (let n = 1; n <= 7; n++) {
      await recordAttempt(db, {
        webhookId: created.id,
        eventId: `msg_event${n}`,
        event: 'price_alert',
        attempt: n,
        at: new Date(start + n * 60_000),
        result: n === 7 ? { delivered: true, statusCode: 200, durationMs: 12 } : { delivered: false, statusCode: 503, durationMs: 30, error: 'answered 503' },
        nextRetryAt: n === 7 ? undefined : new Date(start + n * 120_000),
      })
    }
    const page = async (query: string) => json(await call('GET', `/v1/webhooks/${created.id}/deliveries${query}`, { cookie: who.cookie }))
    const first = await page('?per_page=3')
    expect(first.meta).toEqual({ total: 7, page: 1, per_page: 3, has_more: true })
    expect(first.data.map((d: any) => d.event_id)).toEqual(['msg_event7', 'msg_event6', 'msg_event5'])
    expect(first.data[0]).toEqual({
      event_id: 'msg_event7',
      event: 'price_alert',
      attempt: 7,
      attempted_at: '2026-11-20T00:07:00.000Z',
      outcome: 'delivered',
      status_code: 200,
      duration_ms: 12,
      error: null,
      next_retry_at: null,
    })
    expect(first.data[1]).toMatchObject({ outcome: 'failed', status_code: 503, error: 'answered 503', next_retry_at: '2026-11-20T00:12:00.000Z' })
    const third = await page('?per_page=3&page=3')
    expect(third.data.map((d: any) => d.event_id)).toEqual(['msg_event1'])
    expect(third.meta).toEqual({ total: 7, page: 3, per_page: 3, has_more: false })
    expect((await page('?page=9')).data).toEqual([])
    expect((await page('?per_page=200')).meta.per_page).toBe(100)
    for (const query of ['?page=0', '?per_page=0', '?page=abc', '?per_page=1.5']) {
      const response = await call('GET', `/v1/webhooks/${created.id}/deliveries${query}`, { cookie: who.cookie })
      expect({ query, status: response.status }).toEqual({ query, status: 400 })
    }
    const fresh = await create(who)
    expect(
      await page('')
        .then(() => call('GET', `/v1/webhooks/${fresh.id}/deliveries`, { cookie: who.cookie }))
        .then(json),
    ).toEqual({
      data: [],
      meta: { total: 0, page: 1, per_page: 50, has_more: false },
    })
  })
})

describe('delete', () => {
  test('removes the webhook, its outbox entries and attempts; a second delete is 404', async () => {
    const who = await account('pro')
    const created = await create(who)
    const kept = await create(who)
    for (const id of [created.id, kept.id]) {
      await db.execute(sql`insert into webhook_deliveries (webhook_id, event_id, event, payload) values (${id}, ${`msg_outbox${id}`}, 'price_alert', '{}')`)
      await recordAttempt(db, {
        webhookId: id,
        eventId: `msg_outbox${id}`,
        event: 'price_alert',
        attempt: 1,
        at: systemClock.now(),
        result: { delivered: false, statusCode: 500, durationMs: 5 },
      })
    }
    const response = await call('DELETE', `/v1/webhooks/${created.id}`, { cookie: who.cookie })
    expect(response.status).toBe(200)
    expect((await json(response)).data).toEqual({ message: `Webhook ${created.id} deleted` })
    const count = async (table: string, id: number) =>
      (await selectRows<{ n: number }>(db, sql`select count(*)::int as n from ${sql.raw(table)} where ${sql.raw(table === 'webhooks' ? 'id' : 'webhook_id')} = ${id}`))[0]!.n
    for (const table of ['webhooks', 'webhook_deliveries', 'webhook_attempts']) {
      expect({ table, n: await count(table, created.id) }).toEqual({ table, n: 0 })
      expect({ table, n: await count(table, kept.id) }).toEqual({ table, n: 1 })
    }
    expect((await call('DELETE', `/v1/webhooks/${created.id}`, { cookie: who.cookie })).status).toBe(404)
    expect((await list(who)).map((w: any) => w.id)).toEqual([kept.id])
    const foreign = await call('DELETE', `/v1/webhooks/${kept.id}`, { cookie: who.cookie, headers: { origin: 'https://evil.example' } })
    expect(foreign.status).toBe(403)
  })
})

describe('list', () => {
  test('oldest first, with each webhook’s last alert, latest attempt and disabled state', async () => {
    const who = await account('pro')
    const first = await create(who, { threshold: 1 })
    const second = await create(who, { threshold: 2 })
    await db.execute(sql`update webhooks set last_triggered_at = '2026-11-20T03:00:00Z', is_active = false,
      disabled_at = '2026-11-21T03:00:00Z', disabled_reason = 'no successful delivery for a day' where id = ${second.id}`)
    for (const [n, status] of [
      [1, 500],
      [2, 502],
    ] as const) {
      await recordAttempt(db, {
        webhookId: second.id,
        eventId: `msg_list${n}`,
        event: 'price_alert',
        attempt: n,
        at: new Date(Date.UTC(2026, 10, 21, n)),
        result: { delivered: false, statusCode: status, durationMs: 7, error: `answered ${status}` },
      })
    }
    const listed = await list(who)
    expect(listed.map((w: any) => w.id)).toEqual([first.id, second.id])
    expect(listed[0]).toMatchObject({ is_active: 1, last_triggered_at: null, last_delivery: null, disabled_at: null, disabled_reason: null })
    expect(listed[1]).toMatchObject({
      is_active: 0,
      last_triggered_at: '2026-11-20T03:00:00.000Z',
      last_delivery: { outcome: 'failed', status_code: 502, attempted_at: '2026-11-21T02:00:00.000Z' },
      disabled_at: '2026-11-21T03:00:00.000Z',
      disabled_reason: 'no successful delivery for a day',
    })
  })
})
