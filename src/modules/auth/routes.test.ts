import { describe, expect, test } from 'bun:test'
import { sql } from 'drizzle-orm'
import { accountWithKey, manualClock, testRedis } from '../../../test/helpers/auth'
import { fetchFrom, freshAddress } from '../../../test/helpers/client-address'
import { freshDatabase, selectRows } from '../../../test/helpers/db'
import { withProbes } from '../../../test/helpers/probes'
import { startServer } from '../../../test/helpers/server'
import { systemClock } from '../../shared/clock'
import { createLogger } from '../../shared/logger'
import { LOGIN_THROTTLE } from './login-throttle'
import { sha256Hex } from './secrets'

// Accounts, sessions and keys over real HTTP. Every log line of the server is captured so the
// last test can prove no credential was ever written to the logs.
const { db } = await freshDatabase('empty')
const redis = await testRedis()
const clock = manualClock()
/** Every wait the service asks its clock for (only the login throttle waits here), in order. */
const sleeps: number[] = []
const recordingClock = { ...clock, sleep: (ms: number) => (sleeps.push(ms), clock.sleep(ms)) }
const logLines: string[] = []
const logger = createLogger('debug', { write: (line: string) => void logLines.push(line) })
const server = startServer({ db, redis, logger, clock: recordingClock }, withProbes)

const json = async (response: Response) => (await response.json()) as any
/** Every raw secret the tests handled: none may appear in the database or the logs. */
const secrets: string[] = []

/** `from`: the client's address (default 127.0.0.1); sign-ups take one each, as they are limited per address. */
function send(method: string, path: string, options: { body?: unknown; cookie?: string; headers?: Record<string, string>; from?: string } = {}) {
  const headers: Record<string, string> = { ...options.headers }
  if (options.cookie) headers.cookie = options.cookie
  if (options.body !== undefined && !headers['content-type']) headers['content-type'] = 'application/json'
  const body = options.body === undefined ? undefined : typeof options.body === 'string' ? options.body : JSON.stringify(options.body)
  return options.from ? fetchFrom(options.from, server.base + path, { method, headers, body }) : server.get(path, { method, headers, body })
}

let emails = 0
const newEmail = () => `Person${++emails}@Example.com`
const PASSWORD = 'a long enough password'

/** The `session=…` pair of a Set-Cookie header. */
function sessionCookie(response: Response): string {
  const setCookie = response.headers.get('set-cookie') ?? ''
  const pair = setCookie.split(';')[0]!
  expect(pair).toMatch(/^session=[A-Za-z0-9_-]{43}$/)
  secrets.push(pair.slice('session='.length))
  return pair
}

async function signup(email = newEmail()) {
  const response = await send('POST', '/v1/auth/signup', { body: { email, password: PASSWORD }, from: freshAddress() })
  expect(response.status).toBe(201)
  secrets.push(PASSWORD)
  return { email, cookie: sessionCookie(response), account: (await json(response)).data }
}

