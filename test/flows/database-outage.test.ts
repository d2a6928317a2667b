import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import { sql } from 'drizzle-orm'
import { publishAuthEvent } from '../../src/modules/auth/key-directory'
import { sha256Hex } from '../../src/modules/auth/secrets'
import { systemClock } from '../../src/shared/clock'
import { accountWithKey, type TestAccount, testRedis, testRedisPrefix } from '../helpers/auth'
import { freshDatabase, selectRows, testLogger } from '../helpers/db'
import { TEST_DATABASE_URL, TEST_REDIS_URL } from '../helpers/env'
import { eventually } from '../helpers/eventually'
import { ROOT, stopProcess } from '../helpers/process'
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy'

// A real database outage under a real service process: `test/fixtures/outage-server.ts` (the app
// as src/index.ts serves it) reaches PostgreSQL through a TCP proxy this test controls, which
// refuses, cuts and stalls its connections, then lets them through again; and its database is shut
// to connections (ALLOW_CONNECTIONS false) with its backends terminated. Redis stays up.
// Without both services (the embedded PGlite run) there is no connection to break: skipped.
const services = Boolean(TEST_DATABASE_URL && TEST_REDIS_URL)

/** The key cache's TTL in the service (30 s in production): the outage outlasts it. */
const KEY_CACHE_TTL_MS = 1_000
const CONNECT_TIMEOUT_SECONDS = 1
/** /ready's own bound on each check (PROBE_TIMEOUT_MS in src/modules/health/routes.ts). */
const READY_CHECK_MS = 2_000
/**
 * What a loaded machine may add to an outage answer's own deadline: seconds, where the regressions
 * these bounds catch take 30 s (postgres.js's default connect timeout) or hang (the fetch gives up at 15 s).
 */
const SLACK_MS = 5_000
/**
 * Each outage under load lasts this long, with requests sent at this steady rate whatever the
 * answers take: a service whose requests queue behind connection attempts answers ever later
 * (3.0–9.8 s at a 3 s connect timeout before the connection guard), then not at all.
 */
const LOAD_SECONDS = 25
const LOAD_PER_SECOND = 40

type Reply = { status: number; headers: Headers; body: any; ms: number }

