import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Redis from 'ioredis'
import { redisOptions } from '../../src/deps'
import { HOT_CHARGES_PER_WINDOW } from '../../src/modules/auth/quota'
import { systemClock, utcDate } from '../../src/shared/clock'
import { accountWithKey, testRedis, testRedisPrefix } from '../helpers/auth'
import { freshDatabase, type TestDatabase, testLogger } from '../helpers/db'
import { TEST_DATABASE_URL, TEST_NOW, TEST_REDIS_URL } from '../helpers/env'
import { eventually } from '../helpers/eventually'
import { withProbes } from '../helpers/probes'
import { type Listening, ROOT, spawnUntilListening } from '../helpers/process'
import { freePort, spawnRedisServer } from '../helpers/redis-server'
import { startServer } from '../helpers/server'

// Quotas and key changes shared by several nodes, over real HTTP, real PostgreSQL and real Redis:
// two `test/fixtures/probe-server.ts` processes on one database and one Redis key prefix, and an
// in-process server whose private redis-server is killed and restarted mid-run.
// Without both services (the embedded PGlite run) there is nothing to share: the file is skipped.
const services = Boolean(TEST_DATABASE_URL && TEST_REDIS_URL)

type Reply = { status: number; headers: Headers; body: any }

/**
 * GET over a raw TCP connection. fetch() keeps at most 256 requests in flight (Bun's
 * BUN_CONFIG_MAX_HTTP_REQUESTS) and queues the rest; `burst` needs every request in flight at once.
 */
