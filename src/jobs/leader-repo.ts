import { sql } from 'drizzle-orm'
import type { Sql } from 'postgres'
import { type Database, selectRows } from '../db/client'
import { type Clock, withTimeout } from '../shared/clock'

/**
 * The advisory lock the leader holds, a two-key lock apart from the per-game sync locks
 * `(7301, gameId)` (advisory keys share one space whether taken per session or per transaction).
 */
export const LEADER_LOCK = { classId: 7302, objectId: 1 } as const

/** How long one lock or liveness statement may take before the connection counts as dead. */
const STATEMENT_TIMEOUT_MS = 5_000

/**
 * One session that can hold the leader lock. PostgreSQL releases a session-level advisory lock
 * when its session ends, so a leader that dies (or loses its connection) never keeps the lock.
 */
export interface LockSession {
  /** Takes the lock if nobody holds it; true when it is held through this lock session now. */
  tryLock(): Promise<boolean>
  /** Whether the lock is still held through this lock session: false once its connection was lost (a reconnect is a new session). */
  holdsLock(): Promise<boolean>
  /** Ends the session, which releases the lock. */
  close(): Promise<void>
}

const holdsLockQuery = (backendPid: string) => `
  select exists (
    select 1 from pg_locks
    where locktype = 'advisory' and database = (select oid from pg_database where datname = current_database())
      and classid = ${LEADER_LOCK.classId} and objid = ${LEADER_LOCK.objectId}
      and objsubid = 2 and granted and pid = ${backendPid}
  ) as held`

/**
 * PostgreSQL: a dedicated one-connection client, apart from the pool, so the lock's session lives
 * exactly as long as that connection. postgres.js would silently reopen a lost connection as a
 * new session without the lock; `holdsLock` asks pg_locks, so that is noticed.
 */
export async function postgresLockSession(url: string, options: { connectTimeoutSeconds: number; clock: Clock }): Promise<LockSession> {
  const { default: postgres } = await import('postgres')
  const client: Sql = postgres(url, {
    max: 1,
    onnotice: () => {},
    connect_timeout: options.connectTimeoutSeconds,
    // Never recycled: postgres.js would otherwise end the connection after 30 to 60 minutes, and the lock with it.
    max_lifetime: null,
    idle_timeout: 0,
    keep_alive: 10,
    connection: { statement_timeout: STATEMENT_TIMEOUT_MS, application_name: 'tcg-price-api leader' },
  })
  let backendPid: number | undefined
  return {
    async tryLock() {
      const [row] = await client<{ locked: boolean; pid: number }[]>`
        select pg_try_advisory_lock(${LEADER_LOCK.classId}::int, ${LEADER_LOCK.objectId}::int) as locked, pg_backend_pid() as pid`
      backendPid = row!.pid
      return row!.locked
    },
    async holdsLock() {
      if (backendPid === undefined) return false
      // The pid of the session that took the lock, not pg_backend_pid(): a reconnected client has a new one.
      const [row] = await client.unsafe<{ held: boolean }[]>(holdsLockQuery(String(backendPid)))
      return row!.held
    },
    async close() {
      // Unlocked before the session ends: the server would release it too, but only once its
      // backend has noticed the closed connection, and the next leader should not wait for that.
      if (backendPid !== undefined) {
        // Bounded like every lock statement: a stop must not wait on a connection that died.
        await statementBound(options.clock, client`select pg_advisory_unlock(${LEADER_LOCK.classId}::int, ${LEADER_LOCK.objectId}::int)`).catch(() => {})
      }
      await client.end({ timeout: 2 })
    },
  }
}

/**
 * Embedded PGlite: one process owns the data directory (it is locked), so this node is the only
 * one; the lock is still taken on its one connection so the same code path runs.
 */
export function pgliteLockSession(db: Database): LockSession {
  return {
    async tryLock() {
      const [row] = await selectRows<{ locked: boolean }>(db, sql`select pg_try_advisory_lock(${LEADER_LOCK.classId}::int, ${LEADER_LOCK.objectId}::int) as locked`)
      return row!.locked
    },
    async holdsLock() {
      const [row] = await selectRows<{ held: boolean }>(db, sql.raw(holdsLockQuery('pg_backend_pid()')))
      return row!.held
    },
    async close() {
      await db.execute(sql`select pg_advisory_unlock(${LEADER_LOCK.classId}::int, ${LEADER_LOCK.objectId}::int)`).catch(() => {})
    },
  }
}

/** A lock statement that does not answer within the bound counts as a dead connection. */
export function statementBound<T>(clock: Clock, promise: Promise<T>): Promise<T> {
  return withTimeout(clock, promise, STATEMENT_TIMEOUT_MS, () => new Error(`no answer from the database within ${STATEMENT_TIMEOUT_MS} ms`))
}
