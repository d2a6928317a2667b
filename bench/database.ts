import { readdirSync, readFileSync } from 'node:fs'
import { like, sql } from 'drizzle-orm'
import Redis from 'ioredis'
import postgres from 'postgres'
import type { Database } from '../src/db/client'
import { accounts } from '../src/db/schema'
import { createAccount } from '../src/modules/auth/accounts'
import { createKey } from '../src/modules/auth/keys'
import { type Listening, ROOT, spawnUntilListening } from '../test/helpers/process'

/**
 * Creates the bench database if missing and seeds a demo catalog (default `small`) into it once
 * (the CLI migrates first; an already seeded database is left as it is). Returns the server's version.
 */
export async function prepareBenchDatabase(databaseUrl: string, scale = 'small'): Promise<string> {
  const url = new URL(databaseUrl)
  const name = url.pathname.slice(1)
  url.pathname = '/postgres'
  const admin = postgres(url.toString(), { max: 1, onnotice: () => {} })
  const [exists] = await admin`select 1 from pg_database where datname = ${name}`
  if (!exists) await admin.unsafe(`create database ${name}`)
  const [{ server_version }] = (await admin`show server_version`) as unknown as [{ server_version: string }]
  await admin.end()
  const seed = Bun.spawn([process.execPath, 'src/cli.ts', 'seed', '--scale', scale], {
    cwd: ROOT,
    env: { ...process.env, DATABASE_URL: databaseUrl, LOG_LEVEL: 'warn' },
    stdout: 'inherit',
    stderr: 'pipe',
  })
  const code = await seed.exited
  const stderr = await new Response(seed.stderr).text()
  if (code !== 0 && !stderr.includes('already has data')) throw new Error(`seeding failed: ${stderr}`)
  return server_version
}

/**
 * A bench run's Business keys (a fresh account each, so no run nears a quota) and the Redis key
 * prefix its service uses; `cleanup` removes the accounts and the Redis counters afterwards.
 */
export function benchAccounts(db: Database, name: string) {
  const emailPrefix = `bench-${name}-${process.pid}-`
  const redisPrefix = `tcg:bench:${process.pid}:`
  let made = 0
  return {
    redisPrefix,
    async freshKey(): Promise<string> {
      const account = await createAccount(db, { email: `${emailPrefix}${++made}@example.com`, password: 'bench password', tier: 'business' })
      return (await createKey(db, account, 'bench')).key
    },
    async cleanup(redisUrl: string) {
      await db.delete(accounts).where(like(accounts.email, `${emailPrefix}%`))
      const redis = new Redis(redisUrl)
      const keys = await redis.keys(`${redisPrefix}*`)
      if (keys.length > 0) await redis.del(...keys)
      redis.disconnect()
    },
  }
}

/**
 * The service (`src/index.ts`) on a free port against these PostgreSQL and Redis, its Redis keys
 * under `redisPrefix`, logging at info: the 'listening' line, and 'price snapshot built', are info logs.
 * With BENCH_PROFILE_DIR set, it writes a CPU profile (Markdown, Bun's `--cpu-prof-md`) there when it stops.
 * With `keepRest`, its log after the 'listening' line is kept too (`Listening.rest`).
 */
export function spawnBenchService(
  databaseUrl: string,
  redisUrl: string,
  redisPrefix: string,
  env: Record<string, string> = {},
  { keepRest = false }: { keepRest?: boolean } = {},
): Promise<Listening> {
  const profileDir = process.env.BENCH_PROFILE_DIR
  const profile = profileDir ? ['--cpu-prof-md', `--cpu-prof-dir=${profileDir}`] : []
  return spawnUntilListening(
    [...profile, 'src/index.ts'],
    {
      ...process.env,
      DATABASE_URL: databaseUrl,
      REDIS_URL: redisUrl,
      REDIS_KEY_PREFIX: redisPrefix,
      PORT: '0',
      HOST: '127.0.0.1',
      LOG_LEVEL: 'info',
      ...env,
    },
    { keepRest },
  )
}

// ---------------------------------------------------------------------------------------------
// CPU accounting, from /proc (bench/README.md "Budgets" judges ratios on CPU time per request)

const TICKS_PER_SECOND = 100

/** User and system CPU seconds so far of one process's /proc/<pid>/stat line. */
function statCpuTimes(stat: string): { user: number; system: number } {
  const after = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return { user: Number(after[11]) / TICKS_PER_SECOND, system: Number(after[12]) / TICKS_PER_SECOND }
}

