/**
 * Public catalog reads (Postgres-backed) against a bare Bun.serve sending the same bytes, each
 * server in its own process, measured by autocannon from this one, in the same run.
 *
 *   BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/tcg_bench bun bench/public-catalog.bench.ts
 *
 * Seeds the `small` demo catalog into that database on the first run. Exits 1 if a budget fails.
 */
import { cpus, totalmem } from 'node:os'
import autocannon from 'autocannon'
import { spawnUntilListening } from '../test/helpers/process'
import { prepareBenchDatabase } from './database'
import { type BudgetRow, reportBudgets } from './report'

const DATABASE_URL = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/tcg_bench'
const CONNECTIONS = 50
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10)
const WARMUP_SECONDS = 2

/** Budgets as data (DESIGN section 6: Postgres-backed reads p99 ≤ 20 ms at 50 connections). */
const SCENARIOS = [
  { name: 'GET /v1/games', path: '/v1/games?per_page=50', p99Ms: 20 },
  { name: 'GET /v1/games/:slug/sets', path: '/v1/games/pokemon/sets', p99Ms: 20 },
]

async function spawnServer(args: string[], env: Record<string, string>) {
  const { url, child } = await spawnUntilListening(args, { ...process.env, ...env })
  return { url, stop: () => child.kill() }
}

async function measure(url: string) {
  await autocannon({ url, connections: CONNECTIONS, duration: WARMUP_SECONDS })
  const result = await autocannon({ url, connections: CONNECTIONS, duration: SECONDS })
  if (result.non2xx > 0 || result.errors > 0) throw new Error(`${url}: ${result.non2xx} non-2xx, ${result.errors} errors`)
  return { rps: result.requests.average, p50: result.latency.p50, p99: result.latency.p99 }
}

await prepareBenchDatabase(DATABASE_URL)
const app = await spawnServer(['src/index.ts'], { DATABASE_URL, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info' })
const rows: string[] = []
const budgets: BudgetRow[] = []
try {
  for (const scenario of SCENARIOS) {
    const bodyFile = `/tmp/tcg-bench-${Bun.hash(scenario.path)}.json`
    await Bun.write(bodyFile, await (await fetch(app.url + scenario.path)).arrayBuffer())
    const baseline = await spawnServer(['bench/baseline-server.ts', bodyFile, '0'], {})
    try {
      const bare = await measure(baseline.url)
      const ours = await measure(app.url + scenario.path)
      rows.push(`| ${scenario.name} | ${ours.p50} | ${ours.p99} | ${Math.round(ours.rps)} | ${Math.round(bare.rps)} | ${(ours.rps / bare.rps).toFixed(2)} |`)
      budgets.push({
        bench: 'public-catalog',
        measure: `${scenario.name}: latency at ${CONNECTIONS} connections`,
        value: `${ours.p99} ms p99`,
        budget: `≤ ${scenario.p99Ms} ms p99`,
        pass: ours.p99 <= scenario.p99Ms,
      })
    } finally {
      baseline.stop()
    }
  }
} finally {
  app.stop()
}
console.log(`\n${cpus().length} cores (${cpus()[0]?.model}), ${Math.round(totalmem() / 2 ** 30)} GiB, Bun ${Bun.version}, ${CONNECTIONS} connections, ${SECONDS} s after ${WARMUP_SECONDS} s warm-up, latency in ms (autocannon: whole ms)\n`)
console.log('| path | p50 | p99 | req/s | bare Bun.serve req/s | ratio |')
console.log('|---|---|---|---|---|---|')
for (const row of rows) console.log(row)
console.log('')
process.exit(reportBudgets(budgets) ? 0 : 1)
