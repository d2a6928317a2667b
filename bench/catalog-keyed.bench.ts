/**
 * Key-guarded, Postgres-backed catalog reads on the `large` demo catalog (204,431 cards; the search
 * budget is for a catalog of 100k cards or more, bench/README.md "Budgets"): `GET /v1/cards/:id` and
 * `GET /v1/cards/:id/history` (across many ids) and `GET /v1/search` (exact names, misspellings and
 * prefixes), through the real service with the Redis quota store, against a bare Bun.serve sending
 * a body of the same size, each in its own process, loaded by autocannon from this one, in the
 * same run. Budgets are p99 latencies; the two servers' CPU per request is reported beside them.
 *
 *   BENCH_LARGE_DATABASE_URL=postgres://postgres@127.0.0.1:5432/tcg_bench_large \
 *   BENCH_REDIS_URL=redis://127.0.0.1:6379 bun bench/catalog-keyed.bench.ts
 *
 * Seeds the `large` demo catalog on its first run (about 2 minutes). Exits 1 if a budget fails.
 */
import { cpus, loadavg, totalmem } from 'node:os'
import { sql } from 'drizzle-orm'
import { openPostgres } from '../src/db/client'
import { TIER_POLICY } from '../src/modules/auth/tiers'
import { spawnUntilListening } from '../test/helpers/process'
import { benchAccounts, prepareBenchDatabase, spawnBenchService } from './database'
import { keyedRequests, loadCount } from './load'
import { type BudgetRow, reportBudgets } from './report'

const DATABASE_URL = process.env.BENCH_LARGE_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/tcg_bench_large'
const REDIS_URL = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379'
/** A fixed count per measured run, on a fresh Business account: never near the quota. */
const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 20_000)
const WARMUP_REQUESTS = 5_000
if (REQUESTS + WARMUP_REQUESTS > TIER_POLICY.business.dailyQuota) throw new Error('BENCH_REQUESTS exceeds the business quota')

console.error('preparing the database')
const postgresVersion = await prepareBenchDatabase(DATABASE_URL, 'large')
console.error('database ready')
const database = await openPostgres(DATABASE_URL, { max: 2 })
const select = async <T>(query: ReturnType<typeof sql>) => (await database.db.execute(query)) as unknown as T[]
const [{ n: cardCount }] = (await select<{ n: number }>(sql`select count(*)::int as n from cards`)) as [{ n: number }]
// Ids spread over the whole table, and names to search for: as written, misspelt, and prefixes.
const cardIds = (await select<{ id: number }>(sql`select id from cards order by random() limit 500`)).map((r) => r.id)
const names = (await select<{ name: string }>(sql`select name from cards where product_type = 'Cards' order by random() limit 100`)).map((r) => r.name)
const misspell = (word: string) => (word.length > 4 ? word.slice(0, 2) + word[3] + word[2] + word.slice(4) : word)
const searches = names.flatMap((name) => {
  const first = name.split(' ')[0]!
  return [name, misspell(first.toLowerCase()), first.slice(0, Math.max(3, Math.ceil(first.length / 2)))]
})

/**
 * Budgets as data (bench/README.md "Budgets"). Card and history reads are judged at 50 connections, as the budget says.
 * The search budget names no concurrency: it is judged at 10 connections, and also measured, without a
 * budget, at 50, where 2 cores are saturated and the latency is the queue (see bench/profiles.md).
 */
const searchPaths = searches.map((q) => `/v1/search?q=${encodeURIComponent(q)}`)
const SCENARIOS: { name: string; paths: string[]; connections: number; p99Ms?: number }[] = [
  { name: 'GET /v1/cards/:id', paths: cardIds.map((id) => `/v1/cards/${id}`), connections: 50, p99Ms: 20 },
  { name: 'GET /v1/cards/:id/history', paths: cardIds.map((id) => `/v1/cards/${id}/history`), connections: 50, p99Ms: 20 },
  { name: 'GET /v1/search', paths: searchPaths, connections: 10, p99Ms: 60 },
  { name: 'GET /v1/search', paths: searchPaths, connections: 50 },
]

