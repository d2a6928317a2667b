/**
 * The TCGCSV source and the sync on the `large` fake mirror (57 categories, 2,619 groups, about
 * 297,000 products), on PostgreSQL: the first full load of every game ≤ 120 s, then the next day's
 * price-only sync (every group's modifiedOn unchanged, so only prices are fetched) ≤ 60 s, each
 * with the bench process's peak RSS ≤ 1 GB.
 *
 *   BENCH_TCGCSV_DATABASE_URL=postgres://postgres@127.0.0.1:5432/tcg_bench_tcgcsv bun bench/tcgcsv-sync.bench.ts
 *
 * The database is created for the run and dropped after it (BENCH_KEEP=1 keeps it). The sync runs
 * in this process, as the CLI and the scheduler run it; the mirror (test/fixtures/fake-tcgcsv.ts)
 * runs in its own process on the same cores, answered one request at a time with no pacing. The
 * budgets are judged on wall time, mirror included; the mirror's CPU is printed beside it so the
 * reader can subtract it. Peak RSS is this process's VmHWM, reset before each phase. Exits 1 if a
 * budget fails or the load is incomplete.
 */
import { cpus, loadavg, totalmem } from 'node:os'
import { sql } from 'drizzle-orm'
import postgres from 'postgres'
import { openPostgres, selectRows } from '../src/db/client'
import { marketplaceRequestsOn } from '../src/modules/ingest/repo'
import { type SyncSummary, syncGames } from '../src/modules/ingest/service'
import type { MarketplaceSource } from '../src/modules/ingest/source'
import { createTcgcsvSource } from '../src/modules/ingest/sources/tcgcsv'
import { addDays, clockWithWall } from '../src/shared/clock'
import { createLogger } from '../src/shared/logger'
import { TCGCSV_BASE_DATE } from '../test/fixtures/tcgcsv-data'
import { startFakeTcgcsv, TEST_USER_AGENT } from '../test/helpers/tcgcsv'
import { describeCpu, measurePhase, memoryMb, type Phase } from './phase'
import { type BudgetRow, reportBudgets } from './report'

const DATABASE_URL = process.env.BENCH_TCGCSV_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/tcg_bench_tcgcsv'
const LOAD_BUDGET_S = 120
const SYNC_BUDGET_S = 60
const RSS_BUDGET_MB = 1024

/** The mirror publishes around 20:00 UTC: the load stands an hour after on its first day, the sync a day later. */
const loadDate = TCGCSV_BASE_DATE
const syncDate = addDays(loadDate, 1)
const loadInstant = new Date(`${loadDate}T21:00:00.000Z`)
const syncInstant = new Date(`${syncDate}T21:00:00.000Z`)

/** Time spent inside the source's calls (requests, JSON parsing, row checks, mapping), and its skipped rows by kind. */
function measured(source: MarketplaceSource) {
  const spent = { seconds: 0 }
  const skipped: Record<string, number> = {}
  const timed =
    <A extends unknown[], R>(call: (...args: A) => Promise<R>) =>
    async (...args: A): Promise<R> => {
      const started = performance.now()
      try {
        return await call(...args)
      } finally {
        spent.seconds += (performance.now() - started) / 1000
      }
    }
  const wrapped: MarketplaceSource = {
    ...source,
    listGames: timed(source.listGames),
    listSets: timed(source.listSets),
    listProducts: timed(source.listProducts),
    listPrices: timed(source.listPrices),
    takeSkipped() {
      const taken = source.takeSkipped?.() ?? {}
      for (const [kind, n] of Object.entries(taken)) skipped[kind] = (skipped[kind] ?? 0) + n
      return taken
    },
  }
  return { source: wrapped, spent, skipped }
}

const url = new URL(DATABASE_URL)
const name = url.pathname.slice(1)
url.pathname = '/postgres'
const admin = postgres(url.toString(), { max: 1, onnotice: () => {} })
await admin.unsafe(`drop database if exists ${name}`)
await admin.unsafe(`create database ${name}`)
const [{ server_version: postgresVersion }] = (await admin`show server_version`) as unknown as [{ server_version: string }]