describe('signup', () => {
  test('creates a Free account (email lowercased), logs in with a session cookie', async () => {
    const response = await send('POST', '/v1/auth/signup', { body: { email: 'New.User@Example.COM', password: PASSWORD }, from: freshAddress() })
    expect(response.status).toBe(201)
    const body = await json(response)
    expect(body.data).toMatchObject({
      email: 'new.user@example.com',
      tier: 'free',
      subscription: { plan: 'free', status: 'active' },
    })
    expect(typeof body.data.id).toBe('number')
    expect(body.data.password).toBeUndefined()
    const cookie = response.headers.get('set-cookie')!
    expect(cookie).toContain('HttpOnly')
    expect(cookie).toContain('SameSite=Lax')
    expect(cookie).toContain('Path=/')
    expect(cookie).toContain(`Max-Age=${30 * 86400}`)
    expect(cookie).not.toContain('Secure')
    const me = await send('GET', '/v1/auth/me', { cookie: sessionCookie(response) })
    expect((await json(me)).data.email).toBe('new.user@example.com')
  })

  test('a duplicate email, in any case, is 409 CONFLICT', async () => {
    const { email } = await signup()
    const again = await send('POST', '/v1/auth/signup', { body: { email: email.toUpperCase(), password: PASSWORD }, from: freshAddress() })
    expect(again.status).toBe(409)
    expect((await json(again)).error.code).toBe('CONFLICT')
  })

  test('bad input is 400 INVALID_PARAMETER naming the field', async () => {
    const cases: [unknown, string][] = [
      [{ email: newEmail(), password: 'short' }, 'password'],
      [{ email: 'not-an-email', password: PASSWORD }, 'email'],
      [{ password: PASSWORD }, 'email'],
      [{ email: newEmail() }, 'password'],
      [{ email: newEmail(), password: 'x'.repeat(1025) }, 'password'],
    ]
    for (const [body, field] of cases) {
      const response = await send('POST', '/v1/auth/signup', { body })
      expect(response.status).toBe(400)
      const error = (await json(response)).error
      expect(error.code).toBe('INVALID_PARAMETER')
      expect(error.details.map((d: any) => d.field)).toContain(field)
    }
    const malformed = await send('POST', '/v1/auth/signup', { body: '{"email": ' })
    expect(malformed.status).toBe(400)
  })

  test('a form or text body is 415 and a foreign Origin is 403, before anything is created', async () => {
    const email = newEmail()
    const form = await send('POST', '/v1/auth/signup', {
      body: `email=${encodeURIComponent(email)}&password=${encodeURIComponent(PASSWORD)}`,
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    })
    expect(form.status).toBe(415)
    expect((await json(form)).error.code).toBe('UNSUPPORTED_MEDIA_TYPE')
    const text = await send('POST', '/v1/auth/signup', { body: JSON.stringify({ email, password: PASSWORD }), headers: { 'content-type': 'text/plain' } })
    expect(text.status).toBe(415)
    const foreign = await send('POST', '/v1/auth/signup', { body: { email, password: PASSWORD }, headers: { origin: 'https://evil.example' } })
    expect(foreign.status).toBe(403)
    expect((await json(foreign)).error.code).toBe('FORBIDDEN')
    const opaque = await send('POST', '/v1/auth/signup', { body: { email, password: PASSWORD }, headers: { origin: 'null' } })
    expect(opaque.status).toBe(403)
    // The same request from the service's own origin goes through.
    const own = await send('POST', '/v1/auth/signup', { body: { email, password: PASSWORD }, headers: { origin: server.base }, from: freshAddress() })
    expect(own.status).toBe(201)
  })

  test('Secure is added to the cookie when configured', async () => {
    const secure = startServer({ db, redis, logger, clock, config: { cookieSecure: true } })
    const response = await secure.get('/v1/auth/signup', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: newEmail(), password: PASSWORD }),
    })
    expect(response.status).toBe(201)
    expect(response.headers.get('set-cookie')).toContain('Secure')
    sessionCookie(response)
  })
})

