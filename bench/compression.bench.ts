/**
 * Response compression judged as bench/README.md "Budgets" says, on server CPU per request (user +
 * system, /proc/<pid>/stat) with wrk, the same service answering the same requests with and without
 * `Accept-Encoding` (docs/adr/0127-response-compression.md):
 *
 * - keyed `GET /v1/bulk/prices` with 500 ids, compressed per request: gzip and br each ≤ 2× the
 *   CPU per request of the uncompressed answer, and at most a quarter of its bytes;
 * - kept answers repeated (keyed `GET /v1/cards/:id/prices`, `GET /v1/prices/top-movers`), whose
 *   coded heads are kept: compressed within noise of uncompressed, noise being the larger spread of
 *   either side's rounds (its largest CPU per request over its smallest, less 1).
 *
 * Each scenario's codings alternate within a round (identity, gzip, br), 3 rounds of 4 s after 3 s
 * of warm-up each, the median round's ratio judged. Keyed requests are spread over 32 Business
 * accounts, fresh ones per coding so no daily quota runs out.
 *
 *   BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/tcg_bench \
 *   BENCH_REDIS_URL=redis://127.0.0.1:6379 bun bench/compression.bench.ts
 *
 * Seeds the `small` demo catalog on the first run. Exits 1 if a budget fails.
 */
import { cpus, loadavg, totalmem } from 'node:os'
import { openPostgres } from '../src/db/client'
import { benchAccounts, hotReadPaths, prepareBenchDatabase, spawnBenchService } from './database'
import { type BenchRequest, keyedRequests, type LoadRun, load, wrkInstalled } from './load'
import { type BudgetRow, reportBudgets } from './report'

const DATABASE_URL = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/tcg_bench'
const REDIS_URL = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379'
const CONNECTIONS = 50
const SECONDS = Number(process.env.BENCH_SECONDS ?? 4)
const WARMUP_SECONDS = 3
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3)
const ACCOUNTS = Number(process.env.BENCH_ACCOUNTS ?? 32)
const BULK_LISTS = 10
const BULK_IDS = 500
const MAX_BULK_CPU_RATIO = 2
const MAX_BULK_BYTES_SHARE = 0.25
const ONLY = process.env.BENCH_ONLY

const CODINGS = ['identity', 'gzip', 'br'] as const
type Coding = (typeof CODINGS)[number]

console.error('preparing the database')
const postgresVersion = await prepareBenchDatabase(DATABASE_URL)
const database = await openPostgres(DATABASE_URL, { max: 2 })
const { cardCount, cardIds, bulkPaths, moverPaths } = await hotReadPaths(database.db, BULK_LISTS, BULK_IDS)

interface Scenario {
  name: string
  paths: string[]
  /** Compressed per request (judged on CPU ratio and bytes), or kept (judged within noise). */
  kind: 'per request' | 'kept'
}
const SCENARIOS: Scenario[] = [
  { name: 'GET /v1/bulk/prices (500 ids)', paths: bulkPaths, kind: 'per request' },
  { name: 'GET /v1/cards/:id/prices, repeated', paths: cardIds.map((id) => `/v1/cards/${id}/prices`), kind: 'kept' },
  { name: 'GET /v1/prices/top-movers, repeated', paths: moverPaths, kind: 'kept' },
]

const accounts = benchAccounts(database.db, 'compression')
const median = (values: number[]) => values.toSorted((a, b) => a - b)[Math.floor((values.length - 1) / 2)]!
const withCoding = (requests: BenchRequest[], coding: Coding): BenchRequest[] =>
  coding === 'identity' ? requests : requests.map((request) => ({ ...request, headers: { ...request.headers, 'accept-encoding': coding } }))

/** Bytes sent per answer (as on the wire, body only) and the share of the answers that came compressed, over every path once. */
async function bytesSent(paths: string[], key: string, coding: Coding): Promise<{ bytes: number; identityBytes: number; codedShare: number }> {
  let bytes = 0
  let identityBytes = 0
  let coded = 0
  for (const path of paths) {
    const headers: Record<string, string> = { 'x-api-key': key, 'accept-encoding': coding }
    const response = await fetch(service.url + path, { headers, decompress: false } as RequestInit)
    if (response.status !== 200) throw new Error(`${path}: ${response.status} ${await response.text()}`)
    bytes += (await response.arrayBuffer()).byteLength
    if (response.headers.get('content-encoding') === coding) coded++
    const identity = await fetch(service.url + path, { headers: { 'x-api-key': key, 'accept-encoding': 'identity' } })
    identityBytes += (await identity.arrayBuffer()).byteLength
  }
  return { bytes: bytes / paths.length, identityBytes: identityBytes / paths.length, codedShare: coded / paths.length }
}

const detailRows: string[] = []
const budgets: BudgetRow[] = []
const us = (n: number) => n.toFixed(1)

