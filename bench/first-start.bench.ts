/**
 * The quickstart's first start: `npm start` (`bun src/index.ts`) with nothing configured, into an
 * empty data directory, so the service creates its embedded PGlite database, migrates it, seeds
 * the default `small` demo catalog with its history and starts serving. Timed from the spawn to the
 * first answered `GET /v1/games`. bench/README.md "Budgets": serving within 60 s.
 *
 *   bun bench/first-start.bench.ts
 *
 * Needs neither PostgreSQL nor Redis. The data directory is a fresh temporary one, removed at the
 * end. Exits 1 if the budget fails.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { cpus, loadavg, tmpdir, totalmem } from 'node:os'
import { join } from 'node:path'
import { spawnUntilListening } from '../test/helpers/process'
import { type BudgetRow, reportBudgets } from './report'

const BUDGET_SECONDS = 60

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
    const peakMb = Number(/^VmHWM:\s+(\d+) kB/m.exec(readFileSync(`/proc/${service.child.pid}/status`, 'utf8'))?.[1]) / 1024
    const seeded = service.lines.find((line) => typeof line.msg === 'string' && line.msg.startsWith('seeded'))?.msg ?? 'no seed line'
    budgets.push(
      {
        bench: 'first-start',
        measure: '`npm start` on an empty data directory (embedded PGlite, `small` demo): spawn to the first answered GET /v1/games',
        value: `${servingAfter.toFixed(1)} s (listening after ${listeningAfter.toFixed(1)} s; ${meta.total} games; ${seeded})`,
        budget: `≤ ${BUDGET_SECONDS} s`,
        pass: servingAfter <= BUDGET_SECONDS,
      },
      { bench: 'first-start', measure: 'peak RSS of the service up to then', value: `${Math.round(peakMb)} MB`, budget: 'reported' },
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