describe('login, sessions and logout', () => {
  test('the right password logs in; a wrong one or an unknown email is the same 401', async () => {
    const { email } = await signup()
    const ok = await send('POST', '/v1/auth/login', { body: { email: email.toLowerCase(), password: PASSWORD } })
    expect(ok.status).toBe(200)
    expect((await json(ok)).data.email).toBe(email.toLowerCase())
    sessionCookie(ok)

    const wrong = await send('POST', '/v1/auth/login', { body: { email, password: 'not the password' } })
    const unknown = await send('POST', '/v1/auth/login', { body: { email: newEmail(), password: PASSWORD } })
    for (const response of [wrong, unknown]) {
      expect(response.status).toBe(401)
      expect(response.headers.get('set-cookie')).toBeNull()
      expect((await json(response)).error).toEqual({ code: 'UNAUTHORIZED', message: 'Email or password is incorrect', request_id: expect.any(String) })
    }
  })

  test('repeated failures for an email from an address are slowed, then refused with 429 even with the right password', async () => {
    const { email } = await signup()
    const durations: number[] = []
    const waits: number[][] = []
    for (let attempt = 1; attempt <= LOGIN_THROTTLE.pair.refuseAt; attempt++) {
      const before = sleeps.length
      const t0 = systemClock.monotonic()
      const response = await send('POST', '/v1/auth/login', { body: { email, password: 'wrong password!' } })
      durations.push(systemClock.monotonic() - t0)
      waits.push(sleeps.slice(before))
      expect(response.status).toBe(401)
    }
    // Attempts past the soft limit wait their step delay before the password is checked.
    // waits[k] is what the attempt made after k failures waited: (k - slowAfter) steps, none up to slowAfter.
    const { slowAfter } = LOGIN_THROTTLE.pair
    const { stepDelayMs, maxDelayMs } = LOGIN_THROTTLE
    expect(waits).toEqual(waits.map((_, k) => (k <= slowAfter ? [] : [Math.min((k - slowAfter) * stepDelayMs, maxDelayMs)])))
    // The waits are real: the attempt two steps in took at least that long (a lower bound holds on any machine).
    expect(durations[slowAfter + 2]!).toBeGreaterThanOrEqual(2 * stepDelayMs)

    const refused = await send('POST', '/v1/auth/login', { body: { email, password: PASSWORD } })
    expect(refused.status).toBe(429)
    expect((await json(refused)).error.code).toBe('TOO_MANY_ATTEMPTS')
    const retryAfter = Number(refused.headers.get('retry-after'))
    expect(retryAfter).toBeGreaterThan(0)
    expect(retryAfter).toBeLessThanOrEqual(LOGIN_THROTTLE.windowSeconds)
    // Another email from the same address is not locked out by this one.
    const other = await signup()
    expect((await send('POST', '/v1/auth/login', { body: { email: other.email, password: PASSWORD } })).status).toBe(200)
  }, 120_000)

  test('me, keys and logout need a live session: missing, unknown, logged-out and expired are 401', async () => {
    const { cookie } = await signup()
    expect((await send('GET', '/v1/auth/me', { cookie })).status).toBe(200)
    for (const bad of [undefined, 'session=', 'session=forged-token', 'other=1']) {
      for (const [method, path] of [
        ['GET', '/v1/auth/me'],
        ['GET', '/v1/keys'],
        ['POST', '/v1/auth/logout'],
      ] as const) {
        const response = await send(method, path, { cookie: bad })
        expect(response.status).toBe(401)
        expect((await json(response)).error.code).toBe('UNAUTHORIZED')
      }
    }

    const logout = await send('POST', '/v1/auth/logout', { cookie })
    expect(logout.status).toBe(200)
    expect(logout.headers.get('set-cookie')).toContain('Max-Age=0')
    // The old cookie value is dead on the server, not only cleared in the browser.
    expect((await send('GET', '/v1/auth/me', { cookie })).status).toBe(401)

    const fresh = await signup()
    clock.set('2026-12-20T12:00:01.000Z') // 30 days and a second later
    try {
      expect((await send('GET', '/v1/auth/me', { cookie: fresh.cookie })).status).toBe(401)
    } finally {
      clock.set('2026-11-20T12:00:00.000Z')
    }
    expect((await send('GET', '/v1/auth/me', { cookie: fresh.cookie })).status).toBe(200)
  })
})

