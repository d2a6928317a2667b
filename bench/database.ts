import { readdirSync, readFileSync } from 'node:fs'
import autocannon from 'autocannon'
import { like } from 'drizzle-orm'
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

export interface Run {
  result: autocannon.Result
  /** Requests over the time from the start to the last response. */
  rps: number
  /** The server's CPU time (user + system, from /proc) per request, in µs: what a ratio between two servers is judged on (DESIGN section 6). */
  cpuPerRequestUs: number
  /**
   * The share of the machine's CPU time the hypervisor gave to other guests during the run
   * (/proc/stat steal): on the shared VMs the benches have run on, the same yardstick moved 2×
   * between runs, and this says when a run was starved.
   */
  steal: number
}

/** Steal and total CPU ticks so far, from the first line of /proc/stat (0 and 0 where there is none). */
function cpuTicks(): { steal: number; total: number } {
  try {
    const fields = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!.trim().split(/\s+/).slice(1, 9).map(Number)
    return { steal: fields[7] ?? 0, total: fields.reduce((sum, n) => sum + n, 0) }
  } catch {
    return { steal: 0, total: 0 }
  }
}

/**
 * `amount` requests to `server`, cycling through `paths`, by autocannon in this process;
 * autocannon reports whole milliseconds. No If-None-Match: full responses. For runs that must stay
 * within one account's quota (a fixed count); load.ts runs for a time instead, with wrk.
 *
 * autocannon shares the cores with the server, so req/s is bounded by the client as much as by the
 * server: ratios between servers are judged on `cpuPerRequestUs`. With `amount`, autocannon only
 * notices it is done on its one-second tick, so its own `duration` is rounded up to whole seconds
 * (20,000 requests in 2.3 s read as 6,645 req/s instead of 8,700): req/s is timed here, from the
 * start to the last response.
 */
export function loadPaths(server: Listening, paths: string[], amount: number, connections: number, key?: string): Promise<Run> {
  let next = 0
  let last = 0
  const ticksBefore = cpuTicks()
  const cpuBefore = processCpuSeconds(server.child.pid)
  const started = performance.now()
  return new Promise<Run>((resolve, reject) => {
    const instance = autocannon(
      {
        url: server.url,
        connections,
        amount,
        headers: key ? { 'x-api-key': key } : {},
        requests: [{ setupRequest: (request) => ({ ...request, path: paths[next++ % paths.length]! }) }],
      },
      (error, result) => {
        if (error) return reject(error)
        if (result.non2xx > 0 || result.errors > 0 || result.timeouts > 0) {
          return reject(new Error(`${server.url}: ${result.non2xx} non-2xx, ${result.errors} errors, ${result.timeouts} timeouts`))
        }
        const cpu = processCpuSeconds(server.child.pid) - cpuBefore
        const ticksAfter = cpuTicks()
        const steal = (ticksAfter.steal - ticksBefore.steal) / Math.max(1, ticksAfter.total - ticksBefore.total)
        const requests = result.requests.total
        resolve({ result, rps: requests / ((last - started) / 1000), cpuPerRequestUs: (cpu / requests) * 1e6, steal })
      },
    )
    instance.on('response', () => {
      last = performance.now()
    })
  })
}

/**
 * The service (`src/index.ts`) on a free port against these PostgreSQL and Redis, its Redis keys
 * under `redisPrefix`, logging at info: the 'listening' line, and 'price snapshot built', are info logs.
 * With BENCH_PROFILE_DIR set, it writes a CPU profile (Markdown, Bun's `--cpu-prof-md`) there when it stops.
 */
export function spawnBenchService(databaseUrl: string, redisUrl: string, redisPrefix: string, env: Record<string, string> = {}): Promise<Listening> {
  const profileDir = process.env.BENCH_PROFILE_DIR
  const profile = profileDir ? ['--cpu-prof-md', `--cpu-prof-dir=${profileDir}`] : []
  return spawnUntilListening([...profile, 'src/index.ts'], {
    ...process.env,
    DATABASE_URL: databaseUrl,
    REDIS_URL: redisUrl,
    REDIS_KEY_PREFIX: redisPrefix,
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'info',
    ...env,
  })
}

// ---------------------------------------------------------------------------------------------
// CPU accounting, from /proc (DESIGN section 6 judges ratios on CPU time per request)

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

/** The machine's busy CPU seconds (all but idle and iowait) and stolen seconds so far, from /proc/stat. */
export function machineCpuSeconds(): { busy: number; steal: number } {
  const fields = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!.trim().split(/\s+/).slice(1, 9).map(Number)
  return {
    busy: fields.reduce((sum, n, i) => (i === 3 || i === 4 ? sum : sum + n), 0) / TICKS_PER_SECOND,
    steal: (fields[7] ?? 0) / TICKS_PER_SECOND,
  }
}
