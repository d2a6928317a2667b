import { afterEach, describe, expect, test } from 'bun:test'
import { sql } from 'drizzle-orm'
import { freshDatabase, selectRows, testLogger } from '../../test/helpers/db'
import { TEST_DATABASE_URL } from '../../test/helpers/env'
import { LEADER_LOCK, type LeaderElection, leaderElection, pgliteLockSession, postgresLockSession } from './leader'

const database = await freshDatabase('empty')
const RETRY_MS = 200

const elections: LeaderElection[] = []
// Stopped together: each stop may wait out its lock session's statement bound.
afterEach(async () => {
  await Promise.all(elections.splice(0).map((election) => election.stop()))
})

function candidate(events: string[] = []) {
  const election = leaderElection({
    openSession: () =>
      database.url ? postgresLockSession(database.url, { connectTimeoutSeconds: 3 }) : Promise.resolve(pgliteLockSession(database.db)),
    retryMs: RETRY_MS,
    logger: testLogger,
    onLead: () => events.push('lead'),
    onLoseLead: () => events.push('lost'),
  })
  elections.push(election)
  return election
}

async function until(condition: () => boolean, timeoutMs: number) {
  const started = Date.now()
  while (!condition()) {
    if (Date.now() - started > timeoutMs) throw new Error(`not true within ${timeoutMs} ms`)
    await Bun.sleep(10)
  }
  return Date.now() - started
}

/** The backends holding the leader lock, from PostgreSQL's own lock table. */
const lockHolders = async () =>
  selectRows<{ pid: number }>(
    database.db,
    sql`select pid from pg_locks where locktype = 'advisory' and database = (select oid from pg_database where datname = current_database()) and classid = ${LEADER_LOCK.classId} and objid = ${LEADER_LOCK.objectId} and granted`,
  )

describe('leadership through a session-level advisory lock', () => {
  test('a lone candidate leads at once, and stopping releases the lock', async () => {
    const events: string[] = []
    const node = candidate(events)
    node.start()
    await until(() => node.isLeader(), 2_000)
    expect(events).toEqual(['lead'])
    expect(await lockHolders()).toHaveLength(1)
    await node.stop()
    expect(node.isLeader()).toBe(false)
    expect(await lockHolders()).toHaveLength(0)
  })

  // Two candidates need two sessions: PostgreSQL only (embedded mode is one process, one session).
  test.skipIf(!TEST_DATABASE_URL)('of two candidates exactly one leads; when it stops the other takes over within the retry interval', async () => {
    const [a, b] = [candidate(), candidate()]
    a.start()
    await until(() => a.isLeader(), 2_000)
    b.start()
    await Bun.sleep(RETRY_MS * 4)
    expect([a.isLeader(), b.isLeader()]).toEqual([true, false])
    expect(await lockHolders()).toHaveLength(1)
    await a.stop()
    const waited = await until(() => b.isLeader(), RETRY_MS * 5)
    expect(waited).toBeLessThan(RETRY_MS * 3)
    expect(await lockHolders()).toHaveLength(1)
  })

  test.skipIf(!TEST_DATABASE_URL)('a leader whose connection dies stops leading, and the other candidate takes over', async () => {
    const aEvents: string[] = []
    const [a, b] = [candidate(aEvents), candidate()]
    a.start()
    await until(() => a.isLeader(), 2_000)
    b.start()
    await Bun.sleep(RETRY_MS * 2)
    const [holder] = await lockHolders()
    // The server ends the leader's session, as when its connection is cut: the lock goes with it.
    await database.db.execute(sql`select pg_terminate_backend(${holder!.pid})`)
    await until(() => !a.isLeader(), RETRY_MS * 10)
    expect(aEvents).toEqual(['lead', 'lost'])
    await until(() => b.isLeader(), RETRY_MS * 10)
    await Bun.sleep(RETRY_MS * 3)
    // The old leader competes again on a fresh session, but the lock is taken: still exactly one.
    expect([a.isLeader(), b.isLeader()]).toEqual([false, true])
    const holders = await lockHolders()
    expect(holders).toHaveLength(1)
    expect(holders[0]!.pid).not.toBe(holder!.pid)
  })
})
