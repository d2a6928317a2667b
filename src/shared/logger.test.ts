import { afterAll, describe, expect, test } from 'bun:test'
import { freshDatabase } from '../../test/helpers/db'
import { TEST_DATABASE_URL } from '../../test/helpers/env'
import { eventually } from '../../test/helpers/eventually'
import { startServer } from '../../test/helpers/server'
import { openPostgres } from '../db/client'
import { accounts } from '../db/schema'
import { findActiveKey, findSessionAccount } from '../modules/auth/repo'
import { newApiKey, sha256Hex } from '../modules/auth/secrets'
import { systemClock } from './clock'
import { createLogger } from './logger'

function capture() {
  const lines: string[] = []
  return { lines, logger: createLogger('info', { write: (line: string) => void lines.push(line) }) }
}

const failure = (run: () => Promise<unknown>) =>
  run().then(
    () => {
      throw new Error('expected a failure')
    },
    (error: unknown) => error,
  )

// The failures that leaked secrets, made for real: a signup insert refused by PostgreSQL (drizzle
// puts its parameters in the message, PostgreSQL the email in `detail`), and key and session
// lookups on a database that cannot be reached.
describe('database errors are logged without the values bound to the query', async () => {
  const { db } = await freshDatabase('empty')
  const email = 'someone.private@example.com'
  const passwordHash = await Bun.password.hash('a long enough password', 'argon2id')

  test('a refused signup insert: no email, no password hash, the SQL and the cause kept', async () => {
    await db.insert(accounts).values({ email, passwordHash, tier: 'free' })
    const error = await failure(() => db.insert(accounts).values({ email, passwordHash, tier: 'free' }))
    const { lines, logger } = capture()
    logger.error({ err: error }, 'unhandled error')
    const line = lines.join('')
    expect(line).not.toContain(email)
    expect(line).not.toContain('$argon2')
    expect(line).not.toContain(passwordHash.slice(-20))
    const logged = JSON.parse(line).err
    expect(logged.message).toStartWith('Failed query: insert into "accounts"')
    expect(logged.message).not.toContain('params')
    expect(logged.query).toContain('insert into "accounts"')
    // The driver's own error (postgres.js's PostgresError, or PGlite's) keeps its code.
    expect(logged.cause).toMatchObject({ code: '23505' })
    expect(logged.stack).toContain('Failed query')
  })

  test.skipIf(!TEST_DATABASE_URL)('key and session lookups on an unreachable database: no digest', async () => {
    const unreachable = await openPostgres('postgres://postgres@127.0.0.1:1/none', { connectTimeoutSeconds: 1 })
    afterAll(() => unreachable.close(), 30_000)
    const keyDigest = sha256Hex('tcg_live_0123456789abcdefghijABCDEFGHIJ01')
    const tokenDigest = sha256Hex('a session token')
    const { lines, logger } = capture()
    for (const error of [await failure(() => findActiveKey(unreachable.db, keyDigest)), await failure(() => findSessionAccount(unreachable.db, tokenDigest, systemClock.now()))]) {
      logger.warn({ err: error }, 'database unavailable')
    }
    const logs = lines.join('')
    expect(lines).toHaveLength(2)
    expect(logs).not.toContain(keyDigest)
    expect(logs).not.toContain(tokenDigest)
    expect(logs).not.toMatch(/[0-9a-f]{64}/)
    expect(JSON.parse(lines[0]!).err.cause.code).toBe('ECONNREFUSED')
  })

  test('errors that are not the database keep their fields, and redaction still applies', () => {
    const { lines, logger } = capture()
    const error = Object.assign(new Error('outer', { cause: new Error('inner') }), { code: 'E_SOMETHING' })
    logger.error({ err: error, key: 'tcg_live_secret', headers: { cookie: 'session=abc' }, webhook: { secret: 'whsec_abc' } }, 'failed')
    const line = JSON.parse(lines[0]!)
    expect(line.webhook.secret).toBe('[redacted]')
    expect(line.err).toMatchObject({ type: 'Error', message: 'outer', code: 'E_SOMETHING', cause: { type: 'Error', message: 'inner' } })
    expect(line.key).toBe('[redacted]')
    expect(line.headers.cookie).toBe('[redacted]')
  })
})

// A client that puts its key in the URL (`?token=…`, a path segment) during a database outage: the
// service answers 503 and logs the request's URL. A real server over HTTP, its database a port
// that refuses, its whole log read back.
describe.skipIf(!TEST_DATABASE_URL)('keys in a logged URL are redacted', async () => {
  const down = await openPostgres('postgres://postgres@127.0.0.1:1/none', { connectTimeoutSeconds: 1 })
  afterAll(() => down.close(), 30_000)
  const { lines, logger } = capture()
  const server = startServer({ db: down.db, redis: undefined, logger, clock: systemClock })

  test('in the query and the path, also upper-cased, truncated or percent-encoded; the rest of the URL stays', async () => {
    const keys = Array.from({ length: 7 }, () => newApiKey().raw)
    const body = (key: string) => key.slice('tcg_live_'.length)
    const percentEncoded = (text: string) => [...text].map((c) => `%${c.charCodeAt(0).toString(16).padStart(2, '0')}`).join('')
    const paths = [
      `/v1/cards/1?token=${keys[0]}`,
      `/v1/cards/${keys[1]}`,
      `/v1/cards/1/prices?x=1&api_key=${keys[2]}&y=2`,
      `/v1/cards/1?token=${keys[3]!.toUpperCase()}`,
      `/v1/cards/1?token=${keys[4]!.slice(0, 20)}`,
      `/v1/cards/1?token=tcg%5Flive%5F${body(keys[5]!)}`,
      `/v1/cards/1?token=${percentEncoded(keys[6]!)}`,
    ]
    const asker = newApiKey().raw
    for (const path of paths) {
      const response = await fetch(server.base + path, { headers: { 'x-api-key': asker } })
      expect({ path, status: response.status }).toEqual({ path, status: 503 })
    }
    const outage = () => lines.map((line) => JSON.parse(line)).filter((line) => line.msg === 'database unavailable')
    await eventually(() => outage().length >= paths.length, { what: 'every 503 logged' })
    const log = lines.join('')
    // Any 11 characters of a key's random part would be a leak (the display prefix shows 4).
    const leaked = keys.filter((key) => [body(key), body(key).toUpperCase(), percentEncoded(body(key))].some((part) => log.includes(part.slice(0, 11))))
    expect(leaked).toEqual([])
    const urls = outage().map((line) => line.url as string)
    expect(urls).toContain(`${server.base}/v1/cards/1?token=tcg_live_[redacted]`)
    expect(urls).toContain(`${server.base}/v1/cards/tcg_live_[redacted]`)
    expect(urls).toContain(`${server.base}/v1/cards/1/prices?x=1&api_key=tcg_live_[redacted]&y=2`)
  })
})

test('the display prefix (the prefix and 4 characters, as the key list shows it) stays readable; in any field, 5 characters are redacted', () => {
  const { lines, logger } = capture()
  logger.info({ keyPrefix: 'tcg_live_AbCd', note: 'sent tcg_live_AbCdE by mistake' }, 'key tcg_live_Zz9yXw in the message')
  const line = JSON.parse(lines[0]!)
  expect(line).toMatchObject({ keyPrefix: 'tcg_live_AbCd', note: 'sent tcg_live_[redacted] by mistake', msg: 'key tcg_live_[redacted] in the message' })
})
