import { afterAll, afterEach, describe, expect, test } from 'bun:test'
import { eq, sql } from 'drizzle-orm'
import { manualClock, testRedis } from '../../test/helpers/auth'
import { fakeClock } from '../../test/helpers/clock'
import { freshDatabase, selectRows, testLogger } from '../../test/helpers/db'
import { TEST_DATABASE_URL, TEST_NOW } from '../../test/helpers/env'
import { eventually } from '../../test/helpers/eventually'
import { appDeps } from '../../test/helpers/server'
import { appReady, createApp, refreshAppSnapshot, stopApp } from '../app'
import { loadConfig } from '../config'
import { openPostgres } from '../db/client'
import { jobRuns, syncRuns } from '../db/schema'
import { recrawlConditions } from '../modules/conditions/recrawl'
import type { MarketplaceSource } from '../modules/ingest/source'
import { createDemoSource } from '../modules/ingest/sources/demo'
import type { PriceChangeBatch } from '../modules/webhooks/alerts'
import { createLogger } from '../shared/logger'
import type { LockSession } from './leader-repo'
import { formatJobStatuses, jobStatuses } from './report'
import { interruptAbandonedRuns, runsOf, startJobRun } from './runs'
import { createScheduler, RECORD_WAIT_MS, type Scheduler, type SchedulerDeps, type SchedulerOptions, STOP_WAIT_MS } from './scheduler'

// The seeded catalog was synced at TEST_NOW (2026-11-20T12:00Z, a Friday). At 2026-11-21T07:30Z
// (02:30 EST on Saturday) tier 3's 02:00 run (07:00Z) is due; tier 2's latest instant
// (2026-11-20T08:00Z) came before the seed, and the demo marketplace has no tier 0 or 1 games.
const DUE_AT = new Date('2026-11-21T07:30:00Z')

const database = await freshDatabase('seeded')
const redis = await testRedis()
const clock = manualClock(DUE_AT)
const config = { ...loadConfig({}), databaseUrl: database.url, leaderRetrySeconds: 1, conditionRecrawlPerMinute: 7 }
const deps: SchedulerDeps = {
  config,
  db: database.db,
  database,
  redis,
  source: createDemoSource({ scale: 'tiny', now: () => clock.now() }),
  clock,
  logger: testLogger,
}

// A real app on the same database and clock: its snapshot must follow the scheduled sync.
const app = createApp(appDeps({ db: database.db, redis, logger: testLogger, clock }))
await appReady(app)
afterAll(() => stopApp(app), 30_000)
const readiness = async () => (await (await app.handle(new Request('http://localhost/ready'))).json()) as any

const batches: PriceChangeBatch[] = []
let snapshotRefreshes = 0
const schedulers: Scheduler[] = []
// Stopped after each test (a failed one included), before the database is dropped; a stop may
// wait for a running sync and close a lock session.
afterEach(async () => {
  for (const scheduler of schedulers.splice(0)) await scheduler.stop()
}, 30_000)

/** A cron pattern that does not fire while a test runs. */
const ONLY_ON_LEAP_DAYS = '0 0 0 29 2 *'

function scheduler(options: Partial<SchedulerOptions> = {}, schedulerDeps: SchedulerDeps = deps) {
  const created = createScheduler(schedulerDeps, {
    alertHook: async (batch) => void batches.push(batch),
    refreshSnapshot: async () => {
      snapshotRefreshes++
      await refreshAppSnapshot(app)
    },
    ...options,
    // The real every-minute re-crawl paces its requests over a minute, and `idle()` waits for it:
    // one that starts when a minute turns inside a sync test would hold that test up to a minute.
    // Only the re-crawl's own test gives it a pattern.
    patterns: { 'condition-recrawl': ONLY_ON_LEAP_DAYS, ...options.patterns },
  })
  schedulers.push(created)
  return created
}

const slugsOfTier = async (tier: number) =>
  (await selectRows<{ slug: string }>(database.db, sql`select slug from games where priority = ${tier} order by slug`)).map((row) => row.slug)

/** A game sync's row, as the sync writes it before its game's transaction. */
const gameSyncOf = async (id: number) => (await database.db.select().from(syncRuns).where(eq(syncRuns.id, id)))[0]!
const runOf = async (id: number) => (await database.db.select().from(jobRuns).where(eq(jobRuns.id, id)))[0]!

