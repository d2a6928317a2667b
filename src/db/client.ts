import { closeSync, existsSync, mkdirSync, openSync, readFileSync, renameSync, rmSync, unlinkSync, writeSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { type ExtractTablesWithRelations, is, type SQL, sql } from 'drizzle-orm'
import { type PgDatabase, PgDialect, type PgQueryResultHKT, type PgTransaction } from 'drizzle-orm/pg-core'
import { PostgresJsSession } from 'drizzle-orm/postgres-js/session'
import { systemClock } from '../shared/clock'
import * as schema from './schema'

export type Schema = typeof schema
/** Either driver's database: routes, services and repos never care which one it is. */
export type Database = PgDatabase<PgQueryResultHKT, Schema>
export type Transaction = PgTransaction<PgQueryResultHKT, Schema, ExtractTablesWithRelations<Schema>>
/** A repo function accepts the database or a transaction, so callers decide the unit of work. */
export type Executor = Database | Transaction

export interface DatabaseHandle {
  db: Database
  driver: 'postgres' | 'pglite'
  /** PGlite only: set when this opening created the data directory's cluster (in a child process). */
  created?: ClusterCreation
  /** PGlite only: a copy of the whole data directory. */
  dumpDataDir?: () => Promise<Blob>
  /**
   * Applies every pending migration in `drizzle/`. On PostgreSQL one process at a time (MIGRATION_LOCK);
   * `onWait` is called when another holds it, before waiting for it.
   */
  migrate(options?: { onWait?: () => void }): Promise<void>
  close(): Promise<void>
}

/** The rows of a raw SQL query, whichever driver runs it (postgres.js answers an array, PGlite `{ rows }`). */
export async function selectRows<T>(db: Executor, query: SQL): Promise<T[]> {
  const result = (await db.execute(query)) as unknown as T[] | { rows: T[] }
  return Array.isArray(result) ? result : result.rows
}

const MIGRATIONS_FOLDER = resolve(import.meta.dir, '../../drizzle')

/**
 * The session-level advisory lock migrations run under, `(7304, 1)`, apart from the game (7301),
 * leader (7302) and run (7303) locks: drizzle's migrator takes none, so two nodes starting at once
 * on a new schema would both create its tables and one would fail.
 */
export const MIGRATION_LOCK = { classId: 7304, objectId: 1 } as const
const MIGRATION_LOCK_RETRY_MS = 500

export interface PostgresOptions {
  max?: number
  /** How long opening a connection may take; postgres.js waits 30 s by default, which a request cannot. */
  connectTimeoutSeconds?: number
  /**
   * The server cancels any statement running longer (SQLSTATE 57014). Unset: no limit. Jobs reading
   * or writing the whole catalog lift it for their own work (`liftStatementTimeout`).
   */
  statementTimeoutSeconds?: number
}

/** PostgreSQL through postgres.js. */
export async function openPostgres(url: string, options: PostgresOptions = {}): Promise<DatabaseHandle> {
  const { default: postgres } = await import('postgres')
  const { drizzle } = await import('drizzle-orm/postgres-js')
  const { migrate } = await import('drizzle-orm/postgres-js/migrator')
  const { connectionGuard } = await import('./connection-guard')
  const connect = { onnotice: () => {}, ...(options.connectTimeoutSeconds !== undefined && { connect_timeout: options.connectTimeoutSeconds }) }
  // One host only: postgres.js walks a list of hosts itself, on sockets it opens itself.
  const guard = namesSeveralHosts(url) ? undefined : connectionGuard(systemClock)
  const client = postgres(url, {
    ...connect,
    max: options.max ?? 10,
    // docs/adr/0077-database-outage.md: the guard opens the connections and spaces the attempts
    // (postgres.js's own backoff, 3^failures / 100 s up to 20 s, held queued requests that long).
    ...(guard && ({ socket: guard.socket, backoff: guard.backoff } as object)),
    // A startup parameter: it is the session default, so SET LOCAL lifts it and RESET restores it.
    ...(options.statementTimeoutSeconds !== undefined && { connection: { statement_timeout: options.statementTimeoutSeconds * 1000 } }),
  })
  const db = drizzle(client, { schema })
  return {
    db,
    driver: 'postgres',
    // On a connection of its own without the statement timeout: a migration building an index on
    // a large table may take minutes, and drizzle's migrator leaves no way to SET LOCAL in its transaction.
    // One connection kept for the whole run (no idle or lifetime recycling), or the lock would go with it.
    async migrate(options = {}) {
      const migrator = postgres(url, { ...connect, max: 1, idle_timeout: 0, max_lifetime: null })
      try {
        // Tried every half second rather than waited on: a backend blocked in a lock wait outlives a
        // process stopped meanwhile (it reads no socket), and would take the lock for nobody.
        for (let tries = 0; ; tries++) {
          const [lock] = await migrator`select pg_try_advisory_lock(${MIGRATION_LOCK.classId}, ${MIGRATION_LOCK.objectId}) as taken`
          if (lock?.taken) break
          if (tries === 0) options.onWait?.()
          await systemClock.sleep(MIGRATION_LOCK_RETRY_MS)
        }
        // The second process finds the first one's migrations recorded and applies none.
        await migrate(drizzle(migrator, { schema }), { migrationsFolder: MIGRATIONS_FOLDER })
        await migrator`select pg_advisory_unlock(${MIGRATION_LOCK.classId}, ${MIGRATION_LOCK.objectId})`
      } finally {
        await migrator.end({ timeout: 5 })
      }
    },
    close: () => client.end({ timeout: 5 }),
  }
}

/** Whether the URL names several hosts, read as postgres.js reads it (`postgres://u@a:1,b:2/db`). */
function namesSeveralHosts(url: string): boolean {
  const authority = url.slice(url.indexOf('://') + 3).split(/[?/]/)[0]!
  return authority.slice(authority.indexOf('@') + 1).includes(',')
}

/**
 * Lifts the statement timeout for the rest of the transaction: for jobs (a sync, a snapshot build)
 * whose statements read or write the whole catalog and may rightly run longer than a request's.
 */
export async function liftStatementTimeout(tx: Transaction): Promise<void> {
  await tx.execute(sql`set local statement_timeout = 0`)
}

/**
 * Runs statements that cannot run in a transaction (VACUUM), so cannot use `liftStatementTimeout`,
 * without the statement timeout: on one reserved postgres.js connection whose timeout is restored
 * before it goes back to the pool. PGlite has no timeout and runs them as they are.
 */
export async function runWithoutStatementTimeout(db: Database, statements: SQL[]): Promise<void> {
  const session = db._.session
  if (!is(session, PostgresJsSession)) {
    for (const statement of statements) await db.execute(statement)
    return
  }
  const reserved = await session.client.reserve()
  try {
    await reserved.unsafe('set statement_timeout = 0')
    for (const statement of statements) {
      const query = new PgDialect().sqlToQuery(statement)
      await reserved.unsafe(query.sql, query.params as never[])
    }
  } finally {
    await reserved.unsafe('reset statement_timeout').catch(() => {})
    reserved.release()
  }
}

/**
 * Embedded PostgreSQL (PGlite). Without `dataDir` it lives in memory, optionally starting from a
 * `dumpDataDir()` copy (tests clone seeded templates this way). A directory is locked
 * exclusively, because two PGlite processes on one directory silently corrupt it. A directory
 * without a cluster gets one from a short-lived child process first (`initializeCluster`).
 */
export async function openPglite(options: { dataDir?: string; loadDataDir?: Blob } = {}): Promise<DatabaseHandle> {
  const { dataDir, loadDataDir } = options
  const { PGlite } = await import('@electric-sql/pglite')
  const { pg_trgm } = await import('@electric-sql/pglite/contrib/pg_trgm')
  const { drizzle } = await import('drizzle-orm/pglite')
  const { migrate } = await import('drizzle-orm/pglite/migrator')
  let releaseLock = () => {}
  let pgDir: string | undefined
  if (dataDir !== undefined) {
    mkdirSync(dataDir, { recursive: true })
    releaseLock = lockDirectory(dataDir)
    pgDir = join(dataDir, 'pg')
  }
  try {
    const created = pgDir !== undefined && !existsSync(join(pgDir, 'PG_VERSION')) ? await initializeCluster(pgDir) : undefined
    const client = await PGlite.create({ dataDir: pgDir, loadDataDir, extensions: { pg_trgm } })
    const db = drizzle(client, { schema })
    return {
      db,
      driver: 'pglite',
      created,
      dumpDataDir: () => client.dumpDataDir('none'),
      migrate: () => migrate(db, { migrationsFolder: MIGRATIONS_FOLDER }),
      close: async () => {
        await client.close()
        releaseLock()
      },
    }
  } catch (error) {
    releaseLock()
    throw error
  }
}

/** The child process that created an embedded cluster: its peak RSS (VmHWM) and how long it took. */
export interface ClusterCreation {
  peakRssBytes: number
  ms: number
}

const INIT_SCRIPT = resolve(import.meta.dir, 'pglite-init.ts')

/**
 * Creates the cluster of `pgDir` in a child process (src/db/pglite-init.ts) and waits for it: initdb
 * peaks near 1 GB and leaves about 400 MB this process could never give back. The child writes
 * into a sibling directory renamed into place once complete, so a start killed meanwhile leaves no
 * half-made cluster. Returns the child's peak RSS. The caller holds the directory's lock.
 */
async function initializeCluster(pgDir: string): Promise<ClusterCreation> {
  const started = systemClock.monotonic()
  const building = `${pgDir}.init`
  rmSync(building, { recursive: true, force: true })
  const child = Bun.spawn([process.execPath, INIT_SCRIPT, building], { stdin: 'ignore', stdout: 'ignore', stderr: 'pipe' })
  // A start stopped meanwhile (a signal, docs/adr/0126-running-behind-a-load-balancer-and-an-orchestrator.md) takes the child with it.
  const killChild = () => child.kill('SIGKILL')
  process.on('exit', killChild)
  const [code, stderr] = await Promise.all([child.exited, new Response(child.stderr).text()]).finally(() => process.off('exit', killChild))
  if (code !== 0 || !existsSync(join(building, 'PG_VERSION'))) {
    rmSync(building, { recursive: true, force: true })
    const how = child.signalCode ? `was killed by ${child.signalCode}` : code !== 0 ? `exited with code ${code}` : 'exited without creating it'
    throw new Error(`could not create the embedded database in ${pgDir}: the process creating it (src/db/pglite-init.ts) ${how}${childError(stderr)}`)
  }
  // Without PG_VERSION, what is there is an interrupted earlier attempt, not a database.
  rmSync(pgDir, { recursive: true, force: true })
  renameSync(building, pgDir)
  return { peakRssBytes: child.resourceUsage()?.maxRSS ?? 0, ms: systemClock.monotonic() - started }
}

/** A failed child's stderr without Bun's excerpts of the source (a line of minified PGlite is kilobytes long). */
function childError(stderr: string): string {
  const lines = stderr.split('\n').filter((line) => line.trim() !== '' && !/^\s*\d+ \| /.test(line))
  return lines.length === 0 ? '' : `: ${lines.join('\n').slice(-2000)}`
}

export class DataDirLockedError extends Error {
  override name = 'DataDirLockedError'
}

/** Lock files this process holds: our own pid in a lock file is ours only if it is listed here. */
const heldLocks = new Set<string>()

/**
 * Takes `<dir>/pglite.lock` (holding our pid) or throws DataDirLockedError naming the holder.
 * A lock left by a dead process is taken over, including one with our own pid that this process
 * never took (a restarted container's server is pid 1 again). Returns the release function.
 */
export function lockDirectory(dir: string): () => void {
  const lockPath = resolve(dir, 'pglite.lock')
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(lockPath, 'wx')
      writeSync(fd, String(process.pid))
      closeSync(fd)
      heldLocks.add(lockPath)
      const release = () => {
        process.off('exit', release)
        heldLocks.delete(lockPath)
        try {
          if (readFileSync(lockPath, 'utf8') === String(process.pid)) unlinkSync(lockPath)
        } catch {
          // Already gone: nothing to release.
        }
      }
      process.on('exit', release)
      return release
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
      const holder = Number.parseInt(readFileSync(lockPath, 'utf8'), 10)
      const ours = holder === process.pid
      if (Number.isInteger(holder) && (ours ? heldLocks.has(lockPath) : isAlive(holder))) {
        throw new DataDirLockedError(
          `The embedded database in ${resolve(dir)} is in use by process ${holder}. ` +
            'Stop that process first (PGlite cannot share a data directory), or set DATA_DIR to another directory.',
        )
      }
      unlinkSync(lockPath)
    }
  }
  throw new DataDirLockedError(`Could not lock ${resolve(dir)}: another process keeps taking it`)
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM'
  }
}

/**
 * The configured database: PostgreSQL when a URL is given, embedded PGlite under `dataDir` otherwise
 * (in process: nothing to time out). Without `databaseStatementTimeoutSeconds`, statements run unbounded.
 */
export function openDatabase(options: {
  databaseUrl: string | undefined
  dataDir: string
  databaseConnectTimeoutSeconds: number
  databaseStatementTimeoutSeconds: number | undefined
}): Promise<DatabaseHandle> {
  return options.databaseUrl
    ? openPostgres(options.databaseUrl, {
        connectTimeoutSeconds: options.databaseConnectTimeoutSeconds,
        statementTimeoutSeconds: options.databaseStatementTimeoutSeconds,
      })
    : openPglite({ dataDir: options.dataDir })
}
