/**
 * The key + quota path (the `apiKey` guard: SHA-256, key cache hit, quota charge) against the same
 * route without it, in one server process measured by autocannon from this one, in the same run.
 * Budget: keyed mean latency ≤ 1.25 × open mean latency (the median over rounds
 * of each round's ratio), judged on the card prices route (see ROUTES). Measured twice: with
 * the Redis quota store (shared) and with the in-process one (no REDIS_URL, the embedded mode).
 *
 *   BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/tcg_bench \
 *   BENCH_REDIS_URL=redis://127.0.0.1:6379 bun bench/auth-overhead.bench.ts
 *
 * Needs PostgreSQL and Redis; seeds the `small` demo catalog on the first run (as the catalog bench)
 * and removes the accounts and Redis keys it made. Exits 1 if a budget fails.
 */
import { cpus, loadavg, totalmem } from 'node:os'
import autocannon from 'autocannon'
import { like, sql } from 'drizzle-orm'
import Redis from 'ioredis'
import { openPostgres } from '../src/db/client'
import { accounts } from '../src/db/schema'
import { createAccount } from '../src/modules/auth/accounts'
import { createKey } from '../src/modules/auth/keys'
import { TIER_POLICY } from '../src/modules/auth/tiers'
import { spawnUntilListening } from '../test/helpers/process'
import { prepareBenchDatabase } from './database'

const DATABASE_URL = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/tcg_bench'
const REDIS_URL = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379'
const CONNECTIONS = 50
/** Requests per measured run: a fixed count, not a duration, so a keyed run can never reach the quota. */
const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 8_000)
const WARMUP_REQUESTS = 10_000
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 15)
const MAX_LATENCY_RATIO = 1.25
/**
 * The same work behind both routes, twice. `fixed body`: the handler returns a constant, so the
 * guard's whole cost shows (reported, not judged). `card prices`: one indexed Postgres read, the work
 * of a real keyed endpoint (GET /v1/cards/:id/prices): the budget is checked here.
 */
const ROUTES = [
  { name: 'fixed body', path: () => 'fixed', budget: false },
  { name: 'card prices (Postgres read)', path: () => `prices/${cardId}`, budget: true },
] as const
const QUOTA = TIER_POLICY.business.dailyQuota
// Each keyed run spends REQUESTS plus two checking requests on a fresh account: all must be 200s,
// or 429s (fast refusals) would flatter the keyed numbers.
if (REQUESTS + 2 > QUOTA) throw new Error(`BENCH_REQUESTS must leave room in the business quota (${QUOTA})`)

const REDIS_PREFIX = `tcg:bench:${process.pid}:`
const EMAIL_PREFIX = `bench-${process.pid}-`

const SECTIONS = [
  { name: 'Redis quota store', quotaMode: 'shared', env: { REDIS_URL, REDIS_KEY_PREFIX: REDIS_PREFIX } },
  { name: 'in-process quota store', quotaMode: 'local', env: { REDIS_URL: '' } },
]

const postgresVersion = await prepareBenchDatabase(DATABASE_URL)
const database = await openPostgres(DATABASE_URL, { max: 2 })
/** A card with several printings: the read returns a few rows, as the real endpoint does. */
const [{ card_id: cardId }] = (await database.db.execute(
  sql`select card_id from card_prices group by card_id having count(*) > 1 order by card_id limit 1`,
)) as unknown as [{ card_id: number }]
const redisAdmin = new Redis(REDIS_URL)
const redisVersion = /redis_version:(\S+)/.exec(await redisAdmin.info('server'))?.[1] ?? '?'

let accountsMade = 0
/** A fresh business account and key: each keyed run starts from an empty quota. */
async function freshKey(): Promise<string> {
  const email = `${EMAIL_PREFIX}${++accountsMade}@example.com`
  const account = await createAccount(database.db, { email, password: 'bench password', tier: 'business' })
  return (await createKey(database.db, account, 'bench')).key
}

/** Remaining quota after one keyed request, asserting it is a 200 (this also fills the key cache). */
async function remainingQuota(base: string, path: string, key: string): Promise<number> {
  const response = await fetch(`${base}/bench/keyed/${path}`, { headers: { 'x-api-key': key } })
  if (response.status !== 200) throw new Error(`keyed check: ${response.status} ${await response.text()}`)
  return Number(response.headers.get('x-ratelimit-remaining'))
}

