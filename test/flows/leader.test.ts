import { describe, expect, test } from 'bun:test'
import { sql } from 'drizzle-orm'
import { LEADER_LOCK } from '../../src/jobs/leader-repo'
import { systemClock } from '../../src/shared/clock'
import { testRedisPrefix } from '../helpers/auth'
import { freshDatabase, selectRows } from '../helpers/db'
import { TEST_DATABASE_URL, TEST_REDIS_URL } from '../helpers/env'
import { eventually } from '../helpers/eventually'
import { type Listening, serverProcesses } from '../helpers/process'

/** Whether a node says, on /ready, that it leads the scheduled jobs. */
const leads = async (node: Listening) => ((await (await fetch(`${node.url}/ready`)).json()) as any).jobs.leader as boolean

// Two real server processes on one PostgreSQL database. Embedded mode cannot have two nodes (one
// process owns the data directory), so this runs on PostgreSQL only.
describe.skipIf(!TEST_DATABASE_URL)('two server processes on one database', async () => {
  // Registered before the database's own clean-up, so the servers are gone before it is dropped.
  const servers = serverProcesses()
  const database = await freshDatabase('seeded')
  // Every game last synced eight days ago, whatever today is: each tier's latest run was missed.
  await database.db.execute(sql`update games set last_synced_at = now() - interval '8 days'`)
  const env = {
    PATH: process.env.PATH ?? '',
    DATABASE_URL: database.url,
    ...(TEST_REDIS_URL && { REDIS_URL: TEST_REDIS_URL, REDIS_KEY_PREFIX: testRedisPrefix() }),
    PORT: '0',
    HOST: '127.0.0.1',
    DEMO_SCALE: 'tiny',
    LEADER_RETRY_SECONDS: '1',
    // The syncs are what is counted: an every-minute re-crawl starting when a minute turns inside
    // a test would add a run that stays 'running' for its paced minute.
    CONDITION_RECRAWL_PER_MINUTE: '0',
    LOG_LEVEL: 'warn',
  }

  const runs = () =>
    selectRows<{ job: string; outcome: string; n: number }>(database.db, sql`select job, outcome, count(*)::int as n from job_runs group by job, outcome order by job, outcome`)
  /** What a timeout reports: the runs, who holds advisory locks and what each session is doing. */
  const databaseState = async () =>
    JSON.stringify({
      runs: await selectRows(database.db, sql`select job, outcome, games, error, started_at, finished_at from job_runs order by id`),
      advisoryLocks: await selectRows(database.db, sql`select pid, classid, objid, granted from pg_locks where locktype = 'advisory'`),
      sessions: await selectRows(
        database.db,
        sql`select pid, application_name, state, wait_event, left(query, 200) as query from pg_stat_activity where datname = current_database()`,
      ),
    })
  /** `eventually`, whose failure also reports the database's state. */
  const awaitFact = <T>(check: () => Promise<T>, timeout: number, what: string) =>
    eventually(check, { timeout, interval: 100, what }).catch(async (error: Error) => {
      error.message += `; database: ${await databaseState()}`
      throw error
    })
  /** The database's current instant, the yardstick for its sessions' `query_start`. */
  const databaseNow = async () => (await selectRows<{ now: string }>(database.db, sql`select now()::text as now`))[0]!.now
  /**
   * Resolves once `count` nodes' leader lock sessions have each run a lock statement (an attempt
   * or a renewal check, one per retry interval) that started `seconds` or more after `since`.
   */
  const leaderChecksAfter = (since: string, seconds: number, count: number) =>
    awaitFact(
      async () => {
        const [row] = await selectRows<{ n: number }>(
          database.db,
          sql`select count(*)::int as n from pg_stat_activity where datname = current_database()
              and application_name = 'tcg-price-api leader' and query_start >= ${since}::timestamptz + make_interval(secs => ${seconds})`,
        )
        return row!.n >= count
      },
      20_000,
      `${count} leader checks ${seconds} s after ${since}`,
    )
  // `listening` is logged at info; the servers run at warn otherwise.
  const start = () => servers.start({ ...env, LOG_LEVEL: 'info' })

  test('exactly one leads; the missed syncs run once, not again when the second node starts', async () => {
    const startedAt = systemClock.now()
    const [a, b] = [await start(), await start()]
    await awaitFact(async () => (await leads(a)) || (await leads(b)), 30_000, 'a node leading')
    // Both nodes try or check the lock again after one is seen leading: still exactly one.
    await leaderChecksAfter(await databaseNow(), 0, 2)
    expect([await leads(a), await leads(b)].filter(Boolean)).toHaveLength(1)
    await awaitFact(
      async () => {
        const rows = await runs()
        return rows.length >= 2 && rows.every((row) => row.outcome !== 'running')
      },
      60_000,
      'both missed syncs finished',
    )
    // A full retry interval after the runs finished, both nodes are still checking the lock: time
    // for a second run to have started, had one been queued.
    await leaderChecksAfter(await databaseNow(), 1, 2)
    expect([await leads(a), await leads(b)].filter(Boolean)).toHaveLength(1)
    // The demo marketplace has games in tiers 3 and 2 only.
    expect(await runs()).toEqual([
      { job: 'sync-tier-2', outcome: 'succeeded', n: 1 },
      { job: 'sync-tier-3', outcome: 'succeeded', n: 1 },
    ])
    const [behind] = await selectRows<{ n: number }>(database.db, sql`select count(*)::int as n from games where last_synced_at < now() - interval '1 hour'`)
    expect(behind!.n).toBe(0)
    const ready = (await (await fetch(`${a.url}/ready`)).json()) as any
    // Synced by this run, not left at the seed's eight days ago.
    expect(Date.parse(ready.jobs.last_sync.tier_3)).toBeGreaterThanOrEqual(startedAt.getTime())
  }, 120_000)

  test('kill -9 the leader: the other node leads within 30 s and runs nothing twice', async () => {
    const leader = (await leads(servers.nodes[0]!)) ? servers.nodes[0]! : servers.nodes[1]!
    const follower = leader === servers.nodes[0] ? servers.nodes[1]! : servers.nodes[0]!
    expect(await leads(follower)).toBe(false)
    leader.child.kill('SIGKILL')
    await leader.child.exited
    const killedAt = systemClock.monotonic()
    // PostgreSQL ends the dead node's session and its lock at once; the follower retries every second.
    await awaitFact(() => leads(follower), 30_000, 'the follower leading')
    console.error(`[leader] takeover after kill -9: ${Math.round(systemClock.monotonic() - killedAt)} ms`)
    // The new leader's catch-up starts as it leads; a renewal check a full retry interval later
    // shows it still leads, with time for a catch-up sync to have started had one been due.
    await leaderChecksAfter(await databaseNow(), 1, 1)
    expect(await leads(follower)).toBe(true)
    expect(await runs()).toEqual([
      { job: 'sync-tier-2', outcome: 'succeeded', n: 1 },
      { job: 'sync-tier-3', outcome: 'succeeded', n: 1 },
    ])

    // A graceful stop releases the lock (with its session): nobody holds it afterwards.
    follower.child.kill('SIGTERM')
    expect(await follower.child.exited).toBe(0)
    const [held] = await selectRows<{ n: number }>(
      database.db,
      sql`select count(*)::int as n from pg_locks where locktype = 'advisory' and database = (select oid from pg_database where datname = current_database()) and classid = ${LEADER_LOCK.classId} and objid = ${LEADER_LOCK.objectId}`,
    )
    expect(held!.n).toBe(0)
  }, 90_000)
})

