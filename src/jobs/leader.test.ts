import { afterEach, describe, expect, test } from 'bun:test'
import { sql } from 'drizzle-orm'
import { fakeClock } from '../../test/helpers/clock'
import { freshDatabase, selectRows, testLogger } from '../../test/helpers/db'
import { TEST_DATABASE_URL } from '../../test/helpers/env'
import { eventually } from '../../test/helpers/eventually'
import { systemClock } from '../shared/clock'
import { type LeaderElection, leaderElection } from './leader'
import { LEADER_LOCK, pgliteLockSession, postgresLockSession } from './leader-repo'

const database = await freshDatabase('empty')
const RETRY_MS = 200

const elections: LeaderElection[] = []
// Stopped together: each stop closes a real lock session (unlock, then end), slow on a loaded machine.
afterEach(async () => {
  await Promise.all(elections.splice(0).map((election) => election.stop()))
}, 30_000)

/**
 * A candidate on its own fake clock: its retries happen only when the test moves that clock. Its
 * lock sessions are real; `tries` records each lock attempt's answer.
 */
function candidate() {
  const clock = fakeClock()
  const events: string[] = []
  const tries: boolean[] = []
  let running = 0
  const track = <T>(call: Promise<T>) => {
    running++
    return call.finally(() => running--)
  }
  const election = leaderElection({
    openSession: async () => {
      // The session's own statement bound guards a real socket, so it runs on real time.
      const session = database.url ? await postgresLockSession(database.url, { connectTimeoutSeconds: 3, clock: systemClock }) : pgliteLockSession(database.db)
      return {
        tryLock: () => track(session.tryLock().then((locked) => (tries.push(locked), locked))),
        holdsLock: () => track(session.holdsLock()),
        close: () => track(session.close()),
      }
    },
    retryMs: RETRY_MS,
    clock,
    logger: testLogger,
    onLead: () => events.push('lead'),
    onLoseLead: () => events.push('lost'),
  })
  elections.push(election)
  /**
   * Resolves once no lock statement runs and the election waits on its one retry timer. Closing a
   * session whose connection died waits out its real 5 s statement bound and 2 s end: hence 30 s.
   */
  const settled = () => eventually(() => running === 0 && clock.pending() === 1, { timeout: 30_000, what: 'the election waiting for its next retry' })
  return {
    election,
    clock,
    events,
    tries,
    settled,
    /** Moves this candidate through one retry interval and waits until that retry is done. */
    async retry() {
      await settled()
      await clock.advance(RETRY_MS)
      await settled()
    },
  }
}

/** The backends holding the leader lock, from PostgreSQL's own lock table. */
const lockHolders = async () =>
  selectRows<{ pid: number }>(
    database.db,
    sql`select pid from pg_locks where locktype = 'advisory' and database = (select oid from pg_database where datname = current_database()) and classid = ${LEADER_LOCK.classId} and objid = ${LEADER_LOCK.objectId} and granted`,
  )

describe('leadership through a session-level advisory lock', () => {
  test('a lone candidate leads at once, and stopping releases the lock', async () => {
    const node = candidate()
    node.election.start()
    // Its clock never moves: the first attempt, made on start, is the one that leads.
    await eventually(() => node.election.isLeader(), { what: 'the candidate leading' })
    expect(node.events).toEqual(['lead'])
    expect(node.tries).toEqual([true])
    expect(await lockHolders()).toHaveLength(1)
    await node.election.stop()
    expect(node.election.isLeader()).toBe(false)
    expect(await lockHolders()).toHaveLength(0)
  })

  // Two candidates need two sessions: PostgreSQL only (embedded mode is one process, one session).
  test.skipIf(!TEST_DATABASE_URL)('of two candidates exactly one leads; when it stops the other takes over at its next retry', async () => {
    const [a, b] = [candidate(), candidate()]
    a.election.start()
    await eventually(() => a.election.isLeader(), { what: 'a leading' })
    b.election.start()
    await b.settled()
    // b's attempt on start and three retries all find the lock taken.
    for (let i = 0; i < 3; i++) await b.retry()
    expect(b.tries).toEqual([false, false, false, false])
    expect([a.election.isLeader(), b.election.isLeader()]).toEqual([true, false])
    expect(await lockHolders()).toHaveLength(1)

    await a.election.stop()
    // Nothing happens before b's retry falls due; the retry itself takes the lock.
    await b.clock.advance(RETRY_MS - 1)
    expect(b.tries).toHaveLength(4)
    await b.clock.advance(1)
    await b.settled()
    expect(b.tries.at(-1)).toBe(true)
    expect(b.election.isLeader()).toBe(true)
    expect(await lockHolders()).toHaveLength(1)
  })

  test.skipIf(!TEST_DATABASE_URL)(
    'a leader whose connection dies stops leading at its next check, and the other candidate takes over',
    async () => {
      const [a, b] = [candidate(), candidate()]
      a.election.start()
      await eventually(() => a.election.isLeader(), { what: 'a leading' })
      b.election.start()
      await b.settled()
      expect(b.tries).toEqual([false])
      const [holder] = await lockHolders()
      // The server ends the leader's session, as when its connection is cut: the lock goes with it.
      await database.db.execute(sql`select pg_terminate_backend(${holder!.pid})`)
      await eventually(async () => (await lockHolders()).length === 0, { what: 'the ended session releasing the lock' })
      expect(a.election.isLeader()).toBe(true)

      await a.retry()
      expect(a.election.isLeader()).toBe(false)
      expect(a.events).toEqual(['lead', 'lost'])
      await b.retry()
      expect(b.election.isLeader()).toBe(true)

      // The old leader competes again on a fresh session, but the lock is taken: still exactly one.
      await a.retry()
      expect(a.tries).toEqual([true, false])
      expect([a.election.isLeader(), b.election.isLeader()]).toEqual([false, true])
      const holders = await lockHolders()
      expect(holders).toHaveLength(1)
      expect(holders[0]!.pid).not.toBe(holder!.pid)
    },
    60_000,
  )
})