async function quotaMode(base: string): Promise<string> {
  // /ready answers 503 on an empty catalog, but still reports the quota mode.
  return ((await (await fetch(`${base}/ready`)).json()) as { checks: { quota: string } }).checks.quota
}

interface Run {
  requests: number
  seconds: number
  rps: number
  mean: number
  p50: number
  p99: number
}

/**
 * `amount` requests at CONNECTIONS concurrency. Latencies come from autocannon's per-response event
 * (fractional ms), not from its histogram, which truncates to whole ms: at sub-millisecond
 * latencies that makes its mean and percentiles too coarse to compare a 25% difference.
 */
function load(url: string, amount: number, key?: string): Promise<Run> {
  const latencies = new Float64Array(amount)
  let count = 0
  let lastResponseAt = 0
  const startedAt = performance.now()
  return new Promise((resolve, reject) => {
    const instance = autocannon(
      // sampleInt: autocannon notices the last response only at its next sample tick (default 1 s).
      { url, connections: CONNECTIONS, amount, sampleInt: 10, headers: key ? { 'x-api-key': key } : {} },
      (error, result) => {
        if (error) return reject(error)
        if (result.non2xx > 0 || result.errors > 0 || result.timeouts > 0 || count !== amount) {
          return reject(new Error(`${url}: ${count}/${amount} responses, ${result.non2xx} non-2xx, ${result.errors} errors, ${result.timeouts} timeouts`))
        }
        latencies.sort()
        const seconds = (lastResponseAt - startedAt) / 1000
        resolve({
          requests: count,
          seconds,
          rps: count / seconds,
          mean: latencies.reduce((a, b) => a + b, 0) / count,
          p50: latencies[Math.floor(count * 0.5)]!,
          p99: latencies[Math.floor(count * 0.99)]!,
        })
      },
    )
    instance.on('response', (_client, _status, _bytes, responseTime) => {
      if (count < amount) latencies[count] = responseTime
      count++
      lastResponseAt = performance.now()
    })
  })
}

/** One keyed run on a fresh key, checking afterwards that every request was charged (none refused). */
async function loadKeyed(base: string, path: string, amount: number, expectedMode: string): Promise<Run> {
  const key = await freshKey()
  await remainingQuota(base, path, key)
  const run = await load(`${base}/bench/keyed/${path}`, amount, key)
  const remaining = await remainingQuota(base, path, key)
  if (remaining !== QUOTA - amount - 2) throw new Error(`quota: ${remaining} left after ${amount + 2} requests, expected ${QUOTA - amount - 2}`)
  // A Redis call failing under load would switch to local counters and flatter the keyed numbers.
  const mode = await quotaMode(base)
  if (mode !== expectedMode) throw new Error(`quota mode is ${mode} after a keyed run, expected ${expectedMode}`)
  return run
}

const ms = (n: number) => n.toFixed(2)
const range = (values: number[]) =>
  values.length === 1 ? ms(values[0]!) : `${ms(Math.min(...values))}–${ms(Math.max(...values))}`
const sum = (values: number[]) => values.reduce((a, b) => a + b, 0)
const median = (values: number[]) => {
  const sorted = values.toSorted((a, b) => a - b)
  const middle = sorted.length >> 1
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2
}
// Every run has the same request count, so the mean of run means is the mean over all requests.
const overall = (runs: Run[]) => ({
  mean: sum(runs.map((r) => r.mean)) / runs.length,
  rps: sum(runs.map((r) => r.requests)) / sum(runs.map((r) => r.seconds)),
})
/** req/s | mean | p50 | p99 of one variant's runs (p50, p99: the range over runs). */
const cells = (runs: Run[]) => {
  const { rps, mean } = overall(runs)
  return `${Math.round(rps)} | ${ms(mean)} | ${range(runs.map((r) => r.p50))} | ${range(runs.map((r) => r.p99))}`
}