describe.skipIf(!services)('a database outage under a running service', async () => {
  let child: ReturnType<typeof Bun.spawn> | undefined
  let proxy: TcpProxy | undefined
  // Registered before freshDatabase's hook (hooks run in order): the service lets go of the
  // database before it is dropped.
  afterAll(async () => {
    if (child) await stopProcess(child)
    await proxy?.close()
  }, 30_000)
  const { default: postgres } = await import('postgres')
  // On the server's own database, so it can shut the test's database to connections.
  const admin = services ? postgres(TEST_DATABASE_URL!, { max: 1, onnotice: () => {} }) : undefined
  afterAll(() => admin?.end({ timeout: 5 }), 30_000)
  const database = services ? await freshDatabase('seeded') : undefined
  const databaseName = database ? new URL(database.url!).pathname.slice(1) : ''
  const prefix = testRedisPrefix()
  const redis = services ? await testRedis(prefix) : undefined
  /** Every line the service wrote to stdout, from start to stop. */
  const logs: string[] = []
  /** Resolves once the service's stdout has closed: every line it wrote is in `logs`. */
  let stdoutClosed: Promise<void> = Promise.resolve()
  let base = ''
  let business: TestAccount
  let revoked: TestAccount
  let cardIds = ''
  const unknownKey = `tcg_live_${randomBytes(24)
    .toString('base64')
    .replace(/[^0-9A-Za-z]/g, '')
    .padEnd(32, 'x')
    .slice(0, 32)}`
  const signupEmail = `outage-signup-${process.pid}@example.com`
  const signupPassword = 'an outage-time password'

  beforeAll(async () => {
    const target = new URL(TEST_DATABASE_URL!)
    proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port || 5432) })
    business = await accountWithKey(database!.db, 'business', systemClock.now())
    revoked = await accountWithKey(database!.db, 'business', systemClock.now())
    const ids = await selectRows<{ id: number }>(database!.db, sql`select id from cards order by id limit 3`)
    cardIds = ids.map((row) => row.id).join(',')

    child = Bun.spawn([process.execPath, 'test/fixtures/outage-server.ts'], {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? '',
        DATABASE_URL: proxy.via(database!.url!),
        REDIS_URL: TEST_REDIS_URL,
        REDIS_KEY_PREFIX: prefix,
        PORT: '0',
        HOST: '127.0.0.1',
        LOG_LEVEL: 'info',
        DATABASE_CONNECT_TIMEOUT_SECONDS: String(CONNECT_TIMEOUT_SECONDS),
        DATABASE_STATEMENT_TIMEOUT_SECONDS: '2',
        KEY_CACHE_TTL_MS: String(KEY_CACHE_TTL_MS),
      },
      stdout: 'pipe',
      stderr: 'inherit',
    })
    const listening = Promise.withResolvers<string>()
    stdoutClosed = (async () => {
      const decoder = new TextDecoder()
      let buffered = ''
      for await (const chunk of child!.stdout as ReadableStream<Uint8Array>) {
        buffered += decoder.decode(chunk, { stream: true })
        const lines = buffered.split('\n')
        buffered = lines.pop()!
        for (const line of lines) {
          logs.push(line)
          if (line.includes('"msg":"listening"')) listening.resolve(JSON.parse(line).url)
        }
      }
      listening.reject(new Error(`the service exited before listening: ${logs.join('\n')}`))
    })()
    base = await listening.promise
  }, 60_000) // the service builds its first price snapshot before it listens

  async function send(path: string, init: { key?: string; cookie?: string; body?: unknown; method?: string } = {}): Promise<Reply> {
    const headers: Record<string, string> = {}
    if (init.key) headers['x-api-key'] = init.key
    if (init.cookie) headers.cookie = init.cookie
    if (init.body !== undefined) headers['content-type'] = 'application/json'
    const started = systemClock.monotonic()
    const response = await fetch(`${base}${path}`, {
      method: init.method ?? (init.body === undefined ? 'GET' : 'POST'),
      headers,
      body: init.body === undefined ? undefined : JSON.stringify(init.body),
      signal: AbortSignal.timeout(15_000),
    })
    const text = await response.text()
    return { status: response.status, headers: response.headers, body: text ? JSON.parse(text) : undefined, ms: systemClock.monotonic() - started }
  }

  // Search and autocomplete read the snapshot's search index: no database either.
  const snapshotRoutes = () => [
    '/v1/prices/top-movers?limit=2',
    `/v1/bulk/prices?ids=${cardIds}`,
    '/v1/prices/changes?since=2020-01-01T00:00:00Z&limit=2',
    '/v1/search?q=ch&per_page=2',
    '/v1/cards/autocomplete?q=ch',
  ]
  const databaseRoutes = () => [
    { path: '/v1/sets?per_page=1', key: business.key },
    { path: '/v1/keys', cookie: business.cookie },
    { path: '/v1/auth/me', cookie: business.cookie },
    { path: '/v1/auth/login', body: { email: business.email, password: business.password } },
    { path: '/v1/auth/signup', body: { email: signupEmail, password: signupPassword } },
  ]

  function expectUnavailable(reply: Reply, withinMs: number) {
    expect({ status: reply.status, code: reply.body?.error?.code }).toEqual({ status: 503, code: 'SERVICE_UNAVAILABLE' })
    expect(typeof reply.body.error.message).toBe('string')
    expect(reply.headers.get('retry-after')).toMatch(/^[1-9]\d?$/)
    expect(reply.ms).toBeLessThan(withinMs)
  }

  let remaining = 0
  /** A snapshot route for the business key: 200, and the quota counted one more request. */
  async function expectServed(path: string) {
    const reply = await send(path, { key: business.key })
    expect({ path, status: reply.status }).toEqual({ path, status: 200 })
    const now = Number(reply.headers.get('x-ratelimit-remaining'))
    expect(now).toBe(remaining - 1)
    remaining = now
  }

  test('before: every route answers, and both keys are known to the service', async () => {
    const first = await send('/v1/sets?per_page=1', { key: business.key })
    expect(first.status).toBe(200)
    remaining = Number(first.headers.get('x-ratelimit-remaining'))
    for (const path of snapshotRoutes()) await expectServed(path)
    expect((await send('/v1/prices/top-movers?limit=1', { key: revoked.key })).status).toBe(200)
    expect((await send('/v1/keys', { cookie: business.cookie })).status).toBe(200)
    expect((await send('/ready')).status).toBe(200)
  })

  /** Waits until the service reads its database again (a probe follows the last failed attempt within a second). */
  async function recovered() {
    return eventually(
      async () => {
        const answer = await send('/ready')
        return answer.body?.status === 'ready' && answer
      },
      { timeout: 15_000, what: '/ready answering ready again' },
    )
  }

  test('the database refuses connections itself (ALLOW_CONNECTIONS false, backends terminated): known keys keep the snapshot routes; the rest is 503', async () => {
    await admin!.unsafe(`alter database ${databaseName} allow_connections false`)
    try {
      await admin!.unsafe('select pg_terminate_backend(pid) from pg_stat_activity where datname = $1', [databaseName])
      // Every key cached before has expired (a real TTL in the service's process: real time must pass).
      await systemClock.sleep(KEY_CACHE_TTL_MS + 300)
      // SQLSTATE 55000 "not currently accepting connections" is an outage: the last-known keys apply.
      for (let round = 0; round < 2; round++) for (const path of snapshotRoutes()) await expectServed(path)
      for (const route of databaseRoutes()) expectUnavailable(await send(route.path, route), SLACK_MS)
      remaining--
      expectUnavailable(await send('/v1/prices/top-movers', { key: unknownKey }), SLACK_MS)
      const ready = await send('/ready')
      expect(ready.body).toMatchObject({ status: 'degraded', checks: { database: 'error' } })
    } finally {
      await admin!.unsafe(`alter database ${databaseName} allow_connections true`)
    }
    await recovered()
  }, 30_000)

  type Recorded = { path: string; expected: 200 | 503; reply?: Reply; error?: string }

  /**
   * LOAD_SECONDS of requests at LOAD_PER_SECOND, sent on schedule whatever the earlier ones take:
   * snapshot routes for the known key (200), database routes and an unknown key (503). Each is
   * recorded with its answer, or with the error of a request that got none.
   */
  async function underLoad(): Promise<Recorded[]> {
    const kinds: Array<{ path: string; key?: string; cookie?: string; expected: 200 | 503 }> = [
      { path: '/v1/prices/top-movers?limit=2', key: business.key, expected: 200 },
      { path: '/v1/sets?per_page=1', key: business.key, expected: 503 },
      { path: '/v1/keys', cookie: business.cookie, expected: 503 },
      { path: `/v1/bulk/prices?ids=${cardIds}`, key: business.key, expected: 200 },
      { path: '/v1/prices/top-movers', key: unknownKey, expected: 503 },
    ]
    const sent: Promise<Recorded>[] = []
    const started = systemClock.monotonic()
    for (let i = 0; systemClock.monotonic() - started < LOAD_SECONDS * 1000; i++) {
      const { expected, ...route } = kinds[i % kinds.length]!
      sent.push(
        send(route.path, route).then(
          (reply) => ({ path: route.path, expected, reply }),
          (error: unknown) => ({ path: route.path, expected, error: String(error) }),
        ),
      )
      // The load's pace, not a wait for something to happen.
      await systemClock.sleep(1000 / LOAD_PER_SECOND)
    }
    return Promise.all(sent)
  }

  /** Every request answered, as expected, within the connect timeout and a loaded machine's slack. */
  async function expectAnsweredUnderLoad(recorded: Recorded[]) {
    expect(recorded.length).toBeGreaterThan(LOAD_SECONDS * LOAD_PER_SECOND * 0.5)
    expect(recorded.filter((request) => request.error !== undefined)).toEqual([])
    const bound = CONNECT_TIMEOUT_SECONDS * 1000 + SLACK_MS
    const slowest = Math.max(...recorded.map((request) => request.reply!.ms))
    expect(slowest).toBeLessThan(bound)
    for (const { path, expected, reply } of recorded) {
      expect({ path, status: reply!.status }).toEqual({ path, status: expected })
      if (expected === 503) expectUnavailable(reply!, bound)
    }
    // The keyed requests were charged: take the count up again from the next answer.
    const next = await send('/v1/prices/top-movers?limit=2', { key: business.key })
    expect(next.status).toBe(200)
    remaining = Number(next.headers.get('x-ratelimit-remaining'))
  }

  test(`connections refused for ${LOAD_SECONDS} s under load: every request answered at once, as a 503 or from the snapshot`, async () => {
    await proxy!.refuse()
    proxy!.cut()
    await expectAnsweredUnderLoad(await underLoad())
  }, 90_000)

  test(`connections stalled for ${LOAD_SECONDS} s under load: every request answered within the connect timeout, none left waiting`, async () => {
    await proxy!.stall()
    proxy!.cut()
    await expectAnsweredUnderLoad(await underLoad())
  }, 90_000)

  test('connections refused and cut: known keys keep the snapshot routes past the cache TTL; the rest is 503 at once', async () => {
    await proxy!.refuse()
    proxy!.cut()
    // A real TTL in the service's own process, so real time must pass (a sleep only ever runs
    // long, so load cannot make it too short): every key cached before the outage has expired.
    await systemClock.sleep(KEY_CACHE_TTL_MS + 300)

    for (let round = 0; round < 2; round++) for (const path of snapshotRoutes()) await expectServed(path)
    for (const route of databaseRoutes()) expectUnavailable(await send(route.path, route), SLACK_MS)
    remaining-- // the keyed 503 was charged too (docs/adr/0036-quota-accounting.md)
    // Unknown: the service cannot tell whether the key exists, so it does not say it does not.
    expectUnavailable(await send('/v1/prices/top-movers', { key: unknownKey }), SLACK_MS)

    const ready = await send('/ready')
    // Still in the pool: the snapshot routes answer.
    expect(ready.status).toBe(200)
    expect(ready.body).toMatchObject({ status: 'degraded', checks: { database: 'error', redis: 'ok', quota: 'shared' } })
    expect(ready.ms).toBeLessThan(SLACK_MS)
  }, 30_000)

  test('connections stalled: every answer still comes within the connect timeout, never a 30 s hang', async () => {
    await proxy!.stall()
    const bound = CONNECT_TIMEOUT_SECONDS * 1000 + SLACK_MS
    for (const route of databaseRoutes()) expectUnavailable(await send(route.path, route), bound)
    remaining--
    expectUnavailable(await send('/v1/bulk/prices?ids=1', { key: unknownKey }), bound)
    for (const path of snapshotRoutes()) await expectServed(path)
    const ready = await send('/ready')
    expect(ready.body.checks.database).toBe('error')
    expect(ready.ms).toBeLessThan(READY_CHECK_MS + SLACK_MS)
  }, 60_000)

  test('a key revoked during the outage (announced on Redis) is refused at once', async () => {
    await proxy!.refuse()
    proxy!.cut()
    expect((await send('/v1/prices/top-movers?limit=1', { key: revoked.key })).status).toBe(200)
    // Another node, still connected, revoked it and told every node.
    await database!.db.execute(sql`update api_keys set is_active = false where id = ${revoked.keyId}`)
    await publishAuthEvent(redis, { kind: 'key', hash: sha256Hex(revoked.key) }, testLogger)
    const started = systemClock.monotonic()
    const reply = await eventually(
      async () => {
        const answer = await send('/v1/prices/top-movers?limit=1', { key: revoked.key })
        return answer.status !== 200 && answer
      },
      { what: 'the revocation refused' },
    )
    // Within a second (docs/adr/0007-the-key-check.md) on a quiet machine; unannounced, the key would be served
    // from its last-known record for an hour.
    expect(systemClock.monotonic() - started).toBeLessThan(SLACK_MS)
    expectUnavailable(reply, SLACK_MS)
    await expectServed('/v1/prices/top-movers?limit=1') // the other key is untouched
  }, 30_000)

  test('after: everything answers again without a restart, and the revoked key is refused as such', async () => {
    await proxy!.resume()
    expect((await recovered()).body).toMatchObject({ status: 'ready', checks: { database: 'ok', redis: 'ok' } })

    expect((await send('/v1/sets?per_page=1', { key: business.key })).status).toBe(200)
    remaining--
    for (const path of snapshotRoutes()) await expectServed(path)
    expect((await send('/v1/keys', { cookie: business.cookie })).status).toBe(200)
    expect((await send('/v1/auth/login', { body: { email: business.email, password: business.password } })).status).toBe(200)
    expect((await send('/v1/auth/signup', { body: { email: signupEmail, password: signupPassword } })).status).toBe(201)
    expect((await send('/v1/prices/top-movers', { key: revoked.key })).body.error.code).toBe('INVALID_API_KEY')
    expect((await send('/v1/prices/top-movers', { key: unknownKey })).status).toBe(401)
  }, 30_000)

  test('the logs say what happened, and hold no email, password hash, key, token or digest of one', async () => {
    // Every line, shutdown included: the service is stopped and its stdout read to the end.
    await stopProcess(child!)
    await stdoutClosed
    const text = logs.join('\n')
    const lines = logs.map((line) => JSON.parse(line))
    expect(lines.filter((line) => line.msg === 'database unavailable').length).toBeGreaterThan(5)
    expect(lines.filter((line) => line.msg === 'unhandled error')).toEqual([])

    const hashes = await selectRows<{ password_hash: string }>(database!.db, sql`select password_hash from accounts`)
    const tokens = [business, revoked].map((account) => account.cookie.slice('session='.length))
    const secrets = [
      ...[business, revoked].flatMap((account) => [account.email, account.password, account.key, sha256Hex(account.key)]),
      ...tokens.flatMap((token) => [token, sha256Hex(token)]),
      unknownKey,
      sha256Hex(unknownKey),
      signupEmail,
      signupPassword,
      ...hashes.map((row) => row.password_hash),
    ]
    for (const secret of secrets) expect(text).not.toContain(secret)
    expect(text).not.toContain('$argon2')
    expect(text).not.toMatch(/[0-9a-f]{64}/)
  }, 30_000)
})
