/**
 * Every bench, one after the other, then one table of every budget they judged or reported.
 *
 *   bun bench/all.ts                      every bench
 *   bun bench/all.ts hot-path snapshot    only these (by name, run in the order below)
 *   bun bench/all.ts --list               the benches and what each needs
 *
 * Each bench runs as its own process, as `npm run bench:…` would start it, so one bench's servers,
 * JIT and heap never share a process with the next one's measurements. Its detail tables print as
 * it goes; its budget rows come back through BENCH_RESULTS_FILE (bench/report.ts). A bench that
 * dies before reporting gets a FAIL row with its exit code. Exits 1 if any budget failed.
 *
 * The benches read their own environment variables (bench/README.md), passed on unchanged.
 *
 * The rows also go to bench/results.md (BENCH_RESULTS_MARKDOWN names another file), one section per
 * bench with its date and machine: a run of some benches replaces their sections and keeps the
 * others', so the file always holds each bench's latest result and says where it came from.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { cpus, loadavg, release, tmpdir, totalmem } from 'node:os'
import { join } from 'node:path'
import Redis from 'ioredis'
import postgres from 'postgres'
import { ROOT } from '../test/helpers/process'
import { type BudgetRow, budgetTable, mergeResults, type ResultSection } from './report'

interface Bench {
  /** The file is bench/<name>.bench.ts. */
  name: string
  /** The demo catalog it seeds on its first run, or every run where it makes its own database. */
  catalog: string
  redis: boolean
}

/**
 * Cheap first, so a quick regression shows before the long seeds: the `small` and `tiny` catalogs
 * seed in seconds (`small` into PGlite, for the first start, in about half a minute), `medium` in
 * about half a minute, `large` in minutes.
 */
const BENCHES: Bench[] = [
  { name: 'hot-path', catalog: '`small` (BENCH_DATABASE_URL)', redis: true },
  { name: 'compression', catalog: '`small` (BENCH_DATABASE_URL)', redis: true },
  { name: 'public-catalog', catalog: '`small` (BENCH_DATABASE_URL)', redis: false },
  { name: 'webhook-delivery', catalog: '`tiny` (BENCH_DELIVERY_DATABASE_URL)', redis: false },
  { name: 'first-start', catalog: 'none: embedded PGlite in a fresh data directory, `small` seeded every run', redis: false },
  { name: 'conditions', catalog: '`medium` (BENCH_MEDIUM_DATABASE_URL)', redis: true },
  { name: 'snapshot', catalog: '`large` (BENCH_LARGE_DATABASE_URL)', redis: true },
  { name: 'catalog-keyed', catalog: '`large` (BENCH_LARGE_DATABASE_URL)', redis: true },
  { name: 'sync', catalog: '`large`, seeded into its own database every run and dropped (BENCH_SYNC_DATABASE_URL)', redis: false },
  {
    name: 'tcgcsv-sync',
    catalog: 'none: the `large` fake TCGCSV mirror in its own process, loaded into its own database every run and dropped (BENCH_TCGCSV_DATABASE_URL)',
    redis: false,
  },
  {
    name: 'webhook-alerts',
    catalog: '`large`, seeded into its own database every run and dropped, unless BENCH_WEBHOOK_DATABASE_URL names one to keep',
    redis: false,
  },
  { name: 'soak', catalog: '`small` (BENCH_SOAK_DATABASE_URL); two nodes behind HAProxy for SOAK_SECONDS (default 300)', redis: true },
]

const benchFile = (bench: Bench) => `bench/${bench.name}.bench.ts`

/** PostgreSQL's version from the server the benches use (its maintenance database), or why not. */
async function postgresVersion(databaseUrl: string): Promise<string> {
  const url = new URL(databaseUrl)
  url.pathname = '/postgres'
  const client = postgres(url.toString(), { max: 1, connect_timeout: 3, onnotice: () => {} })
  try {
    const [row] = (await client`show server_version`) as unknown as [{ server_version: string }]
    return `PostgreSQL ${row.server_version.split(' ')[0]}`
  } catch {
    return 'PostgreSQL unreachable'
  } finally {
    await client.end({ timeout: 1 })
  }
}

async function redisVersion(redisUrl: string): Promise<string> {
  const redis = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: 3_000 })
  try {
    await redis.connect()
    const version = /redis_version:(\S+)/.exec(await redis.info('server'))?.[1]
    return `Redis ${version ?? 'of unknown version'}`
  } catch {
    return 'Redis unreachable'
  } finally {
    redis.disconnect()
  }
}

function osName(): string {
  const osRelease = existsSync('/etc/os-release') ? readFileSync('/etc/os-release', 'utf8') : ''
  const pretty = /^PRETTY_NAME="?([^"\n]*)"?$/m.exec(osRelease)?.[1] ?? process.platform
  return `${pretty} (kernel ${release()})`
}

