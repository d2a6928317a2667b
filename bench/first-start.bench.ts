/**
 * The quickstart's first start: `npm start` (`bun src/index.ts`) with nothing configured, into an
 * empty data directory, so the service creates its embedded PGlite database, migrates it, seeds
 * the default `small` demo catalog with its history and starts serving. Timed from the spawn to the
 * first answered `GET /v1/games`. Memory: the peak RSS of every process the start runs (the service,
 * and the child that creates the embedded cluster, whose peak the service logs), and the service's
 * RSS once serving, read after a few dozen answered requests across endpoints. bench/README.md
 * "Budgets": serving within 60 s, peak RSS ≤ 1 GB for each process, ≤ 500 MB once serving.
 *
 *   bun bench/first-start.bench.ts
 *
 * Needs neither PostgreSQL nor Redis. The data directory is a fresh temporary one, removed at the
 * end. Exits 1 if a budget fails.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { cpus, loadavg, tmpdir, totalmem } from 'node:os'
import { join } from 'node:path'
import { spawnUntilListening } from '../test/helpers/process'
import { type BudgetRow, reportBudgets } from './report'

const BUDGET_SECONDS = 60
const PEAK_BUDGET_MB = 1024
const SERVING_BUDGET_MB = 500
/** Keyless reads a fresh quickstart answers, each asked REQUEST_ROUNDS times before the serving RSS is read. */
const SERVING_PATHS = ['/v1/games', '/v1/games/pokemon', '/v1/games/pokemon/sets', '/v1/games/magic-the-gathering/sets', '/health', '/ready', '/openapi.json', '/docs']
const REQUEST_ROUNDS = 5

/** VmRSS and VmHWM (peak) of a live process, in MB. */
function memoryOf(pid: number): { rssMb: number; peakMb: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1])
  return { rssMb: kb('VmRSS') / 1024, peakMb: kb('VmHWM') / 1024 }
}

const dataDir = mkdtempSync(join(tmpdir(), 'tcg-bench-first-start-'))
// Only what any shell has: no DATABASE_URL, REDIS_URL or DEMO_SCALE, as on a fresh machine.
const env = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', DATA_DIR: dataDir, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info' }
const loadBefore = loadavg()
const started = performance.now()
const budgets: BudgetRow[] = []
try {
  const service = await spawnUntilListening(['src/index.ts'], env)
  try {
    const listeningAfter = (performance.now() - started) / 1000
    const games = await fetch(`${service.url}/v1/games`)
    if (games.status !== 200) throw new Error(`GET /v1/games answered ${games.status}: ${await games.text()}`)
    const { meta } = (await games.json()) as { meta: { total: number } }
    const servingAfter = (performance.now() - started) / 1000
    const peakMb = memoryOf(service.child.pid).peakMb
    const seeded = service.lines.find((line) => typeof line.msg === 'string' && line.msg.startsWith('seeded'))?.msg ?? 'no seed line'
    const created = service.lines.find((line) => typeof line.peak_rss_mb === 'number')
    const childPeakMb: number | undefined = created?.peak_rss_mb
    let answered = 0
    for (let round = 0; round < REQUEST_ROUNDS; round++) {
      for (const path of SERVING_PATHS) {
        const response = await fetch(`${service.url}${path}`)
        await response.arrayBuffer()
        if (response.status !== 200) throw new Error(`GET ${path} answered ${response.status}`)
        answered++
      }
    }
    const serving = memoryOf(service.child.pid)
    budgets.push(
      {
        bench: 'first-start',
        measure: '`npm start` on an empty data directory (embedded PGlite, `small` demo): spawn to the first answered GET /v1/games',
        value: `${servingAfter.toFixed(1)} s (listening after ${listeningAfter.toFixed(1)} s; ${meta.total} games; ${seeded})`,
        budget: `≤ ${BUDGET_SECONDS} s`,
        pass: servingAfter <= BUDGET_SECONDS,
      },
      {
        bench: 'first-start',
        measure: 'peak RSS of the service (VmHWM) from the spawn to the first answered GET /v1/games: open, migrate, seed, snapshot',
        value: `${Math.round(peakMb)} MB`,
        budget: `≤ ${PEAK_BUDGET_MB} MB`,
        pass: peakMb <= PEAK_BUDGET_MB,
      },
      {
        bench: 'first-start',
        measure: "peak RSS of the child process that creates the embedded cluster (its VmHWM, from the service's log line)",
        value: childPeakMb === undefined ? 'no child logged' : `${childPeakMb} MB`,
        budget: `≤ ${PEAK_BUDGET_MB} MB`,
        pass: childPeakMb !== undefined && childPeakMb <= PEAK_BUDGET_MB,
      },
      {
        bench: 'first-start',
        measure: `RSS of the service once serving: after ${answered} answered keyless GETs across ${SERVING_PATHS.length} endpoints`,
        value: `${Math.round(serving.rssMb)} MB (peak so far ${Math.round(serving.peakMb)} MB)`,
        budget: `≤ ${SERVING_BUDGET_MB} MB`,
        pass: serving.rssMb <= SERVING_BUDGET_MB,
      },
    )
  } finally {
    service.child.kill('SIGTERM')
    await service.child.exited
  }
} finally {
  rmSync(dataDir, { recursive: true, force: true })
}

const load1 = (l: number[]) => l.map((n) => n.toFixed(2)).join(' ')
console.log(
  `\n${cpus().length} cores (${cpus()[0]?.model}), ${Math.round(totalmem() / 2 ** 30)} GiB, Bun ${Bun.version}, load average ${load1(loadBefore)} before / ${load1(loadavg())} after\n`,
)
process.exit(reportBudgets(budgets) ? 0 : 1)