function statCpuSeconds(stat: string): number {
  const { user, system } = statCpuTimes(stat)
  return user + system
}

/** User and system CPU seconds of one process so far; NaN once it has ended. */
export function processCpuTimes(pid: number): { user: number; system: number } {
  try {
    return statCpuTimes(readFileSync(`/proc/${pid}/stat`, 'utf8'))
  } catch {
    return { user: Number.NaN, system: Number.NaN }
  }
}

/** user + system CPU seconds of one process so far; NaN once it has ended. */
export function processCpuSeconds(pid: number): number {
  const { user, system } = processCpuTimes(pid)
  return user + system
}

/** CPU seconds so far of every PostgreSQL process on the machine. */
export function postgresCpuSeconds(): number {
  let total = 0
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
      if (stat.includes('(postgres)')) total += statCpuSeconds(stat)
    } catch {
      // The process ended meanwhile.
    }
  }
  return total
}

/** CPU seconds so far of each PostgreSQL process on the machine, by pid. */
function postgresCpuByPid(): Map<number, number> {
  const byPid = new Map<number, number>()
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
      if (stat.includes('(postgres)')) byPid.set(Number(pid), statCpuSeconds(stat))
    } catch {
      // The process ended meanwhile.
    }
  }
  return byPid
}

/**
 * PostgreSQL's CPU seconds from now until the returned function is called, process by process: a
 * backend that exits meanwhile takes its whole CPU time out of a plain sum (which can then go
 * negative), so only growth is counted, and a process started meanwhile counts from zero.
 */
export function postgresCpuMeter(): () => number {
  const before = postgresCpuByPid()
  return () => {
    let total = 0
    for (const [pid, seconds] of postgresCpuByPid()) total += Math.max(0, seconds - (before.get(pid) ?? 0))
    return total
  }
}

/** The machine's CPU seconds so far, from /proc/stat: all of them, the busy ones (all but idle and iowait) and the stolen ones. */
export function machineCpuSeconds(): { total: number; busy: number; steal: number } {
  const fields = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!.trim().split(/\s+/).slice(1, 9).map(Number)
  return {
    total: fields.reduce((sum, n) => sum + n, 0) / TICKS_PER_SECOND,
    busy: fields.reduce((sum, n, i) => (i === 3 || i === 4 ? sum : sum + n), 0) / TICKS_PER_SECOND,
    steal: (fields[7] ?? 0) / TICKS_PER_SECOND,
  }
}

/**
 * The hot reads' request mix on a bench catalog, shared by the benches that compare them (hot-path,
 * compression): 200 priced cards, BULK_LISTS lists of 500 distinct ids, six movers lists.
 */
export async function hotReadPaths(db: Database, bulkLists: number, bulkIds: number) {
  const select = async <T>(query: ReturnType<typeof sql>) => (await db.execute(query)) as unknown as T[]
  const [{ n: cardCount }] = (await select<{ n: number }>(sql`select count(*)::int as n from cards`)) as [{ n: number }]
  const cardIds = (await select<{ id: number }>(sql`select card_id as id from card_prices group by card_id order by random() limit 200`)).map((r) => r.id)
  const ids = (await select<{ id: number }>(sql`select id from cards order by random() limit ${bulkLists * bulkIds}`)).map((r) => r.id)
  const bulkPaths = Array.from({ length: bulkLists }, (_, i) => {
    // A catalog smaller than the lists: they overlap, each still of distinct ids.
    const list = Array.from({ length: bulkIds }, (_, j) => ids[(i * bulkIds + j) % ids.length]!)
    return `/v1/bulk/prices?ids=${[...new Set(list)].join(',')}`
  })
  const [{ slug: bigGame }] = (await select<{ slug: string }>(sql`select g.slug from games g join cards c on c.game_id = g.id group by g.slug order by count(*) desc limit 1`)) as [
    { slug: string },
  ]
  const moverPaths = [
    '/v1/prices/top-movers?period=24h',
    '/v1/prices/top-movers?period=7d&direction=down',
    `/v1/prices/top-movers?game=${bigGame}&limit=50`,
    '/v1/prices/top-movers?type=Sealed%20Products',
    '/v1/prices/top-movers?printing=Foil',
    '/v1/prices/top-movers?period=30d&direction=down&type=Cards',
  ]
  return { cardCount, cardIds, bulkPaths, moverPaths }
}