/**
 * What a result was measured on, in one line: CPU model and count, memory, OS, Bun, and the
 * PostgreSQL and Redis the benches use. Read once per run; the load average is added per bench.
 */
async function describeMachine(options: { databaseUrl: string; redisUrl: string }): Promise<string> {
  const cpu = cpus()
  const [pg, redis] = await Promise.all([postgresVersion(options.databaseUrl), redisVersion(options.redisUrl)])
  const memoryGiB = (totalmem() / 2 ** 30).toFixed(0)
  return `${cpu.length} × ${cpu[0]?.model.trim() ?? 'unknown CPU'}, ${memoryGiB} GiB, ${osName()}, Bun ${Bun.version}, ${pg}, ${redis}`
}

/** The 1, 5 and 15 minute load averages now, as `load average 0.40 / 0.52 / 0.61`. */
const loadAverage = () =>
  `load average ${loadavg()
    .map((load) => load.toFixed(2))
    .join(' / ')}`

const RESULTS_MARKDOWN = process.env.BENCH_RESULTS_MARKDOWN ?? join(ROOT, 'bench/results.md')

const RESULTS_HEADER = `# Benchmark results

Each bench's latest budget rows, written by \`npm run bench:all\` (bench/all.ts): running some
benches replaces their sections and keeps the others', each with the date and machine it was
measured on. How the benches measure and what the budgets are: [README.md](README.md). Detail
tables print only with a run; where time goes is in [profiles.md](profiles.md).
`

const args = process.argv.slice(2)
if (args.includes('--list')) {
  console.log('| bench | file | PostgreSQL catalog | Redis (BENCH_REDIS_URL) |')
  console.log('|---|---|---|---|')
  for (const bench of BENCHES) console.log(`| ${bench.name} | ${benchFile(bench)} | ${bench.catalog} | ${bench.redis ? 'yes' : 'no'} |`)
  process.exit(0)
}
const unknown = args.filter((name) => !BENCHES.some((bench) => bench.name === name))
if (unknown.length > 0) {
  console.error(`no such bench: ${unknown.join(', ')}; the benches are ${BENCHES.map((bench) => bench.name).join(', ')}`)
  process.exit(2)
}
const selected = args.length === 0 ? BENCHES : BENCHES.filter((bench) => args.includes(bench.name))

/** Reads the rows a bench handed on; none if it never got as far as reporting. */
function reportedRows(file: string): BudgetRow[] {
  if (!existsSync(file)) return []
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as BudgetRow)
}

// One file per bench, so a bench that dies is told apart from one that reported.
const resultsDir = mkdtempSync(join(tmpdir(), 'tcg-bench-all-'))
const rows: BudgetRow[] = []
const sections: ResultSection[] = []
const machine = await describeMachine({
  databaseUrl: process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/tcg_bench',
  redisUrl: process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379',
})
try {
  for (const bench of selected) {
    console.error(`\n=== ${bench.name} (${benchFile(bench)}) ===`)
    const section: ResultSection = { bench: bench.name, date: new Date().toISOString(), machine: `${machine}; ${loadAverage()} at its start`, rows: [] }
    const resultsFile = join(resultsDir, `${bench.name}.jsonl`)
    const started = performance.now()
    const child = Bun.spawn([process.execPath, benchFile(bench)], {
      cwd: ROOT,
      env: { ...process.env, BENCH_RESULTS_FILE: resultsFile },
      stdout: 'inherit',
      stderr: 'inherit',
    })
    const exitCode = await child.exited
    const ended = child.signalCode ? `signal ${child.signalCode}` : `code ${exitCode}`
    console.error(`=== ${bench.name}: exited with ${ended} after ${((performance.now() - started) / 1000).toFixed(0)} s ===`)
    const reported = reportedRows(resultsFile)
    section.rows.push(...reported)
    // A non-zero exit must show as a failure even when every row it managed to report passed.
    if (exitCode !== 0 && !reported.some((row) => row.pass === false)) {
      section.rows.push({
        bench: bench.name,
        measure: reported.length === 0 ? 'the run, which ended before reporting any budget' : 'the run, after reporting its budgets',
        value: `exited with ${ended}`,
        budget: 'exit code 0',
        pass: false,
      })
    }
    rows.push(...section.rows)
    sections.push(section)
  }
} finally {
  rmSync(resultsDir, { recursive: true, force: true })
}

console.log(`\n## Every budget (${selected.map((bench) => bench.name).join(', ')})\n`)
console.log(budgetTable(rows))
const previous = existsSync(RESULTS_MARKDOWN) ? readFileSync(RESULTS_MARKDOWN, 'utf8') : ''
writeFileSync(
  RESULTS_MARKDOWN,
  mergeResults(
    previous,
    sections,
    BENCHES.map((bench) => bench.name),
    RESULTS_HEADER,
  ),
)
console.log(`\n${sections.map((section) => section.bench).join(', ')}: written to ${RESULTS_MARKDOWN}`)
process.exit(rows.some((row) => row.pass === false) ? 1 : 0)