const loadBefore = loadavg()
const roundRows: string[] = []
const summaryRows: string[] = []
let failed = false
try {
  for (const section of SECTIONS) {
    const { url: base, child } = await spawnUntilListening(['bench/auth-overhead-server.ts'], {
      ...process.env,
      DATABASE_URL,
      PORT: '0',
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
      ...section.env,
    })
    try {
      const mode = await quotaMode(base)
      if (mode !== section.quotaMode) throw new Error(`${section.name}: server reports quota mode ${mode}`)
      for (const route of ROUTES) {
        await load(`${base}/bench/open/${route.path()}`, WARMUP_REQUESTS)
        await loadKeyed(base, route.path(), WARMUP_REQUESTS, section.quotaMode)
      }
      for (const route of ROUTES) {
        const path = route.path()
        const runs = { open: [] as Run[], keyed: [] as Run[] }
        for (let round = 1; round <= ROUNDS; round++) {
          // Alternate which variant goes first, so drift (heat, a background flush) hits both alike.
          const order = round % 2 === 1 ? (['open', 'keyed'] as const) : (['keyed', 'open'] as const)
          for (const variant of order) {
            runs[variant].push(
              variant === 'open'
                ? await load(`${base}/bench/open/${path}`, REQUESTS)
                : await loadKeyed(base, path, REQUESTS, section.quotaMode),
            )
          }
          // Per round too: a neighbour's load that comes and goes shows up as rounds that disagree.
          const [open, keyed] = [runs.open.at(-1)!, runs.keyed.at(-1)!]
          roundRows.push(`| ${section.name} | ${route.name} | ${round} | ${cells([open])} | ${cells([keyed])} | ${(keyed.mean / open.mean).toFixed(2)} |`)
        }
        const open = overall(runs.open)
        const keyed = overall(runs.keyed)
        // Judged on the median of the rounds' ratios: each round's two runs are back to back, so a
        // neighbour's burst (this machine shares two cores with other services) skews one pair,
        // not the verdict. The ratio of the overall means is printed beside it.
        const pairedRatio = median(runs.keyed.map((run, i) => run.mean / runs.open[i]!.mean))
        const verdict = route.budget ? (pairedRatio <= MAX_LATENCY_RATIO ? 'PASS' : 'FAIL') : 'reported'
        failed ||= verdict === 'FAIL'
        summaryRows.push(
          `| ${section.name} | ${route.name} | ${cells(runs.open)} | ${cells(runs.keyed)} | ${(keyed.mean / open.mean).toFixed(2)} | ${pairedRatio.toFixed(2)} | ${(keyed.rps / open.rps).toFixed(2)} | ${route.budget ? `≤ ${MAX_LATENCY_RATIO}` : '–'} | ${verdict} |`,
        )
      }
    } finally {
      child.kill()
      await child.exited
    }
  }
} finally {
  // The servers have exited and flushed their usage rows; the cascade removes keys and usage too.
  await database.db.delete(accounts).where(like(accounts.email, `${EMAIL_PREFIX}%`))
  await database.close()
  const keys = await redisAdmin.keys(`${REDIS_PREFIX}*`)
  if (keys.length > 0) await redisAdmin.del(...keys)
  redisAdmin.disconnect()
}

const load1 = (l: number[]) => l.map((n) => n.toFixed(2)).join(' ')
console.log(
  `\n${cpus().length} cores (${cpus()[0]?.model}), ${Math.round(totalmem() / 2 ** 30)} GiB, Bun ${Bun.version}, PostgreSQL ${postgresVersion}, Redis ${redisVersion}, ` +
    `load average ${load1(loadBefore)} before / ${load1(loadavg())} after, ${CONNECTIONS} connections, ` +
    `${ROUNDS} rounds of ${REQUESTS} requests per variant and route (card ${cardId}) after ${WARMUP_REQUESTS} warm-up each, latency in ms per response (fractional, from autocannon's response event)\n`,
)
const header = 'open req/s | open mean | open p50 | open p99 | keyed req/s | keyed mean | keyed p50 | keyed p99 | mean latency keyed/open'
console.log(`| quota store | route | round | ${header} |`)
console.log('|---|---|---|---|---|---|---|---|---|---|---|---|')
for (const row of roundRows) console.log(row)
console.log('\nAll rounds (p50, p99: range over rounds)\n')
console.log(`| quota store | route | ${header} | median of rounds' keyed/open | req/s keyed/open | budget | result |`)
console.log('|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|')
for (const row of summaryRows) console.log(row)
process.exit(failed ? 1 : 0)