describe('API keys', () => {
  test('create answers the raw key once; list shows it without the key; delete deactivates', async () => {
    const { cookie, account } = await signup()
    const created = await send('POST', '/v1/keys', { cookie, body: { name: 'Inventory sync' } })
    expect(created.status).toBe(201)
    const key = (await json(created)).data
    secrets.push(key.key)
    expect(key.key).toMatch(/^tcg_live_[0-9A-Za-z]{32}$/)
    expect(key.key.startsWith(key.key_prefix)).toBe(true)
    expect(key.key_prefix.length).toBeLessThan(key.key.length - 20)
    expect(key).toMatchObject({ name: 'Inventory sync', tier: 'free' })
    expect(key.message).toContain('only once')

    const works = await server.get('/probe/catalog', { headers: { 'x-api-key': key.key } })
    expect(works.status).toBe(200)

    const list = await send('GET', '/v1/keys', { cookie })
    const listed = (await json(list)).data
    expect(listed).toEqual([
      {
        id: key.id,
        key_prefix: key.key_prefix,
        name: 'Inventory sync',
        tier: 'free',
        is_active: 1,
        total_requests: 1,
        last_used_at: '2026-11-20T12:00:00.000Z',
        created_at: expect.any(String),
      },
    ])
    const listText = JSON.stringify(listed)
    expect(listText).not.toContain(key.key)
    expect(listText).not.toContain(sha256Hex(key.key))

    const removed = await send('DELETE', `/v1/keys/${key.id}`, { cookie })
    expect(removed.status).toBe(200)
    expect((await json(removed)).data.message).toContain('revoked')
    expect((await json(await send('GET', '/v1/keys', { cookie }))).data[0].is_active).toBe(0)
    expect((await server.get('/probe/catalog', { headers: { 'x-api-key': key.key } })).status).toBe(401)
    expect(account.id).toBeGreaterThan(0)
  })

  test('each account sees and revokes only its own keys', async () => {
    const alice = await accountWithKey(db)
    const bob = await accountWithKey(db)
    secrets.push(alice.key, bob.key)
    const bobsList = (await json(await send('GET', '/v1/keys', { cookie: bob.cookie }))).data
    expect(bobsList.map((k: any) => k.id)).toEqual([bob.publicKeyId])
    const steal = await send('DELETE', `/v1/keys/${alice.publicKeyId}`, { cookie: bob.cookie })
    expect(steal.status).toBe(404)
    expect((await json(steal)).error.code).toBe('NOT_FOUND')
    expect((await server.get('/probe/catalog', { headers: { 'x-api-key': alice.key } })).status).toBe(200)
  })

  test('at most 25 active keys; revoking one makes room', async () => {
    const { cookie } = await signup()
    const create = (name: string) => send('POST', '/v1/keys', { cookie, body: { name } })
    const statuses = await Promise.all(Array.from({ length: 27 }, (_, i) => create(`key ${i}`)))
    const made = await Promise.all(statuses.filter((r) => r.status === 201).map(json))
    expect(made).toHaveLength(25)
    for (const response of statuses.filter((r) => r.status !== 201)) {
      expect(response.status).toBe(409)
      expect((await json(response)).error.message).toContain('at most 25 active keys')
    }
    secrets.push(...made.map((m) => m.data.key))
    expect((await send('DELETE', `/v1/keys/${made[0].data.id}`, { cookie })).status).toBe(200)
    const again = await create('replacement')
    expect(again.status).toBe(201)
    secrets.push((await json(again)).data.key)
  }, 30_000)

  test('bad requests: name missing or too long 400, bad key id 400, unknown key 404, form body 415, foreign Origin 403', async () => {
    const { cookie } = await signup()
    for (const body of [{}, { name: '' }, { name: 'x'.repeat(101) }, { name: 42 }]) {
      const response = await send('POST', '/v1/keys', { cookie, body })
      expect(response.status).toBe(400)
      expect((await json(response)).error.details[0].field).toBe('name')
    }
    for (const id of ['abc', '0', '-1', '1.5']) {
      const response = await send('DELETE', `/v1/keys/${id}`, { cookie })
      expect(response.status).toBe(400)
      expect((await json(response)).error.details[0].field).toBe('keyId')
    }
    const unknown = await send('DELETE', `/v1/keys/key_${'0'.repeat(32)}`, { cookie })
    expect(unknown.status).toBe(404)
    expect((await json(unknown)).error.code).toBe('NOT_FOUND')
    const form = await send('POST', '/v1/keys', { cookie, body: 'name=x', headers: { 'content-type': 'application/x-www-form-urlencoded' } })
    expect(form.status).toBe(415)
    const foreign = await send('POST', '/v1/keys', { cookie, body: { name: 'x' }, headers: { origin: 'https://evil.example' } })
    expect(foreign.status).toBe(403)
    const foreignDelete = await send('DELETE', `/v1/keys/key_${'0'.repeat(32)}`, { cookie, headers: { origin: 'https://evil.example' } })
    expect(foreignDelete.status).toBe(403)
    expect((await json(await send('GET', '/v1/keys', { cookie }))).data).toEqual([])
  })
})