/** What a leader that died mid-way leaves: a run row without its run lock, and a game sync whose transaction is gone. */
async function leftByADeadProcess(run: { job: string; scheduledFor: Date; games: string[]; startedAt: Date }) {
  const [crashed] = await database.db
    .insert(jobRuns)
    .values({ ...run, outcome: 'running' })
    .returning({ id: jobRuns.id })
  const [game] = await selectRows<{ id: number }>(database.db, sql`select id from games where slug = ${run.games[0] ?? ''}`)
  const [gameSync] = await database.db
    .insert(syncRuns)
    .values({ gameId: game?.id ?? null, priceDate: run.startedAt.toISOString().slice(0, 10), status: 'running', startedAt: run.startedAt })
    .returning({ id: syncRuns.id })
  return { runId: crashed!.id, gameSyncId: gameSync!.id }
}

/** A lock session that always holds the lead: for tests whose clock is fake, where the real one's statement bound would never pass. */
const alwaysLeading = async (): Promise<LockSession> => ({ tryLock: async () => true, holdsLock: async () => true, close: async () => {} })

describe('scheduled syncs on the leader', () => {
  test('a run missed while no node led runs once when a node starts leading, for the tiers whose instant passed', async () => {
    const versionBefore = (await readiness()).snapshot.version
    const node = scheduler()
    node.start()
    await eventually(() => node.isLeader(), { what: 'leading' })
    await node.idle()

    const [tier3] = await runsOf(database.db, 'sync-tier-3')
    expect(await runsOf(database.db, 'sync-tier-3')).toHaveLength(1)
    expect(tier3).toMatchObject({ outcome: 'succeeded', error: null })
    expect(tier3!.scheduledFor.toISOString()).toBe('2026-11-21T07:00:00.000Z')
    expect([...tier3!.games].sort()).toEqual(await slugsOfTier(3))
    expect(tier3!.startedAt.getTime()).toBe(DUE_AT.getTime())
    expect(tier3!.finishedAt!.getTime()).toBe(DUE_AT.getTime())
    for (const job of ['sync-tier-2', 'sync-tier-1', 'sync-tier-0']) expect(await runsOf(database.db, job)).toEqual([])

    // The games say so too: tier 3 synced now, tier 2 still at the seed.
    const synced = await selectRows<{ priority: number; last: Date | string }>(
      database.db,
      sql`select priority, max(last_synced_at) as last from games group by priority order by priority`,
    )
    expect(synced.map((row) => [row.priority, new Date(row.last).toISOString()])).toEqual([
      [2, TEST_NOW.toISOString()],
      [3, DUE_AT.toISOString()],
    ])
    const setsBehind = await selectRows<{ n: number }>(
      database.db,
      sql`select count(*)::int as n from sets s join games g on g.id = s.game_id where g.priority = 3 and s.last_synced_at <> ${DUE_AT.toISOString()}::timestamptz`,
    )
    expect(setsBehind[0]!.n).toBe(0)

    // The alert hook got the run's changed prices, and they are the prices now stored.
    expect(batches).toHaveLength(1)
    const [batch] = batches
    expect(batch).toMatchObject({ job: 'sync-tier-3', runId: tier3!.id })
    expect(batch!.changes.length).toBeGreaterThan(0)
    expect(tier3!.rowsChanged).toBe(batch!.changes.length)
    const stored = await selectRows<{ card_id: number; printing: string; market_price: number }>(
      database.db,
      sql`select cp.card_id, cp.printing, cp.market_price from card_prices cp join cards c on c.id = cp.card_id join games g on g.id = c.game_id where g.priority = 3`,
    )
    const storedPrice = new Map(stored.map((row) => [`${row.card_id}:${row.printing}`, Number(row.market_price)]))
    for (const change of batch!.changes) {
      expect(storedPrice.get(`${change.cardId}:${change.printing}`)).toBe(change.newPrice)
      expect(change.previousPrice).not.toBe(change.newPrice)
    }

    // This node's snapshot was rebuilt at once (no change message or poll needed).
    expect(snapshotRefreshes).toBe(1)
    expect((await readiness()).snapshot.version).not.toBe(versionBefore)
  }, 120_000)

  test('a node that leads next (after a restart or a takeover) finds nothing due and runs nothing again', async () => {
    const next = scheduler()
    next.start()
    await eventually(() => next.isLeader(), { what: 'leading' })
    await next.idle()
    expect(await runsOf(database.db, 'sync-tier-3')).toHaveLength(1)
    expect(batches).toHaveLength(1)
  }, 60_000)

  test('a run and a game sync left running by a node that died are marked interrupted (not failed) at the next lead, and the games are synced', async () => {
    // As if a leader died mid-way through the tier 2 run due at 2026-11-21T08:00Z.
    clock.set('2026-11-21T08:30:00Z')
    const { runId: crashedId, gameSyncId } = await leftByADeadProcess({
      job: 'sync-tier-2',
      scheduledFor: new Date('2026-11-21T08:00:00Z'),
      games: await slugsOfTier(2),
      startedAt: new Date('2026-11-21T08:00:01Z'),
    })
    const node = scheduler()
    node.start()
    await eventually(() => node.isLeader(), { what: 'leading' })
    await node.idle()
    const runs = await runsOf(database.db, 'sync-tier-2')
    expect(runs.map((run) => [run.id, run.outcome])).toEqual([
      [crashedId, 'interrupted'],
      [runs[1]!.id, 'succeeded'],
    ])
    expect(runs[0]!.error).toBe('the process running it ended before it finished')
    expect(runs[0]!.finishedAt!.toISOString()).toBe('2026-11-21T08:30:00.000Z')
    expect(await gameSyncOf(gameSyncId)).toMatchObject({ status: 'interrupted', error: expect.stringContaining('its previous data stands') })
    expect(runs[1]!.scheduledFor.toISOString()).toBe('2026-11-21T08:00:00.000Z')
    expect([...runs[1]!.games].sort()).toEqual(await slugsOfTier(2))
    const [behind] = await selectRows<{ n: number }>(
      database.db,
      sql`select count(*)::int as n from games where priority = 2 and last_synced_at < '2026-11-21T08:00:00Z'::timestamptz`,
    )
    expect(behind!.n).toBe(0)
    expect(batches.map((batch) => batch.job)).toEqual(['sync-tier-3', 'sync-tier-2'])
  }, 120_000)

  test('a cron tick runs the job on the leader, once per scheduled instant', async () => {
    // Tier 3 fires every second here; the clock stands at 09:00:00Z, so every tick names that one instant.
    clock.set('2026-11-21T09:00:00Z')
    const before = (await runsOf(database.db, 'sync-tier-3')).length
    // Each tick that finds nothing due says so at debug level: counting those counts the ticks.
    const logged: { job?: string; scheduledFor?: string; msg: string }[] = []
    const logger = createLogger('debug', { write: (line: string) => void logged.push(JSON.parse(line)) })
    const nothingDue = () => logged.filter((line) => line.job === 'sync-tier-3' && line.msg.startsWith('nothing due'))
    const node = scheduler({ patterns: { 'sync-tier-3': '* * * * * *' } }, { ...deps, logger })
    node.start()
    await eventually(() => node.isLeader(), { what: 'leading' })
    await eventually(async () => (await runsOf(database.db, 'sync-tier-3')).slice(before).some((run) => run.outcome !== 'running'), {
      timeout: 60_000,
      what: 'the tier 3 run finished',
    })
    // Two more ticks of the same instant find nothing due.
    const ticks = nothingDue().length
    await eventually(() => nothingDue().length >= ticks + 2, { timeout: 30_000, what: 'two more ticks' })
    expect(new Set(nothingDue().map((line) => line.scheduledFor))).toEqual(new Set(['2026-11-21T09:00:00.000Z']))
    // Stopped before waiting for the lane: a tick every second on a slow machine would keep it busy.
    await node.stop()
    await node.idle()
    const runs = await runsOf(database.db, 'sync-tier-3')
    expect(runs).toHaveLength(before + 1)
    expect(runs.at(-1)!.scheduledFor.toISOString()).toBe('2026-11-21T09:00:00.000Z')
    expect(runs.at(-1)!.outcome).toBe('succeeded')
  }, 120_000)

  test('the condition re-crawl runs on the leader at the configured rate, and each run is recorded', async () => {
    clock.set('2026-11-21T10:00:00Z')
    const limits: number[] = []
    const node = scheduler({
      patterns: { 'condition-recrawl': '* * * * * *' },
      // The real re-crawl, its requests spread over 300 ms instead of a minute.
      recrawl: (recrawlDeps, options) => {
        limits.push(options.limit)
        return recrawlConditions(recrawlDeps, { ...options, windowMs: 300 })
      },
    })
    node.start()
    await eventually(async () => (await runsOf(database.db, 'condition-recrawl')).some((run) => run.outcome !== 'running'), {
      timeout: 60_000,
      what: 'a finished re-crawl run',
    })
    await node.stop()
    expect(limits[0]).toBe(config.conditionRecrawlPerMinute)
    const [first] = await runsOf(database.db, 'condition-recrawl')
    expect(first).toMatchObject({ outcome: 'succeeded', error: null })
    const [refreshed] = await selectRows<{ n: number }>(database.db, sql`select count(*)::int as n from condition_refreshes`)
    expect(refreshed!.n).toBeGreaterThan(0)
    expect(first!.rowsChanged).toBeGreaterThan(0)
    expect(first!.rowsChanged).toBeLessThanOrEqual(config.conditionRecrawlPerMinute)
  }, 90_000)

  test('JOBS_ENABLED=false: the node never competes for the lead and runs nothing', async () => {
    clock.set('2026-11-22T09:00:00Z') // tier 3 and 2 are due again
    const opened: boolean[] = []
    const node = (jobsEnabled: boolean) => {
      const created = createScheduler(
        { ...deps, config: { ...config, jobsEnabled } },
        {
          alertHook: async (batch) => void batches.push(batch),
          openLockSession: () => (opened.push(jobsEnabled), Promise.reject(new Error('no lock in this test'))),
        },
      )
      schedulers.push(created)
      return created
    }
    // A node that competes asks for its lock session within start(): an enabled one shows it.
    const enabled = node(true)
    enabled.start()
    expect(opened).toEqual([true])
    await enabled.stop()
    const disabled = node(false)
    disabled.start()
    expect(opened).toEqual([true])
    expect(disabled.isLeader()).toBe(false)
    await disabled.idle()
    const [pending] = await selectRows<{ n: number }>(database.db, sql`select count(*)::int as n from job_runs where scheduled_for >= '2026-11-22T00:00:00Z'`)
    expect(pending!.n).toBe(0)
  }, 30_000)

  test('a stop during the re-crawl records its run interrupted, not failed, and releases the lead at once', async () => {
    clock.set('2026-11-21T11:00:00Z')
    const known = new Set((await runsOf(database.db, 'condition-recrawl')).map((run) => run.id))
    const release = Promise.withResolvers<void>()
    const node = scheduler({
      patterns: { 'condition-recrawl': '* * * * * *' },
      recrawl: async () => {
        await release.promise
        return { refreshed: 1, failed: 0 }
      },
    })
    node.start()
    const run = await eventually(async () => (await runsOf(database.db, 'condition-recrawl')).find((row) => !known.has(row.id) && row.outcome === 'running'), {
      timeout: 30_000,
      what: 'a re-crawl under way',
    })
    await node.stop()
    expect(node.isLeader()).toBe(false)
    expect(await runOf(run.id)).toMatchObject({ outcome: 'interrupted', error: 'the node stopped before the run finished' })
    expect((await runOf(run.id)).finishedAt!.toISOString()).toBe('2026-11-21T11:00:00.000Z')
    release.resolve()
    await node.idle()
  }, 60_000)
})

