/**
 * Seeding and the daily sync on the `large` demo catalog, on PostgreSQL, against bench/README.md "Budgets":
 * seeding every game with its history from 2025-03-02 ≤ 5 min; then, the next day, the daily sync
 * of every game with the price snapshot rebuilt after it ≤ 60 s and peak RSS ≤ 1 GB.
 *
 *   BENCH_SYNC_DATABASE_URL=postgres://postgres@127.0.0.1:5432/tcg_bench_sync bun bench/sync.bench.ts
 *
 * The database is created for the run and dropped after it (BENCH_KEEP=1 keeps it). Everything
 * runs in this process, as the CLI and the scheduler run it, with PostgreSQL on the same cores:
 * the time is the sync's whole cost, generating the demo marketplace's data included. Peak RSS is
 * the kernel's high-water mark (VmHWM), reset before each phase. Exits 1 if a budget fails.
 */
import { cpus, loadavg, totalmem } from 'node:os'
import { sql } from 'drizzle-orm'
import postgres from 'postgres'
import { openPostgres, selectRows } from '../src/db/client'
import { DEFAULT_BACKFILL } from '../src/modules/ingest/normalize'
import { type SyncSummary, syncGames } from '../src/modules/ingest/service'
import { createDemoSource } from '../src/modules/ingest/sources/demo'
import { loadSnapshotSource } from '../src/modules/snapshot/repo'
import { PriceSnapshot } from '../src/modules/snapshot/snapshot'
import { addDays, clockWithWall, utcDate } from '../src/shared/clock'
import { createLogger } from '../src/shared/logger'
import { describeCpu, measurePhase, memoryMb } from './phase'
import { type BudgetRow, reportBudgets } from './report'

const DATABASE_URL = process.env.BENCH_SYNC_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/tcg_bench_sync'
const SCALE = 'large'
/** Optional comma-separated game slugs, to profile part of the catalog (the budgets are for all of it). */
const GAMES = process.env.BENCH_SYNC_GAMES?.split(',')
const SEED_BUDGET_S = 300
const SYNC_BUDGET_S = 60
const RSS_BUDGET_MB = 1024

/** The seed stands on yesterday at noon UTC, the sync on today: a real day of price moves. */
const today = utcDate(new Date())
const seedInstant = new Date(`${addDays(today, -1)}T12:00:00.000Z`)
const syncInstant = new Date(`${today}T12:00:00.000Z`)

const url = new URL(DATABASE_URL)
const name = url.pathname.slice(1)
url.pathname = '/postgres'
const admin = postgres(url.toString(), { max: 1, onnotice: () => {} })
await admin.unsafe(`drop database if exists ${name}`)
await admin.unsafe(`create database ${name}`)
const [{ server_version: postgresVersion }] = (await admin`show server_version`) as unknown as [{ server_version: string }]

