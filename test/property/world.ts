import { afterAll } from 'bun:test'
import { sql } from 'drizzle-orm'
import { startSession } from '../../src/modules/auth/accounts'
import { systemClock, withTimeout } from '../../src/shared/clock'
import { accountWithKey, testRedis, testRedisPrefix } from '../helpers/auth'
import { freshDatabase, selectRows, type TestDatabase, testLogger } from '../helpers/db'
import { TEST_REDIS_URL } from '../helpers/env'
import { ROOT, stopProcess } from '../helpers/process'
import { startServer } from '../helpers/server'

/**
 * Everything the hostile-request properties run against: the real service on a real port, a
 * seeded PostgreSQL (or PGlite) database, API keys of several tiers, a live session made over HTTP,
 * a few real ids and names to aim at, and a digest of the stored rows.
 */
export interface World {
  base: string
  port: number
  /** 'process': `bun src/index.ts` as the README starts it (no NODE_ENV); 'in-process': the test's own app. */
  mode: 'process' | 'in-process'
  keys: { free: string; pro: string; business: string; revoked: string }
  /**
   * `session=<live-session>`: generated requests carry this placeholder, replaced when sent by the
   * account's live session (`liveSession`), which `renewSession` replaces after a successful logout,
   * so the cookie routes tried later still see a valid session.
   */
  cookie: string
  liveSession(): string
  renewSession(): Promise<void>
  email: string
  password: string
  /** Key ids of the session's account (a DELETE may legitimately revoke them) and of other accounts. */
  ownKeyIds: string[]
  otherKeyIds: string[]
  samples: Samples
  openapi: any
  /** Per table, a digest of its rows (usage counters left out, see USAGE_COUNTERS). */
  digest(options?: { catalogHistory?: boolean }): Promise<Record<string, string>>
  /** How many lines the service has logged (process mode), and the lines logged since such a count. */
  logCount(): number
  logsSince(count: number): string[]
}

export interface Samples {
  cardIds: number[]
  setIds: number[]
  marketplaceIds: number[]
  gameSlugs: string[]
  gameIds: number[]
  printings: string[]
  rarities: string[]
  cardNames: string[]
}

/**
 * What a correctly refused request may still change, by design, so the digests leave it out:
 * docs/adr/0036-quota-accounting.md charges a request once its key is valid "whatever happens after (404 and 400
 * cost too)", and those counts reach `daily_usage` and the key's `total_requests`/`last_used_at`
 * in batches (docs/adr/0039-usage-counters-in-postgresql.md) at any moment.
 */
const USAGE_COUNTERS = { tables: ['daily_usage'], columns: { api_keys: ['total_requests', 'last_used_at'] } as Record<string, string[]> }

/**
 * The price history is the one large table (46k rows; a digest of it costs ~300 ms) and no route
 * writes it: it is digested before and after the whole file instead of around every request.
 */
const LARGE_READ_ONLY = ['price_history']

export const PASSWORD = 'correct horse battery staple'
/** Stands for the live session token in generated requests (see World.cookie). */
export const LIVE_SESSION = '<live-session>'

export async function createWorld(): Promise<World> {
  // bun runs afterAll hooks in the order they were registered: this one, registered before
  // freshDatabase's, stops the service before its database is dropped.
  let stopService = async () => {}
  afterAll(() => stopService(), 30_000)
  const database = await freshDatabase('seeded')
  const redisPrefix = testRedisPrefix()
  const redis = await testRedis(redisPrefix)
  const served =
    database.url !== undefined
      ? await spawnService(database, TEST_REDIS_URL ? { url: TEST_REDIS_URL, prefix: redisPrefix } : undefined, (stop) => (stopService = stop))
      : inProcessService(database, redis)
  const { base } = served
  const port = Number(new URL(base).port)

  const [free, pro, business, revoked] = await Promise.all((['free', 'pro', 'business', 'pro'] as const).map((tier) => accountWithKey(database.db, tier)))
  const revokedAnswer = await fetch(`${base}/v1/keys/${revoked!.publicKeyId}`, { method: 'DELETE', headers: { cookie: revoked!.cookie } })
  if (revokedAnswer.status !== 200) throw new Error(`could not revoke the test key: ${revokedAnswer.status} ${await revokedAnswer.text()}`)

  // The session the cookie routes see: signed up over HTTP, as a browser would.
  const email = `hostile-${process.pid}-${systemClock.now().getTime()}@example.com`
  const signup = await fetch(`${base}/v1/auth/signup`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email, password: PASSWORD }),
  })
  const cookie = /^session=[^;]+/.exec(signup.headers.get('set-cookie') ?? '')?.[0]
  if (signup.status !== 201 || !cookie) throw new Error(`signup failed: ${signup.status} ${await signup.text()}`)
  let session = cookie.slice('session='.length)
  const accountId: number = ((await signup.json()) as any).data.id
  const ownKeyIds: string[] = []
  for (const name of ['hostile one', 'hostile two']) {
    const created = await fetch(`${base}/v1/keys`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', cookie },
      body: JSON.stringify({ name }),
    })
    if (created.status !== 201) throw new Error(`key creation failed: ${created.status} ${await created.text()}`)
    ownKeyIds.push(((await created.json()) as any).data.id)
  }

  const openapiAnswer = await fetch(`${base}/openapi.json`)
  if (openapiAnswer.status !== 200) throw new Error(`/openapi.json answered ${openapiAnswer.status}`)
  const openapi = await openapiAnswer.json()

  const column = async <T>(query: ReturnType<typeof sql>, name: string): Promise<T[]> => (await selectRows<Record<string, T>>(database.db, query)).map((row) => row[name]!)
  const samples: Samples = {
    cardIds: await column(sql`select id from cards order by id limit 40`, 'id'),
    setIds: await column(sql`select id from sets order by id limit 20`, 'id'),
    marketplaceIds: await column(sql`select marketplace_id as m from cards order by id limit 40`, 'm'),
    gameSlugs: await column(sql`select slug from games order by id limit 20`, 'slug'),
    gameIds: await column(sql`select id from games order by id limit 10`, 'id'),
    printings: await column(sql`select distinct printing from card_prices order by 1`, 'printing'),
    rarities: await column(sql`select distinct rarity from cards order by 1`, 'rarity'),
    cardNames: await column(sql`select name from cards order by id limit 40`, 'name'),
  }

  const tables = await column<string>(sql`select table_name from information_schema.tables where table_schema = 'public' and table_type = 'BASE TABLE' order by 1`, 'table_name')
  const digestQuery = (names: string[]) =>
    sql.raw(
      names
        .map((table) => {
          const drop = (USAGE_COUNTERS.columns[table] ?? []).map((c) => ` - '${c}'`).join('')
          return `select '${table}' as t, count(*)::int || ':' || md5(coalesce(string_agg(r, E'\\n' order by r), '')) as d
                  from (select (to_jsonb(x)${drop})::text as r from "${table}" x) s`
        })
        .join(' union all '),
    )
  const watched = tables.filter((t) => !USAGE_COUNTERS.tables.includes(t))
  const small = digestQuery(watched.filter((t) => !LARGE_READ_ONLY.includes(t)))
  const all = digestQuery(watched)
  const digest = async (options: { catalogHistory?: boolean } = {}) =>
    Object.fromEntries((await selectRows<{ t: string; d: string }>(database.db, options.catalogHistory ? all : small)).map((row) => [row.t, row.d]))

  return {
    base,
    port,
    mode: served.mode,
    keys: { free: free!.key, pro: pro!.key, business: business!.key, revoked: revoked!.key },
    cookie: `session=${LIVE_SESSION}`,
    liveSession: () => session,
    async renewSession() {
      // Through the service rather than a login, which the login throttle may be refusing by now.
      session = (await startSession(database.db, accountId, systemClock.now())).token
    },
    email,
    password: PASSWORD,
    ownKeyIds,
    otherKeyIds: [free!.publicKeyId, pro!.publicKeyId, business!.publicKeyId],
    samples,
    openapi,
    digest,
    logCount: served.logCount,
    logsSince: served.logsSince,
  }
}