const loadBefore = loadavg()
console.error('starting the service')
// The every-minute condition re-crawl is background work, not the requests' own: it would land in whichever run it overlaps.
const service = await spawnBenchService(DATABASE_URL, REDIS_URL, accounts.redisPrefix, { CONDITION_RECRAWL_PER_MINUTE: '0' })
try {
  for (const scenario of SCENARIOS.filter((s) => !ONLY || s.name.includes(ONLY))) {
    console.error(`${scenario.name}: preparing`)
    // Fresh accounts per coding: the four runs of each stay inside the accounts' daily quotas.
    const requests = {} as Record<Coding, BenchRequest[]>
    for (const coding of CODINGS) {
      const keys = await Promise.all(Array.from({ length: ACCOUNTS }, () => accounts.freshKey()))
      requests[coding] = withCoding(keyedRequests(scenario.paths, keys), coding)
    }
    const probeKey = await accounts.freshKey()
    const sizes = {} as Record<Coding, Awaited<ReturnType<typeof bytesSent>>>
    for (const coding of CODINGS) sizes[coding] = await bytesSent(scenario.paths, probeKey, coding)
    const run = (coding: Coding, seconds: number) => load({ url: service.url, pid: service.child.pid, requests: requests[coding], connections: CONNECTIONS, seconds })
    for (const coding of CODINGS) await run(coding, WARMUP_SECONDS)
    const runs = { identity: [] as LoadRun[], gzip: [] as LoadRun[], br: [] as LoadRun[] }
    for (let round = 1; round <= ROUNDS; round++) {
      console.error(`${scenario.name}: round ${round} of ${ROUNDS}`)
      for (const coding of CODINGS) runs[coding].push(await run(coding, SECONDS))
    }
    for (const coding of CODINGS) {
      const measured = runs[coding]
      const cpu = measured.map((r) => r.cpuPerRequestUs)
      detailRows.push(
        `| ${scenario.name} | ${coding} | ${us(median(cpu))} (${cpu.map(us).join(', ')}) | ${us(median(measured.map((r) => r.systemPerRequestUs)))} | ` +
          `${Math.round(median(measured.map((r) => r.rps)))} | ${median(measured.map((r) => r.p99)).toFixed(2)} | ${Math.round(sizes[coding].bytes)} | ` +
          `${Math.round(sizes[coding].codedShare * 100)}% |`,
      )
    }
    // How much one side's CPU per request moved between its own rounds: a difference below it is not told apart from chance.
    const spread = (measured: LoadRun[]) => Math.max(...measured.map((r) => r.cpuPerRequestUs)) / Math.min(...measured.map((r) => r.cpuPerRequestUs)) - 1
    for (const coding of ['gzip', 'br'] as const) {
      const noise = Math.max(spread(runs.identity), spread(runs[coding]))
      // Judged per round (the codings of one round back to back), on the median round.
      const ratio = median(runs[coding].map((r, i) => r.cpuPerRequestUs / runs.identity[i]!.cpuPerRequestUs))
      const share = sizes[coding].bytes / sizes.identity.bytes
      if (scenario.kind === 'per request') {
        budgets.push({
          bench: 'compression',
          measure: `${scenario.name}, ${coding}: server CPU per request / uncompressed (median round)`,
          value: `${ratio.toFixed(2)}×`,
          budget: `≤ ${MAX_BULK_CPU_RATIO}×`,
          pass: ratio <= MAX_BULK_CPU_RATIO,
        })
        budgets.push({
          bench: 'compression',
          measure: `${scenario.name}, ${coding}: bytes sent / uncompressed (${Math.round(sizes[coding].bytes)} of ${Math.round(sizes.identity.bytes)} bytes an answer)`,
          value: share.toFixed(3),
          budget: `≤ ${MAX_BULK_BYTES_SHARE}`,
          pass: share <= MAX_BULK_BYTES_SHARE,
        })
      } else {
        budgets.push({
          bench: 'compression',
          measure:
            `${scenario.name}, ${coding}: server CPU per request / uncompressed (median round; ${Math.round(sizes[coding].codedShare * 100)}% of the answers ` +
            `compressed, ${Math.round(sizes[coding].bytes)} of ${Math.round(sizes.identity.bytes)} bytes an answer)`,
          value: `${ratio.toFixed(2)}×`,
          budget: `≤ 1 + noise (${(1 + noise).toFixed(2)}×: the larger spread of either side's rounds)`,
          pass: ratio <= 1 + noise,
        })
      }
    }
  }
} finally {
  service.child.kill()
  await service.child.exited
  await accounts.cleanup(REDIS_URL)
  await database.close()
}

const load1 = (l: number[]) => l.map((n) => n.toFixed(2)).join(' ')
console.log(
  `\n${cpus().length} cores (${cpus()[0]?.model}), ${Math.round(totalmem() / 2 ** 30)} GiB, Bun ${Bun.version}, PostgreSQL ${postgresVersion}, ` +
    `small demo catalog (${cardCount} cards), Redis quota store, load average ${load1(loadBefore)} before / ${load1(loadavg())} after; ` +
    `${wrkInstalled() ? 'wrk, 1 thread' : 'autocannon (wrk is not installed)'}, ${CONNECTIONS} connections, ${ROUNDS} rounds of ${SECONDS} s ` +
    `after ${WARMUP_SECONDS} s warm-up per coding; medians over rounds\n`,
)
console.log('| path | Accept-Encoding | CPU µs/request (rounds) | of it system | req/s | p99 ms | bytes an answer | answers compressed |')
console.log('|---|---|---|---|---|---|---|---|')
for (const row of detailRows) console.log(row)
console.log('')
process.exit(reportBudgets(budgets) ? 0 : 1)