describe('runs whose process is gone', () => {
  test('the jobs list shows a run left by a dead process as interrupted, and records it so', async () => {
    const games = await slugsOfTier(3)
    const { runId } = await leftByADeadProcess({
      job: 'sync-tier-3',
      scheduledFor: new Date('2026-11-24T07:00:00Z'),
      games,
      startedAt: new Date('2026-11-24T07:00:01Z'),
    })
    const listed = formatJobStatuses(await jobStatuses(database.db, new Date('2026-11-24T07:30:00Z')))
    expect(listed.split('\n').find((line) => line.startsWith('sync-tier-3'))).toContain(
      `interrupted 2026-11-24T07:30:00.000Z (for 2026-11-24T07:00:00.000Z, ${games.length} games): the process running it ended before it finished`,
    )
    expect((await runOf(runId)).outcome).toBe('interrupted')
  })

  // Another pool is another process as PostgreSQL sees it: its sessions, its locks.
  test.skipIf(!TEST_DATABASE_URL)('a run whose process is alive is left running, whatever its age; once that process is gone, it is interrupted', async () => {
    const other = await openPostgres(database.url!, { max: 2 })
    const run = await startJobRun(other.db, { job: 'manual-sync', scheduledFor: new Date('2026-11-01T00:00:00Z'), games: [], now: new Date('2026-11-01T00:00:00Z') })
    expect(await interruptAbandonedRuns(database.db, new Date('2026-12-01T00:00:00Z'))).toEqual({ runs: 0, gameSyncs: 0 })
    expect((await runOf(run.id)).outcome).toBe('running')
    await other.close()
    expect(await interruptAbandonedRuns(database.db, new Date('2026-12-01T00:00:00Z'))).toEqual({ runs: 1, gameSyncs: 0 })
    expect(await runOf(run.id)).toMatchObject({ outcome: 'interrupted', error: 'the process running it ended before it finished' })
  })

  /** The tiny demo marketplace on `clock`, whose sync waits for `held` where `where` says. */
  function holdingSource(clock: ReturnType<typeof fakeClock>, held: Promise<void>, where: 'checkpoint' | 'listSets', reached = () => {}): MarketplaceSource {
    const demo = createDemoSource({ scale: 'tiny', now: () => clock.now() })
    return {
      name: demo.name,
      capabilities: demo.capabilities,
      ...(where === 'checkpoint' && { checkpoint: () => held }),
      listGames: () => demo.listGames(),
      listSets: async (categoryId) => {
        if (where === 'listSets') {
          reached()
          await held
        }
        return demo.listSets(categoryId)
      },
      listProducts: (groupId) => demo.listProducts(groupId),
      listPrices: (groupId, date) => demo.listPrices(groupId, date),
      listSales: (groupId, date) => demo.listSales(groupId, date),
      listListings: (productId) => demo.listListings(productId),
    }
  }

  test('a stop during a sync that outlasts its wait records the run interrupted; the sync, should it still end, writes how it did', async () => {
    // Tier 3's 02:00 New York run of 2026-11-23 is due. The sync is held where it records the
    // marketplace's count after listing the games, outside its transactions, until the test lets it go.
    const fake = fakeClock(new Date('2026-11-23T07:30:00Z'))
    const held = Promise.withResolvers<void>()
    const holding = holdingSource(fake, held.promise, 'checkpoint')
    const node = scheduler({ openLockSession: alwaysLeading }, { ...deps, clock: fake, source: holding })
    node.start()
    const run = await eventually(async () => (await runsOf(database.db, 'sync-tier-3')).find((row) => row.scheduledFor.toISOString() === '2026-11-23T07:00:00.000Z'), {
      what: 'the tier 3 run under way',
    })
    const timers = fake.pending()
    let stopped = false
    const stopping = node.stop().then(() => (stopped = true))
    await eventually(() => fake.pending() > timers, { what: 'the stop waiting for the sync' })
    await fake.advance(STOP_WAIT_MS - 1)
    expect({ stopped, outcome: (await runOf(run.id)).outcome }).toEqual({ stopped: false, outcome: 'running' })
    await fake.advance(1)
    await stopping
    expect(await runOf(run.id)).toMatchObject({ outcome: 'interrupted', error: 'the node stopped before the run finished' })
    expect((await runOf(run.id)).finishedAt!.toISOString()).toBe(fake.now().toISOString())
    held.resolve()
    await node.idle()
    expect((await runOf(run.id)).outcome).toBe('succeeded')
  }, 60_000)

  test(`a stop during a game's transaction still returns ${RECORD_WAIT_MS} ms after its wait, though PGlite's one connection cannot record the run then`, async () => {
    // Tier 3's run of 2026-11-25 is held inside a game's transaction (where it lists the game's sets).
    const fake = fakeClock(new Date('2026-11-25T07:30:00Z'))
    const held = Promise.withResolvers<void>()
    // Nothing is asked of the database while the transaction is open: under PGlite it would wait for it.
    const inTransaction = Promise.withResolvers<void>()
    const node = scheduler({ openLockSession: alwaysLeading }, { ...deps, clock: fake, source: holdingSource(fake, held.promise, 'listSets', inTransaction.resolve) })
    node.start()
    await inTransaction.promise
    const stopping = node.stop()
    await fake.advance(STOP_WAIT_MS + RECORD_WAIT_MS)
    await stopping
    held.resolve()
    await node.idle()
    const runs = (await runsOf(database.db, 'sync-tier-3')).filter((row) => row.scheduledFor.toISOString() === '2026-11-25T07:00:00.000Z')
    expect(runs.map((run) => run.outcome)).toEqual(['succeeded'])
  }, 60_000)
})