function inProcessService(database: TestDatabase, redis: Awaited<ReturnType<typeof testRedis>>) {
  const server = startServer({ db: database.db, redis, logger: testLogger })
  return { base: server.base, mode: 'in-process' as const, logCount: () => 0, logsSince: (_count: number): string[] => [] }
}

/**
 * The service as its own process, started the way the README starts it (`bun src/index.ts`, no
 * NODE_ENV): a failure inside the app then reaches the client as the client would see it (an
 * error escaping the app's own handler aborts the test runner when the app is in-process), and a
 * dependence on NODE_ENV shows. Needs PostgreSQL, which both processes can open.
 */
async function spawnService(database: TestDatabase, redis: { url: string; prefix: string } | undefined, onStop: (stop: () => Promise<void>) => void) {
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? '/tmp',
    DATABASE_URL: database.url!,
    HOST: '127.0.0.1',
    PORT: '0',
    // info: the "listening" line carries the URL.
    LOG_LEVEL: 'info',
    // The run checks that requests leave the catalog as it was; a scheduled sync would not.
    JOBS_ENABLED: 'false',
    // Without it webhook creation answers its deliberate 503; with it every refusal is a 4xx.
    WEBHOOK_SECRET_KEY: Buffer.alloc(32, 9).toString('base64'),
    ...(redis && { REDIS_URL: redis.url, REDIS_KEY_PREFIX: redis.prefix }),
  }
  const child = Bun.spawn([process.execPath, 'src/index.ts'], { cwd: ROOT, env, stdout: 'pipe', stderr: 'pipe' })
  const logs: string[] = []
  let logged = 0
  const keep = (line: string) => {
    logs.push(line.length > 2000 ? `${line.slice(0, 2000)}…` : line)
    logged++
    if (logs.length > 200) logs.shift()
  }
  let listening: (url: string) => void = () => {}
  const url = new Promise<string>((resolve) => (listening = resolve))
  const drain = async (stream: ReadableStream<Uint8Array>) => {
    const decoder = new TextDecoder()
    let buffered = ''
    for await (const chunk of stream) {
      buffered += decoder.decode(chunk, { stream: true })
      let newline = buffered.indexOf('\n')
      while (newline >= 0) {
        const line = buffered.slice(0, newline)
        buffered = buffered.slice(newline + 1)
        newline = buffered.indexOf('\n')
        keep(line)
        if (line.startsWith('{')) {
          try {
            const parsed = JSON.parse(line)
            if (typeof parsed.msg === 'string' && parsed.msg.startsWith('listening')) listening(parsed.url)
          } catch {}
        }
      }
    }
  }
  void drain(child.stdout)
  void drain(child.stderr)
  onStop(() => stopProcess(child, 8_000))
  const started = Promise.race([
    url,
    child.exited.then((code) => {
      throw new Error(`bun src/index.ts exited (${code}) before listening:\n${logs.join('\n')}`)
    }),
  ])
  const base = await withTimeout(systemClock, started, 60_000, () => new Error(`bun src/index.ts did not listen within 60 s:\n${logs.join('\n')}`))
  return { base, mode: 'process' as const, logCount: () => logged, logsSince: (count: number) => logs.slice(Math.max(0, logs.length - (logged - count))) }
}
