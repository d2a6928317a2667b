import { describe, expect, test } from 'bun:test'
import { sql } from 'drizzle-orm'
import { interruptAbandonedRuns } from '../../src/jobs/runs'
import { syncGames } from '../../src/modules/ingest/service'
import { createDemoSource } from '../../src/modules/ingest/sources/demo'
import { addDays, clockWithWall, systemClock, utcDate } from '../../src/shared/clock'
import { freshDatabase, selectRows, testLogger } from '../helpers/db'
import { TEST_DATABASE_URL } from '../helpers/env'
import { eventually } from '../helpers/eventually'
import { ROOT } from '../helpers/process'

/**
 * `bun src/cli.ts sync` killed with SIGKILL mid-way: every game is one transaction, so the games
 * it finished keep their new prices, the game it was in keeps its previous data whole, and the
 * next run completes the day and records the killed run and its game in progress as interrupted.
 * The CLI reads the system clock, so the catalog is seeded the day before with a fixed clock and
 * the sync really moves prices.
 */
describe.skipIf(!TEST_DATABASE_URL)('a sync killed mid-way', async () => {
  const database = await freshDatabase('empty')
  const { db } = database
  const today = utcDate(systemClock.now())
  const yesterday = addDays(today, -1)
  const seededAt = new Date(`${yesterday}T12:00:00.000Z`)
  const SCALE = 'small'

  await syncGames({ db, source: createDemoSource({ scale: SCALE, now: () => seededAt }), clock: clockWithWall(() => seededAt), logger: testLogger })

  type PriceState = { game_id: number; card_id: number; printing: string; market_price: number | null; as_of: string; updated: string; change_24h: number | null }
  const prices = () =>
    selectRows<PriceState>(
      db,
      sql`select c.game_id, cp.card_id, cp.printing, cp.market_price, cp.market_price_as_of::text as as_of,
                 cp.last_updated_at::text as updated, cp.price_change_24h as change_24h
          from card_prices cp join cards c on c.id = cp.card_id order by cp.card_id, cp.printing`,
    )
  const todaysHistory = async () =>
    new Map(
      (
        await selectRows<{ game_id: number; n: number }>(
          db,
          sql`select c.game_id, count(*)::int as n from price_history h join cards c on c.id = h.card_id
              where h.date = ${today}::date group by c.game_id`,
        )
      ).map((row) => [row.game_id, row.n]),
    )
  const runs = () =>
    selectRows<{ id: number; game_id: number; status: string; error: string | null }>(
      db,
      sql`select id, game_id, status, error from sync_runs where price_date = ${today} order by id`,
    )
  const manualRuns = () => selectRows<{ id: number; outcome: string; error: string | null }>(db, sql`select id, outcome, error from job_runs where job = 'manual-sync' order by id`)
  const byGame = (rows: PriceState[], gameId: number) => rows.filter((row) => row.game_id === gameId)

  const cli = () =>
    Bun.spawn([process.execPath, 'src/cli.ts', 'sync'], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', DATABASE_URL: database.url!, DEMO_SCALE: SCALE, LOG_LEVEL: 'warn' },
      stdout: 'pipe',
      stderr: 'pipe',
    })

  const before = await prices()
  const gameIds = [...new Set(before.map((row) => row.game_id))]

  test('the killed run leaves finished games updated and the game in progress as it was', async () => {
    expect(before.length).toBeGreaterThan(1000)
    expect((await todaysHistory()).size).toBe(0)

    const child = cli()
    // Kill once a few games have committed and the next one has started: sync_runs says which
    // finished and which one is running (between two games, none is). A process that ended first fails below.
    await eventually(
      async () => {
        if (child.exitCode !== null) return true
        const now = await runs()
        return now.filter((run) => run.status === 'succeeded').length >= 3 && now.some((run) => run.status === 'running')
      },
      { timeout: 60_000, interval: 10, what: 'three games synced and a fourth in progress' },
    )
    expect(child.exitCode).toBeNull()
    // While the CLI lives, its run and its game in progress are its own: nobody takes them for abandoned.
    expect(await interruptAbandonedRuns(db, systemClock.now())).toEqual({ runs: 0, gameSyncs: 0 })
    expect((await manualRuns()).map((run) => run.outcome)).toEqual(['running'])
    child.kill('SIGKILL')
    await child.exited
    expect(child.signalCode).toBe('SIGKILL')

    const afterKill = await runs()
    const succeeded = afterKill.filter((run) => run.status === 'succeeded').map((run) => run.game_id)
    const running = afterKill.filter((run) => run.status === 'running').map((run) => run.game_id)
    expect(succeeded.length).toBeGreaterThanOrEqual(3)
    expect(succeeded.length).toBeLessThan(gameIds.length)
    // The game in progress when the process died: its run row was committed before its transaction.
    expect(running).toHaveLength(1)
    // Nothing has looked at them since: the dead run's rows still say running.
    expect((await manualRuns()).map((run) => run.outcome)).toEqual(['running'])

    const after = await prices()
    const history = await todaysHistory()
    for (const gameId of succeeded) {
      const moved = byGame(after, gameId)
      expect(moved.length).toBeGreaterThanOrEqual(byGame(before, gameId).length)
      expect(moved.filter((row) => row.as_of === today).length).toBeGreaterThan(moved.length * 0.9)
      expect(moved.some((row) => row.change_24h !== null && row.change_24h !== 0)).toBe(true)
      // A day's point per printing with a market price (one never reported has none).
      expect(history.get(gameId)).toBe(moved.filter((row) => row.market_price !== null).length)
    }
    for (const gameId of gameIds.filter((id) => !succeeded.includes(id))) {
      expect(byGame(after, gameId)).toEqual(byGame(before, gameId))
      expect(history.get(gameId)).toBeUndefined()
    }
  }, 90_000)

  test('the next run completes the day, leaves the finished games as the first run wrote them, and records the killed run as interrupted', async () => {
    const afterKill = await prices()
    const finishedFirst = new Set((await runs()).filter((run) => run.status === 'succeeded').map((run) => run.game_id))
    const cutShort = (await runs()).find((run) => run.status === 'running')!

    const child = cli()
    const [code, stderr] = await Promise.all([child.exited, new Response(child.stderr).text()])
    expect({ code, stderr }).toEqual({ code: 0, stderr: '' })

    const after = await prices()
    const history = await todaysHistory()
    for (const gameId of gameIds) {
      const rows = byGame(after, gameId)
      expect(rows.filter((row) => row.as_of === today).length).toBeGreaterThan(rows.length * 0.9)
      expect(history.get(gameId)).toBe(rows.filter((row) => row.market_price !== null).length)
      // A re-run of the same day touches no row whose values it already wrote.
      if (finishedFirst.has(gameId)) expect(rows).toEqual(byGame(afterKill, gameId))
    }
    const [duplicates] = await selectRows<{ n: number }>(
      db,
      sql`select count(*)::int as n from (select 1 from price_history group by card_id, printing, date having count(*) > 1) d`,
    )
    expect(duplicates!.n).toBe(0)

    // The killed run and its game in progress are interrupted, not running (nor failed); the re-run succeeded.
    const [killed, rerun] = await manualRuns()
    expect(killed).toMatchObject({ outcome: 'interrupted', error: 'the process running it ended before it finished' })
    expect(rerun).toMatchObject({ outcome: 'succeeded', error: null })
    const gameSyncs = await runs()
    expect(gameSyncs.find((run) => run.id === cutShort.id)).toMatchObject({ status: 'interrupted', error: expect.stringContaining('its previous data stands') })
    expect(gameSyncs.filter((run) => run.status === 'running')).toEqual([])
  }, 120_000)
})