async function rawConnect(base: string, path: string, headers: Record<string, string>) {
  const { hostname, port } = new URL(base)
  const chunks: Buffer[] = []
  const closed = Promise.withResolvers<void>()
  const socket = await Bun.connect({
    hostname,
    port: Number(port),
    socket: {
      data: (_socket, data) => void chunks.push(Buffer.from(data)),
      close: () => closed.resolve(),
      error: (_socket, error) => closed.reject(error),
    },
  })
  const lines = [`GET ${path} HTTP/1.1`, `Host: ${hostname}:${port}`, 'Connection: close', ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`)]
  const request = `${lines.join('\r\n')}\r\n\r\n`
  return {
    /** Sends the request and resolves with the parsed response once the server closes the connection. */
    async send(): Promise<Reply> {
      expect(socket.write(request)).toBe(Buffer.byteLength(request))
      await closed.promise
      return parseResponse(Buffer.concat(chunks))
    },
  }
}

function parseResponse(raw: Buffer): Reply {
  const split = raw.indexOf('\r\n\r\n')
  expect(split).toBeGreaterThan(0)
  const [statusLine, ...headerLines] = raw.subarray(0, split).toString('latin1').split('\r\n')
  const status = Number(statusLine!.split(' ')[1])
  const headers = new Headers()
  for (const line of headerLines) {
    const colon = line.indexOf(':')
    headers.append(line.slice(0, colon).trim(), line.slice(colon + 1).trim())
  }
  let body = raw.subarray(split + 4)
  if (headers.get('transfer-encoding')?.toLowerCase() === 'chunked') {
    const parts: Buffer[] = []
    for (let at = 0; ; ) {
      const eol = body.indexOf('\r\n', at)
      const size = Number.parseInt(body.subarray(at, eol).toString('latin1'), 16)
      if (!size) break
      parts.push(body.subarray(eol + 2, eol + 2 + size))
      at = eol + 2 + size + 2
    }
    body = Buffer.concat(parts)
  } else if (headers.has('content-length')) {
    expect(body.length).toBe(Number(headers.get('content-length')))
  }
  return { status, headers, body: JSON.parse(body.toString('utf8')) }
}

type Target = { base: string; path: string; headers: Record<string, string> }

/**
 * Connects every request first, then sends them all in one go: all are in flight together.
 * With `waves`, sends them in that many equal slices a few milliseconds apart instead (still
 * without waiting for any answer), so each process's charges reach Redis in several batches.
 */
async function burst(targets: Target[], waves = 1): Promise<Reply[]> {
  const connections = await Promise.all(targets.map((t) => rawConnect(t.base, t.path, t.headers)))
  const replies: Promise<Reply>[] = []
  const size = Math.ceil(connections.length / waves)
  for (let start = 0; start < connections.length; start += size) {
    if (start > 0) await systemClock.sleep(5) // pacing the load, not waiting for anything
    for (const connection of connections.slice(start, start + size)) replies.push(connection.send())
  }
  return Promise.all(replies)
}

const json = async (response: Response) => (await response.json()) as any

/**
 * How soon a revocation or tier change made through one process must reach the other: the event
 * takes tens of ms even on a loaded machine, and a missed one would leave it to the 30 s key cache.
 */
const REACHES_WITHIN_MS = 1_000

/** How long (ms of real time) until `check` holds, asked again and again by `eventually`. */
async function timeUntil(check: () => Promise<boolean>, what: string): Promise<number> {
  const start = systemClock.monotonic()
  await eventually(check, { what })
  return systemClock.monotonic() - start
}

function expectRateLimitHeaders(headers: Headers, limit: number) {
  expect(headers.get('x-ratelimit-limit')).toBe(String(limit))
  expect(headers.get('x-ratelimit-remaining')).toMatch(/^\d+$/)
  expect(Number.isNaN(Date.parse(headers.get('x-ratelimit-reset') ?? ''))).toBe(false)
}

function expectRetryAfter(headers: Headers) {
  const retryAfter = headers.get('retry-after') ?? ''
  expect(retryAfter).toMatch(/^[1-9]\d*$/)
  expect(Number(retryAfter)).toBeLessThanOrEqual(86_400)
}

describe.skipIf(!services)('quotas and key changes shared by two processes', async () => {
  // Bun runs this callback even when the block is skipped: nothing may be set up then.
  const children: Listening[] = []
  // Registered before freshDatabase's hook (hooks run in order): the servers let go of the
  // database before it is dropped.
  afterAll(async () => {
    for (const { child } of children) child.kill('SIGTERM')
    const stopped = Promise.all(children.map(({ child }) => child.exited))
    // A process that has not stopped on SIGTERM within 10 s is killed.
    if ((await Promise.race([stopped, systemClock.sleep(10_000)])) === undefined) for (const { child } of children) child.kill('SIGKILL')
    await stopped
  }, 30_000)
  const prefix = testRedisPrefix()
  const database = services ? await freshDatabase('empty') : undefined
  const redis = services ? await testRedis(prefix) : undefined
  const env = () => ({
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? '',
    DATABASE_URL: database!.url,
    REDIS_URL: TEST_REDIS_URL,
    REDIS_KEY_PREFIX: prefix,
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'info',
  })
  let a: Listening
  let b: Listening

  beforeAll(async () => {
    expect(database!.url).toBeDefined()
    const start = async () => {
      const started = await spawnUntilListening(['test/fixtures/probe-server.ts'], env())
      children.push(started)
      return started
    }
    ;[a, b] = await Promise.all([start(), start()])
  }, 60_000)

  /**
   * Fires 300 requests for one fresh Free account (quota 100), alternately at A and B, and checks
   * the quota was exact across both: answers the requests each process admitted.
   */
  async function exactAcrossProcesses(waves: number) {
    const { key, accountId } = await accountWithKey(database!.db, 'free', systemClock.now())
    const headers = { 'x-api-key': key }
    // Free to call: both processes know the key before the burst, so no request waits on the database.
    for (const server of [a, b]) expect((await fetch(`${server.url}/v1/usage`, { headers })).status).toBe(200)

    const TOTAL = 300
    const targets = Array.from({ length: TOTAL }, (_, i) => ({ base: (i % 2 === 0 ? a : b).url, path: '/probe/catalog', headers }))
    const replies = await burst(targets, waves)

    const admitted = replies.filter((reply) => reply.status === 200)
    const refused = replies.filter((reply) => reply.status === 429)
    expect(replies.filter((reply) => reply.status !== 200 && reply.status !== 429).map((reply) => reply.status)).toEqual([])
    expect(admitted).toHaveLength(100)
    expect(refused).toHaveLength(TOTAL - 100)

    for (const reply of refused) {
      expect(reply.body.error.code).toBe('RATE_LIMIT_EXCEEDED')
      expectRetryAfter(reply.headers)
      expectRateLimitHeaders(reply.headers, 100)
      expect(reply.headers.get('x-ratelimit-remaining')).toBe('0')
    }
    // Each admitted request saw its own count: 99 left, 98 left, …, 0 left, none twice.
    const remaining = admitted.map((reply) => Number(reply.headers.get('x-ratelimit-remaining'))).sort((x, y) => x - y)
    expect(remaining).toEqual(Array.from({ length: 100 }, (_, i) => i))
    for (const reply of admitted) {
      expectRateLimitHeaders(reply.headers, 100)
      expect(reply.body.rate_limit.daily_remaining).toBe(Number(reply.headers.get('x-ratelimit-remaining')))
    }

    for (const server of [a, b]) {
      const usage = await fetch(`${server.url}/v1/usage`, { headers })
      expect(usage.status).toBe(200)
      expect((await json(usage)).data.account).toMatchObject({
        today_requests: 100,
        daily_limit: 100,
        daily_remaining: 0,
        rejected_today: refused.length,
      })
    }
    // The processes count on the real clock: today's hash under the shared prefix.
    expect(await redis!.hgetall(`quota:${utcDate(systemClock.now())}:${accountId}`)).toMatchObject({ used: '100', rejected: String(refused.length) })

    const admittedBy = (server: Listening) => replies.filter((reply, i) => targets[i]!.base === server.url && reply.status === 200).length
    return { a: admittedBy(a), b: admittedBy(b) }
  }

  test('300 requests in flight at once on two processes admit exactly the Free quota of 100', async () => {
    const admitted = await exactAcrossProcesses(1)
    // Both processes answered their 150 (checked above); which one admits is a race: each sends
    // its 150 charges to Redis as one auto-pipelined batch, and Redis runs the first batch it reads
    // before the other's, so in practice one process takes all 100 and the other refuses 150
    // while having admitted nothing itself, which it can only do from the shared count.
    expect(admitted.a + admitted.b).toBe(100)
  }, 30_000)

  test('300 overlapping requests sent in waves: both processes admit, and the total is still exact', async () => {
    // Ten waves of 30, 5 ms apart, no answer awaited: each process's charges reach Redis in several
    // batches that interleave with the other's, and the first wave alone (15 each) cannot use up 100.
    const admitted = await exactAcrossProcesses(10)
    expect(admitted.a).toBeGreaterThan(0)
    expect(admitted.b).toBeGreaterThan(0)
  }, 30_000)

  test('a key revoked through one process stops working on the other within a second', async () => {
    const account = await accountWithKey(database!.db, 'free', systemClock.now())
    const headers = { 'x-api-key': account.key }
    expect((await fetch(`${b.url}/probe/catalog`, { headers })).status).toBe(200) // B caches the key

    const revoke = await fetch(`${a.url}/v1/keys/${account.publicKeyId}`, { method: 'DELETE', headers: { cookie: account.cookie } })
    expect(revoke.status).toBe(200)
    const statuses: number[] = []
    const took = await timeUntil(async () => {
      const response = await fetch(`${b.url}/probe/catalog`, { headers })
      statuses.push(response.status)
      if (response.status !== 401) return false
      expect((await json(response)).error.code).toBe('INVALID_API_KEY')
      return true
    }, 'the revocation on B')
    expect(took).toBeLessThan(REACHES_WITHIN_MS)
    // Until then B answered from its cache (200); never anything else.
    expect(statuses.slice(0, -1).every((status) => status === 200)).toBe(true)
    expect((await fetch(`${a.url}/probe/catalog`, { headers })).status).toBe(401)
  }, 30_000)

  test('a tier change made with the CLI reaches the other process within a second', async () => {
    const account = await accountWithKey(database!.db, 'free', systemClock.now())
    const headers = { 'x-api-key': account.key }
    const before = await fetch(`${b.url}/probe/bulk_read`, { headers }) // B caches the Free identity
    expect(before.status).toBe(403)
    expect((await json(before)).error.code).toBe('TIER_REQUIRED')

    const cli = Bun.spawn([process.execPath, 'src/cli.ts', 'account:set-tier', '--email', account.email, '--tier', 'pro'], {
      cwd: ROOT,
      env: { ...env(), LOG_LEVEL: 'warn' },
      stdout: 'pipe',
      stderr: 'pipe',
    })
    const [code, stdout, stderr] = await Promise.all([cli.exited, new Response(cli.stdout).text(), new Response(cli.stderr).text()])
    expect({ code, stderr }).toEqual({ code: 0, stderr: '' })
    expect(stdout).toContain('is now on pro')

    let last: Response | undefined
    const took = await timeUntil(async () => {
      last = await fetch(`${b.url}/probe/bulk_read`, { headers })
      return last.status === 200
    }, 'the Pro tier on B')
    expect(took).toBeLessThan(REACHES_WITHIN_MS)
    expect(last!.headers.get('x-ratelimit-limit')).toBe('10000')
  }, 30_000)
})

describe.skipIf(!services)('Redis killed during a run', async () => {
  const prefix = testRedisPrefix()
  const dataDir = mkdtempSync(join(tmpdir(), 'tcg-redis-'))
  let redisServer: ReturnType<typeof Bun.spawn> | undefined
  let client: Redis | undefined
  afterAll(async () => {
    client?.disconnect()
    redisServer?.kill('SIGKILL')
    await redisServer?.exited
    rmSync(dataDir, { recursive: true, force: true })
  }, 30_000)
  // Seeded: /ready is only 200 (ready or degraded) with a catalog.
  const database: TestDatabase | undefined = services ? await freshDatabase('seeded') : undefined

  async function startRedis(port: number) {
    // Append-only file synced on every write: what Redis had counted survives the SIGKILL, as on
    // a server that comes back after a network partition or a restart with persistence.
    redisServer = await spawnRedisServer(port, ['--save', '', '--appendonly', 'yes', '--appendfsync', 'always', '--dir', dataDir])
  }

  /** The account's quota hash for the in-process server's day (its clock is TEST_NOW), read directly. */
  async function quotaHash(port: number, accountId: number) {
    const admin = new Redis({ port, host: '127.0.0.1', keyPrefix: prefix, lazyConnect: true })
    await admin.connect()
    try {
      return await admin.hgetall(`quota:${utcDate(TEST_NOW)}:${accountId}`)
    } finally {
      admin.disconnect()
    }
  }

  test('the service keeps answering on local counters, then hands the counts back to Redis', async () => {
    const port = await freePort()
    await startRedis(port)
    client = new Redis(`redis://127.0.0.1:${port}`, redisOptions(prefix))
    client.on('error', () => {})
    await client.connect()
    const server = startServer({ db: database!.db, redis: client, logger: testLogger }, withProbes)
    const { key, keyId, accountId } = await accountWithKey(database!.db, 'free')
    const headers = { 'x-api-key': key }
    let admitted = 0
    let refused = 0

    /** One charged request: 200 while quota is left, 429 after, always with the quota headers. */
    async function charge() {
      const response = await server.get('/probe/catalog', { headers })
      const body = await json(response)
      // Never a 500: the body is shown if it happens.
      expect({ status: response.status, ...(response.status >= 500 ? { body } : {}) }).toEqual({ status: admitted < 100 ? 200 : 429 })
      expectRateLimitHeaders(response.headers, 100)
      if (response.status === 200) admitted++
      else {
        refused++
        expect(body.error.code).toBe('RATE_LIMIT_EXCEEDED')
        expectRetryAfter(response.headers)
      }
      // Counting continues across the outage: never a fresh quota.
      expect(response.headers.get('x-ratelimit-remaining')).toBe(String(100 - admitted))
    }

    // Fewer than a lease takes (quota/leases.ts), so Redis holds every count as it stands; a lease
    // held through an outage has its own test (quota.test.ts).
    const before = HOT_CHARGES_PER_WINDOW - 1
    for (let i = 0; i < before; i++) await charge()
    expect(await quotaHash(port, accountId)).toMatchObject({ used: String(before), [`k:${keyId}`]: String(before) })
    const ready = await json(await server.get('/ready'))
    expect(ready).toMatchObject({ status: 'ready', checks: { redis: 'ok', quota: 'shared' } })

    redisServer!.kill('SIGKILL')
    await redisServer!.exited

    for (let i = 0; i < 110 - before; i++) await charge()
    expect({ admitted, refused }).toEqual({ admitted: 100, refused: 10 })
    const usage = await server.get('/v1/usage', { headers })
    expect(usage.status).toBe(200)
    expect((await json(usage)).data.account).toMatchObject({ today_requests: 100, daily_remaining: 0 })
    const degraded = await server.get('/ready')
    expect(degraded.status).toBe(200)
    expect(await json(degraded)).toMatchObject({ status: 'degraded', checks: { database: 'ok', redis: 'error', quota: 'degraded' } })

    await startRedis(port)
    // The once-a-second probe finds Redis back and hands the counts over.
    const back = await eventually(
      async () => {
        const body = await json(await server.get('/ready'))
        return body.checks.quota === 'shared' && body
      },
      { what: 'the quota shared again' },
    )
    expect(back).toMatchObject({ status: 'ready', checks: { redis: 'ok', quota: 'shared' } })
    // What was admitted and refused while Redis was away was added to what it had.
    expect(await quotaHash(port, accountId)).toMatchObject({ used: '100', rejected: '10', [`k:${keyId}`]: '100' })

    // Redis decides again: the account is over quota there.
    await charge()
    expect(refused).toBe(11)
    expect(await quotaHash(port, accountId)).toMatchObject({ used: '100', rejected: '11' })
  }, 60_000)
})
