/**
 * Public catalog reads (no key) against a bare Bun.serve sending the same bytes, each server in its
 * own process, loaded by wrk (autocannon when wrk is missing) from this one, in the same run
 * (bench/load.ts). Budgets are p99 latencies; the two servers' CPU per request is reported beside
 * them (hot-path.bench.ts judges `GET /v1/games` on it).
 *
 *   BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/tcg_bench bun bench/public-catalog.bench.ts
 *
 * Seeds the `small` demo catalog into that database on the first run. Exits 1 if a budget fails.
 */
import { cpus, totalmem } from 'node:os'
import { spawnUntilListening } from '../test/helpers/process'
import { prepareBenchDatabase } from './database'
import { type LoadRun, load, wrkInstalled } from './load'
import { type BudgetRow, reportBudgets } from './report'

const DATABASE_URL = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/tcg_bench'
const CONNECTIONS = 50
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10)
const WARMUP_SECONDS = 2

/** Budgets as data (bench/README.md "Budgets": Postgres-backed reads p99 ≤ 20 ms at 50 connections). */
const SCENARIOS = [
  { name: 'GET /v1/games', path: '/v1/games?per_page=50', p99Ms: 20 },
  { name: 'GET /v1/games/:slug/sets', path: '/v1/games/pokemon/sets', p99Ms: 20 },
]

async function measure(server: { url: string; child: { pid: number } }, path: string): Promise<LoadRun> {
  const options = { url: server.url, pid: server.child.pid, requests: [{ path }], connections: CONNECTIONS }
  await load({ ...options, seconds: WARMUP_SECONDS })
  return load({ ...options, seconds: SECONDS })
}

await prepareBenchDatabase(DATABASE_URL)
const app = await spawnUntilListening(['src/index.ts'], { ...process.env, DATABASE_URL, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info' })
const rows: string[] = []
const budgets: BudgetRow[] = []
try {
  for (const scenario of SCENARIOS) {
    const bodyFile = `/tmp/tcg-bench-${Bun.hash(scenario.path)}.json`
    await Bun.write(bodyFile, await (await fetch(app.url + scenario.path)).arrayBuffer())
    const baseline = await spawnUntilListening(['bench/baseline-server.ts', bodyFile, '0'], process.env)
    try {
      const bare = await measure(baseline, scenario.path)
      const ours = await measure(app, scenario.path)
      const ms = (value: number) => value.toFixed(2)
      rows.push(
        `| ${scenario.name} | ${ms(ours.p50)} | ${ms(ours.p99)} | ${Math.round(ours.rps)} | ${Math.round(bare.rps)} | ` +
          `${ours.cpuPerRequestUs.toFixed(1)} / ${bare.cpuPerRequestUs.toFixed(1)} | ${(ours.cpuPerRequestUs / bare.cpuPerRequestUs).toFixed(2)} |`,
      )
      budgets.push({
        bench: 'public-catalog',
        measure: `${scenario.name}: latency at ${CONNECTIONS} connections`,
        value: `${ms(ours.p99)} ms p99`,
        budget: `≤ ${scenario.p99Ms} ms p99`,
        pass: ours.p99 <= scenario.p99Ms,
      })
    } finally {
      baseline.child.kill()
    }
  }
} finally {
  app.child.kill()
}
const tool = wrkInstalled() ? 'wrk, 1 thread' : 'autocannon (client-bound: install wrk)'
console.log(
  `\n${cpus().length} cores (${cpus()[0]?.model}), ${Math.round(totalmem() / 2 ** 30)} GiB, Bun ${Bun.version}, ${tool}, ${CONNECTIONS} connections, ${SECONDS} s after ${WARMUP_SECONDS} s warm-up, latency in ms\n`,
)
console.log('| path | p50 | p99 | req/s | bare Bun.serve req/s | server CPU µs/request, ours / bare | CPU ratio |')
console.log('|---|---|---|---|---|---|---|')
for (const row of rows) console.log(row)
console.log('')
process.exit(reportBudgets(budgets) ? 0 : 1)