// The every-minute condition re-crawl spreads its refreshes over its minute, so a node is caught
// mid-run by waiting for the next minute to turn. A leader killed mid-run leaves it to the next
// leader, which records it interrupted; a leader stopped cleanly records its own run interrupted.
// Neither is a failure.
describe.skipIf(!TEST_DATABASE_URL)('runs cut short by a kill or a stop', async () => {
  const servers = serverProcesses()
  const database = await freshDatabase('seeded')
  const env = {
    PATH: process.env.PATH ?? '',
    DATABASE_URL: database.url,
    ...(TEST_REDIS_URL && { REDIS_URL: TEST_REDIS_URL, REDIS_KEY_PREFIX: testRedisPrefix() }),
    PORT: '0',
    HOST: '127.0.0.1',
    DEMO_SCALE: 'tiny',
    LEADER_RETRY_SECONDS: '1',
    CONDITION_RECRAWL_PER_MINUTE: '30',
    LOG_LEVEL: 'info',
  }
  const start = () => servers.start(env)
  const recrawls = () =>
    selectRows<{ id: number; outcome: string; error: string | null }>(database.db, sql`select id, outcome, error from job_runs where job = 'condition-recrawl' order by id`)
  /** The re-crawl run under way that is not one of `known`: the minute's run of the node leading now. */
  const recrawlUnderWay = (known: number[]) =>
    eventually(async () => (await recrawls()).find((run) => run.outcome === 'running' && !known.includes(run.id)), {
      timeout: 90_000,
      interval: 200,
      what: 'a re-crawl run under way (one starts when the minute turns)',
    })

  test('kill -9 mid-run: the next leader records the run interrupted; SIGTERM mid-run: the stopping node does', async () => {
    const [a, b] = [await start(), await start()]
    await eventually(async () => (await leads(a)) !== (await leads(b)), { timeout: 30_000, what: 'one node leading' })
    const [leader, follower] = (await leads(a)) ? [a, b] : [b, a]

    const killedRun = await recrawlUnderWay([])
    leader.child.kill('SIGKILL')
    await leader.child.exited
    await eventually(() => leads(follower), { timeout: 30_000, what: 'the follower leading' })
    // At its start, or at its first re-crawl's if the dead node's last connection outlived its lead.
    await eventually(async () => (await recrawls()).find((run) => run.id === killedRun.id && run.outcome !== 'running'), {
      timeout: 90_000,
      what: "the new leader judging the dead leader's run",
    })
    expect((await recrawls()).find((run) => run.id === killedRun.id)).toEqual({
      id: killedRun.id,
      outcome: 'interrupted',
      error: 'the process running it ended before it finished',
    })

    const stoppedRun = await recrawlUnderWay([killedRun.id])
    follower.child.kill('SIGTERM')
    expect(await follower.child.exited).toBe(0)
    expect((await recrawls()).find((run) => run.id === stoppedRun.id)).toEqual({
      id: stoppedRun.id,
      outcome: 'interrupted',
      error: 'the node stopped before the run finished',
    })
    expect((await recrawls()).filter((run) => run.outcome === 'failed')).toEqual([])
  }, 240_000)
})