const loadBefore = loadavg()
const database = await openPostgres(DATABASE_URL, { max: 4 })
let withinBudgets = false
try {
  await database.migrate()
  const logger = createLogger('warn')
  let last = performance.now()
  const progress =
    (label: string) =>
    ({ game, done, total }: { game: string; done: number; total: number }) => {
      const now = performance.now()
      console.error(`  ${label} ${done}/${total} ${game} ${((now - last) / 1000).toFixed(1)} s`)
      last = now
    }
  const failures = (summary: SyncSummary) => {
    if (summary.failed > 0) throw new Error(`${summary.failed} games failed: ${summary.games.find((g) => g.error)?.error}`)
    return summary
  }
  last = performance.now()
  const seed = await measurePhase('seed', async () =>
    failures(
      await syncGames(
        { db: database.db, source: createDemoSource({ scale: SCALE, now: () => seedInstant }), clock: clockWithWall(() => seedInstant), logger },
        { gameSlugs: GAMES, backfill: DEFAULT_BACKFILL, onProgress: progress('seed') },
      ),
    ),
  )
  const [counts] = await selectRows<{ cards: number; printings: number; history: number; first: string }>(
    database.db,
    sql`select (select count(*)::int from cards) as cards, (select count(*)::int from card_prices) as printings,
               (select count(*)::int from price_history) as history, (select min(date)::text from price_history) as first`,
  )
  last = performance.now()
  const sync = await measurePhase('daily sync', async () =>
    failures(
      await syncGames(
        { db: database.db, source: createDemoSource({ scale: SCALE, now: () => syncInstant }), clock: clockWithWall(() => syncInstant), logger },
        { gameSlugs: GAMES, onProgress: progress('sync') },
      ),
    ),
  )
  // The snapshot rebuild the service runs after a sync, in the same process as the sync (so the
  // peak below is the two together, the scheduler's case).
  const snapshotStarted = performance.now()
  const snapshot = PriceSnapshot.build(await loadSnapshotSource(database.db), syncInstant)
  const snapshotSeconds = (performance.now() - snapshotStarted) / 1000
  const syncPeakMb = memoryMb('self', 'VmHWM')
  const [sizes] = await selectRows<{ history: string }>(database.db, sql`select pg_size_pretty(pg_total_relation_size('price_history')) as history`)

  const syncTotal = sync.seconds + snapshotSeconds
  const rows = (summary: SyncSummary, stat: string) => summary.games.reduce((sum, game) => sum + (game.stats?.[stat] ?? 0), 0)
  console.log(
    `\n${cpus().length} cores (${cpus()[0]?.model}), ${Math.round(totalmem() / 2 ** 30)} GiB, Bun ${Bun.version}, PostgreSQL ${postgresVersion}, ` +
      `load average ${loadBefore[0]!.toFixed(2)} before / ${loadavg()[0]!.toFixed(2)} after`,
  )
  console.log(
    `catalog: ${counts!.cards} cards, ${counts!.printings} printings, ${counts!.history} history rows from ${counts!.first} (${sizes!.history}); ` +
      `sync: ${rows(sync.value, 'prices')} prices, ${rows(sync.value, 'sales_rows')} sales rows, ${sync.value.changes.length} price changes; ` +
      `snapshot: ${snapshot.cardCount} cards, ${snapshot.priceCount} prices\n`,
  )
  const budgets: BudgetRow[] = [
    {
      bench: 'sync',
      measure: 'seed with history, every game',
      value: `${seed.seconds.toFixed(1)} s (${rows(seed.value, 'history_rows')} history rows)`,
      budget: `≤ ${SEED_BUDGET_S} s`,
      pass: seed.seconds <= SEED_BUDGET_S,
    },
    { bench: 'sync', measure: 'seed peak RSS', value: `${seed.peakMb.toFixed(0)} MB`, budget: 'reported' },
    { bench: 'sync', measure: 'seed CPU', value: describeCpu(seed.cpu), budget: 'reported' },
    { bench: 'sync', measure: 'daily sync CPU', value: describeCpu(sync.cpu), budget: 'reported' },
    {
      bench: 'sync',
      measure: 'daily sync + snapshot rebuild',
      value: `${syncTotal.toFixed(1)} s (sync ${sync.seconds.toFixed(1)} s, snapshot ${snapshotSeconds.toFixed(1)} s)`,
      budget: `≤ ${SYNC_BUDGET_S} s`,
      pass: syncTotal <= SYNC_BUDGET_S,
    },
    {
      bench: 'sync',
      measure: 'daily sync + snapshot peak RSS',
      value: `${syncPeakMb.toFixed(0)} MB`,
      budget: `≤ ${RSS_BUDGET_MB} MB`,
      pass: syncPeakMb <= RSS_BUDGET_MB,
    },
  ]
  withinBudgets = reportBudgets(budgets)
} finally {
  await database.close()
  if (process.env.BENCH_KEEP !== '1') await admin.unsafe(`drop database if exists ${name}`)
  await admin.end()
}
process.exit(withinBudgets ? 0 : 1)