const loadBefore = loadavg()
const mirror = await startFakeTcgcsv({ size: 'large', date: loadDate })
const database = await openPostgres(DATABASE_URL, { max: 4 })
let withinBudgets = false
try {
  const mirrorPid = mirror.pid
  await database.migrate()
  const logger = createLogger('warn')
  const categories = (await (await fetch(`${mirror.url}/tcgplayer/categories`, { headers: { 'user-agent': TEST_USER_AGENT } })).json()) as {
    results: { categoryId: number }[]
  }
  await mirror.reset()
  const failures = (summary: SyncSummary) => {
    const bad = summary.games.find((game) => game.status !== 'succeeded')
    if (bad) throw new Error(`${summary.failed} games failed, ${summary.partial} partial: ${bad.slug}: ${bad.error}`)
    return summary
  }
  /**
   * Every game synced at `instant`, as the scheduler runs it, with each game's time printed; what
   * the run spent inside the source, and after the last game (the statistics refresh), beside it.
   */
  const syncAt = async (label: string, instant: Date) => {
    const clock = clockWithWall(() => instant)
    const { source, spent, skipped } = measured(
      createTcgcsvSource({
        url: mirror.url,
        categories: categories.results.map((category) => category.categoryId),
        timeoutMs: 120_000,
        pacingMs: 0,
        dailyRequests: 1_000_000,
        userAgent: TEST_USER_AGENT,
        db: database.db,
        clock,
        logger,
      }),
    )
    let last = performance.now()
    const onProgress = ({ game, done, total }: { game: string; done: number; total: number }) => {
      const now = performance.now()
      console.error(`  ${label} ${done}/${total} ${game} ${((now - last) / 1000).toFixed(1)} s`)
      last = now
    }
    const summary = failures(await syncGames({ db: database.db, source, clock, logger }, { onProgress }))
    return { summary, sourceSeconds: spent.seconds, statisticsSeconds: (performance.now() - last) / 1000, skipped }
  }
  const requestsSent = async () => {
    const paths = (await mirror.requests()).map((request) => request.path)
    await mirror.reset()
    return { all: paths.length, products: paths.filter((path) => path.endsWith('/products')).length, prices: paths.filter((path) => path.endsWith('/prices')).length }
  }
  const tableCounts = async () => {
    const [row] = await selectRows<{ games: number; sets: number; cards: number; prices: number; history: number }>(
      database.db,
      sql`select (select count(*)::int from games) as games, (select count(*)::int from sets) as sets, (select count(*)::int from cards) as cards,
                 (select count(*)::int from card_prices) as prices, (select count(*)::int from price_history) as history`,
    )
    return row!
  }

  // Phase 1: the first full load (no backfill: the mirror has no past prices).
  const load = await measurePhase('first load', () => syncAt('load', loadInstant), { 'the mirror': mirrorPid })
  const loadRequests = await requestsSent()
  const loadCounted = await marketplaceRequestsOn(database.db, loadDate)
  const loaded = await tableCounts()

  // Phase 2: the next day, products unchanged, prices moved.
  await mirror.setDay(syncDate)
  const sync = await measurePhase('next-day sync', () => syncAt('sync', syncInstant), { 'the mirror': mirrorPid })
  const syncRequests = await requestsSent()
  const syncCounted = await marketplaceRequestsOn(database.db, syncDate)
  const synced = await tableCounts()
  const [todays] = await selectRows<{ history: number; marketPriced: number; updated: number }>(
    database.db,
    sql`select (select count(*)::int from price_history where date = ${syncDate}) as history,
               (select count(*)::int from card_prices where market_price is not null) as "marketPriced",
               (select count(*)::int from card_prices where last_updated_at = ${syncInstant.toISOString()}) as updated`,
  )
  const mirrorPeakMb = memoryMb(mirrorPid, 'VmHWM')

  const stat = (summary: SyncSummary, key: string) => summary.games.reduce((sum, game) => sum + (game.stats?.[key] ?? 0), 0)
  const skippedOf = (skipped: Record<string, number>) =>
    Object.entries(skipped)
      .map(([kind, n]) => `${n} ${kind}`)
      .join(', ') || 'none'
  const { counts } = mirror
  const skip = (kind: string) => load.value.skipped[kind] ?? 0
  console.log(
    `\n${cpus().length} cores (${cpus()[0]?.model}), ${Math.round(totalmem() / 2 ** 30)} GiB, Bun ${Bun.version}, PostgreSQL ${postgresVersion}, ` +
      `load average ${loadBefore[0]!.toFixed(2)} before / ${loadavg()[0]!.toFixed(2)} after`,
  )
  console.log(
    `mirror: ${counts.categories} categories, ${counts.groups} groups, ${counts.products} products, ${counts.priceRows} price rows; ` +
      `its peak RSS ${mirrorPeakMb.toFixed(0)} MB`,
  )
  console.log(
    `first load: ${loaded.games} games, ${loaded.sets} sets, ${loaded.cards} cards, ${loaded.prices} prices, ${loaded.history} history rows; ` +
      `rows skipped: ${skippedOf(load.value.skipped)}; requests: ${loadRequests.all} at the mirror (${loadRequests.products} products, ${loadRequests.prices} prices), ` +
      `${loadCounted} counted in marketplace_requests`,
  )
  console.log(
    `next-day sync: ${stat(sync.value.summary, 'prices')} prices, ${todays!.updated} rewritten (the others' values unchanged), ${todays!.history} history rows for ${syncDate} ` +
      `(${synced.history} in all), ${sync.value.summary.changes.length} price changes, ${stat(sync.value.summary, 'products_fetched')} groups' products fetched; ` +
      `rows skipped: ${skippedOf(sync.value.skipped)}; requests: ${syncRequests.all} at the mirror (${syncRequests.products} products, ${syncRequests.prices} prices), ` +
      `${syncCounted} counted in marketplace_requests\n`,
  )
  console.log(
    'Measured: wall time of syncGames in this process (the requests to the mirror, their parsing and row checks, the mapping, the ' +
      'writes and the closing VACUUM ANALYZE), with the mirror answering from its own process on the same cores; the mirror is on the ' +
      'path of every request (one at a time), so "wall − mirror CPU" estimates the service alone.\n',
  )

  // Complete: every listed row stored but the ones the source refused (a refused product takes its price rows with it).
  const complete =
    loaded.games === counts.categories - skip('category') &&
    loaded.sets === counts.groups - skip('group') &&
    loaded.cards === counts.products - skip('product') &&
    loaded.prices <= counts.priceRows - skip('price') &&
    loaded.prices >= counts.priceRows - skip('price') - 3 * skip('product')
  const priceOnly = syncRequests.products === 0 && syncRequests.prices === counts.groups && stat(sync.value.summary, 'products_fetched') === 0
  // Every price row read again, and every printing with a market price has the new day's point (a row whose values did not move is not rewritten).
  const repriced = synced.cards === loaded.cards && stat(sync.value.summary, 'prices') === loaded.prices && todays!.history === todays!.marketPriced
  const countsAgree = loadRequests.all === loadCounted && syncRequests.all === syncCounted
  const split = ({ seconds, value }: Phase<Awaited<ReturnType<typeof syncAt>>>) =>
    `source ${value.sourceSeconds.toFixed(1)} s (requests with their budget count, parsing, row checks, mapping), ` +
    `database writes and the rest ${(seconds - value.sourceSeconds - value.statisticsSeconds).toFixed(1)} s, statistics ${value.statisticsSeconds.toFixed(1)} s`
  const wall = (p: Phase<unknown>) => `${p.seconds.toFixed(1)} s (wall − mirror CPU ${(p.seconds - p.cpu.processes['the mirror']!).toFixed(1)} s)`
  const budgets: BudgetRow[] = [
    {
      bench: 'tcgcsv-sync',
      measure: 'first load complete',
      value: `${loaded.games}/${counts.categories} games, ${loaded.sets}/${counts.groups} sets, ${loaded.cards}/${counts.products} cards, ${loaded.prices}/${counts.priceRows} prices`,
      budget: 'the mirror less skipped rows',
      pass: complete,
    },
    {
      bench: 'tcgcsv-sync',
      measure: 'requests (mirror log = marketplace_requests)',
      value: `load ${loadRequests.all} / ${loadCounted}, sync ${syncRequests.all} / ${syncCounted}`,
      budget: 'equal',
      pass: countsAgree,
    },
    {
      bench: 'tcgcsv-sync',
      measure: 'first load, every game',
      value: wall(load),
      budget: `≤ ${LOAD_BUDGET_S} s wall`,
      pass: load.seconds <= LOAD_BUDGET_S,
    },
    { bench: 'tcgcsv-sync', measure: 'first load CPU', value: describeCpu(load.cpu), budget: 'reported' },
    { bench: 'tcgcsv-sync', measure: 'first load, where the wall time went', value: split(load), budget: 'reported' },
    {
      bench: 'tcgcsv-sync',
      measure: 'first load peak RSS',
      value: `${load.peakMb.toFixed(0)} MB`,
      budget: `≤ ${RSS_BUDGET_MB} MB`,
      pass: load.peakMb <= RSS_BUDGET_MB,
    },
    {
      bench: 'tcgcsv-sync',
      measure: 'next-day sync: prices only, every price read, a point per market price',
      value:
        `${syncRequests.products} products requests, ${syncRequests.prices} prices requests, ${stat(sync.value.summary, 'prices')}/${loaded.prices} prices, ` +
        `${todays!.history}/${todays!.marketPriced} points`,
      budget: `0 products, ${counts.groups} prices requests, all`,
      pass: priceOnly && repriced,
    },
    {
      bench: 'tcgcsv-sync',
      measure: 'next-day sync, every game',
      value: wall(sync),
      budget: `≤ ${SYNC_BUDGET_S} s wall`,
      pass: sync.seconds <= SYNC_BUDGET_S,
    },
    { bench: 'tcgcsv-sync', measure: 'next-day sync CPU', value: describeCpu(sync.cpu), budget: 'reported' },
    { bench: 'tcgcsv-sync', measure: 'next-day sync, where the wall time went', value: split(sync), budget: 'reported' },
    {
      bench: 'tcgcsv-sync',
      measure: 'next-day sync peak RSS',
      value: `${sync.peakMb.toFixed(0)} MB`,
      budget: `≤ ${RSS_BUDGET_MB} MB`,
      pass: sync.peakMb <= RSS_BUDGET_MB,
    },
  ]
  withinBudgets = reportBudgets(budgets)
} finally {
  await database.close()
  await mirror.stop()
  if (process.env.BENCH_KEEP !== '1') await admin.unsafe(`drop database if exists ${name}`)
  await admin.end()
}
process.exit(withinBudgets ? 0 : 1)