/** `BENCH_ONLY=history` runs only the scenarios whose path ends with it. */
const ONLY = process.env.BENCH_ONLY

const { freshKey, redisPrefix, cleanup } = benchAccounts(database.db, 'catalog')

console.error('starting the service')
const loadBefore = loadavg()
const rows: string[] = []
const budgets: BudgetRow[] = []
const app = await spawnBenchService(DATABASE_URL, REDIS_URL, redisPrefix)
try {
  for (const scenario of SCENARIOS.filter((s) => !ONLY || s.name.endsWith(ONLY))) {
    console.error(`${scenario.name}: preparing`)
    const key = await freshKey()
    // The yardstick sends one of this scenario's responses, so both move the same bytes.
    const sample = await fetch(app.url + scenario.paths[0], { headers: { 'x-api-key': key } })
    if (sample.status !== 200) throw new Error(`${scenario.name}: ${sample.status} ${await sample.text()}`)
    const bodyFile = `/tmp/tcg-bench-${process.pid}-${rows.length}.json`
    await Bun.write(bodyFile, await sample.arrayBuffer())
    const baseline = await spawnUntilListening(['bench/baseline-server.ts', bodyFile, '0'], process.env)
    try {
      const { connections } = scenario
      await loadCount(baseline, [{ path: '/' }], WARMUP_REQUESTS, connections)
      const bare = await loadCount(baseline, [{ path: '/' }], REQUESTS, connections)
      console.error(`${scenario.name}: baseline done, loading the service`)
      const requests = keyedRequests(scenario.paths, [key])
      await loadCount(app, requests, WARMUP_REQUESTS, connections)
      const ours = await loadCount(app, requests, REQUESTS, connections)
      const p99 = ours.p99
      rows.push(
        `| ${scenario.name} | ${scenario.connections} | ${scenario.paths.length} | ${ours.p50} | ${p99} | ${Math.round(ours.rps)} | ` +
          `${Math.round(bare.rps)} | ${bare.p99} | ${ours.cpuPerRequestUs.toFixed(0)} / ${bare.cpuPerRequestUs.toFixed(1)} | ${(ours.cpuPerRequestUs / bare.cpuPerRequestUs).toFixed(1)} |`,
      )
      budgets.push({
        bench: 'catalog-keyed',
        measure: `${scenario.name}: latency at ${scenario.connections} connections`,
        value: `${p99} ms p99`,
        budget: scenario.p99Ms === undefined ? 'reported' : `≤ ${scenario.p99Ms} ms p99`,
        pass: scenario.p99Ms === undefined ? undefined : p99 <= scenario.p99Ms,
      })
    } finally {
      baseline.child.kill()
    }
  }
} finally {
  app.child.kill()
  await app.child.exited
  await cleanup(REDIS_URL)
  await database.close()
}

const load1 = (l: number[]) => l.map((n) => n.toFixed(2)).join(' ')
console.log(
  `\n${cpus().length} cores (${cpus()[0]?.model}), ${Math.round(totalmem() / 2 ** 30)} GiB, Bun ${Bun.version}, PostgreSQL ${postgresVersion}, ` +
    `large demo catalog (${cardCount} cards), Redis quota store, load average ${load1(loadBefore)} before / ${load1(loadavg())} after, ` +
    `${REQUESTS} requests after ${WARMUP_REQUESTS} warm-up, latency in ms (autocannon: whole ms), req/s bounded by autocannon in this process on the same cores\n`,
)
console.log('| path | connections | distinct requests | p50 | p99 | req/s | bare Bun.serve req/s | bare p99 | server CPU µs/request, ours / bare | CPU ratio |')
console.log('|---|---|---|---|---|---|---|---|---|---|')
for (const row of rows) console.log(row)
console.log('')
process.exit(reportBudgets(budgets) ? 0 : 1)