describe('key ids are opaque strings', () => {
  const KEY_ID = /^key_[0-9a-f]{32}$/

  test('create, list and usage show the same key_ id, never the integer row id; delete takes it', async () => {
    const { cookie } = await signup()
    const created = (await json(await send('POST', '/v1/keys', { cookie, body: { name: 'Storefront' } }))).data
    secrets.push(created.key)
    expect(created.id).toMatch(KEY_ID)
    const [row] = await selectRows<{ id: number; public_id: string }>(db, sql`select id, public_id from api_keys where key_prefix = ${created.key_prefix} and name = 'Storefront'`)
    expect(row!.public_id).toBe(created.id)

    const listed = (await json(await send('GET', '/v1/keys', { cookie }))).data
    expect(listed.map((key: any) => key.id)).toEqual([created.id])
    const usage = await server.get('/v1/usage', { headers: { 'x-api-key': created.key } })
    const usageBody = await json(usage)
    expect(usageBody.data.keys.map((key: any) => key.id)).toEqual([created.id])
    // The row id appears in no answer about the key (ids are the only integers named "id" there).
    for (const answer of [created, listed, usageBody.data.keys]) expect(JSON.stringify(answer)).not.toContain(`"id":${row!.id}`)

    const removed = await send('DELETE', `/v1/keys/${created.id}`, { cookie })
    expect(removed.status).toBe(200)
    expect((await json(removed)).data.message).toBe(`API key ${created.id} revoked`)
    expect((await server.get('/probe/catalog', { headers: { 'x-api-key': created.key } })).status).toBe(401)
  })

  test('an old integer id, or any id not shaped key_ and 32 lowercase hex, is a 400 that says to list the keys; the key stays', async () => {
    const { cookie } = await signup()
    const created = (await json(await send('POST', '/v1/keys', { cookie, body: { name: 'Old client' } }))).data
    secrets.push(created.key)
    const [row] = await selectRows<{ id: number }>(db, sql`select id from api_keys where public_id = ${created.id}`)
    for (const id of [String(row!.id), '1', created.id.toUpperCase(), created.id.slice(0, -1), `${created.id}0`, created.id.slice(4), 'key_']) {
      const response = await send('DELETE', `/v1/keys/${id}`, { cookie })
      const error = (await json(response)).error
      expect({ id, status: response.status, code: error.code, details: error.details }).toEqual({
        id,
        status: 400,
        code: 'INVALID_PARAMETER',
        details: [
          {
            field: 'keyId',
            message: 'must be a key id as GET /v1/keys lists it (key_ and 32 lowercase hex digits); integer key ids are no longer used: list your keys for their new ids',
          },
        ],
      })
      expect(error.message).toStartWith("Invalid path: 'keyId' must be a key id as GET /v1/keys lists it")
    }
    expect((await json(await send('GET', '/v1/keys', { cookie }))).data.map((key: any) => key.is_active)).toEqual([1])
    expect((await server.get('/probe/catalog', { headers: { 'x-api-key': created.key } })).status).toBe(200)
  })
})

describe('secrets at rest and in logs', () => {
  test('keys and session tokens are stored only as SHA-256, passwords only as argon2id', async () => {
    // Failures get logged too: make one happen with a valid key in the request.
    const { key } = await accountWithKey(db)
    secrets.push(key)
    expect((await server.get('/probe/catalog/boom', { headers: { 'x-api-key': key } })).status).toBe(500)

    const keys = await selectRows<any>(db, sql`select key_hash, key_prefix from api_keys`)
    const sessions = await selectRows<any>(db, sql`select token_hash from sessions`)
    const passwords = await selectRows<any>(db, sql`select password_hash from accounts`)
    expect(keys.length).toBeGreaterThan(25)
    for (const { key_hash } of keys) expect(key_hash).toMatch(/^[0-9a-f]{64}$/)
    for (const { token_hash } of sessions) expect(token_hash).toMatch(/^[0-9a-f]{64}$/)
    for (const { password_hash } of passwords) expect(password_hash).toStartWith('$argon2id$')

    const everything = JSON.stringify({ keys, sessions, passwords })
    const stored = new Set([...keys.map((k) => k.key_hash), ...sessions.map((s) => s.token_hash)])
    const rawKeys = secrets.filter((s) => s.startsWith('tcg_live_'))
    const rawTokens = secrets.filter((s) => !s.startsWith('tcg_live_') && s !== PASSWORD)
    expect(rawKeys.length).toBeGreaterThan(25)
    expect(rawTokens.length).toBeGreaterThan(5)
    for (const secret of secrets) expect(everything).not.toContain(secret)
    // And each one is findable by its hash: what is stored is the hash of what was handed out.
    for (const raw of [...rawKeys, ...rawTokens]) expect(stored.has(sha256Hex(raw))).toBe(true)

    const logs = logLines.join('')
    expect(logLines.some((line) => line.includes('unhandled error'))).toBe(true)
    for (const secret of secrets) expect(logs).not.toContain(secret)
  })
})
