import { afterAll, describe, expect, test } from 'bun:test'
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { sql } from 'drizzle-orm'
import { TEST_DATABASE_URL } from '../../test/helpers/env'
import { eventually } from '../../test/helpers/eventually'
import { freePort } from '../../test/helpers/redis-server'
import { systemClock } from '../shared/clock'
import { isDatabaseUnavailable } from '../shared/unavailable'
import { type DatabaseHandle, openPostgres } from './client'

// A private PostgreSQL cluster of this test's own (initdb in a temporary directory), because what
// is tested here is done to a whole server: a shutdown that waits for its sessions (new ones get
// 57P03 "the database system is shutting down") and a crashed backend (every other session ends:
// 57P02 arrives as a warning, then the connection closes; then crash recovery). Needs Debian's
// PostgreSQL server binaries; as root they run as the `postgres` user, which PostgreSQL requires.
const BIN = existsSync('/usr/lib/postgresql')
  ? readdirSync('/usr/lib/postgresql')
      .map((version) => `/usr/lib/postgresql/${version}/bin`)
      .find((dir) => existsSync(`${dir}/initdb`))
  : undefined
const AS_ROOT = process.getuid?.() === 0
/** As root, the `postgres` user's id (PostgreSQL refuses to run as root); undefined without one. */
const POSTGRES_UID = AS_ROOT ? Number(Bun.spawnSync(['id', '-u', 'postgres']).stdout.toString().trim()) || undefined : undefined
const AS_POSTGRES = AS_ROOT ? ['runuser', '-u', 'postgres', '--'] : []

/** Ten times the 1 s connect timeout below, for a loaded machine; a lost refusal hangs for good. */
const CUT_SHORT_MS = 10_000

const runnable = Boolean(TEST_DATABASE_URL && BIN && (!AS_ROOT || POSTGRES_UID))

describe.skipIf(!runnable)('a whole PostgreSQL server stopping or crashing', async () => {
  // The body runs even when skipped: nothing is made then.
  const dir = runnable ? mkdtempSync(join(tmpdir(), 'tcg-pg-')) : ''
  if (POSTGRES_UID && dir) chownSync(dir, POSTGRES_UID, -1)
  const data = join(dir, 'data')
  const port = runnable ? await freePort() : 0
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`
  const { default: postgres } = await import('postgres')
  const handles: DatabaseHandle[] = []
  let server: ReturnType<typeof Bun.spawn> | undefined

  const run = (args: string[]) => {
    const done = Bun.spawnSync([...AS_POSTGRES, ...args], { stdout: 'ignore', stderr: 'pipe' })
    if (done.exitCode !== 0) throw new Error(`${args[0]} failed: ${done.stderr.toString()}`)
  }
  const postmasterPid = () => Number(readFileSync(join(data, 'postmaster.pid'), 'utf8').split('\n')[0])
  async function start() {
    server = Bun.spawn([...AS_POSTGRES, `${BIN}/postgres`, '-D', data, '-p', String(port), '-k', dir, '-c', 'listen_addresses=127.0.0.1', '-c', 'fsync=off'], {
      stdout: 'ignore',
      stderr: 'ignore',
    })
    await eventually(
      async () => {
        const probe = postgres(url, { max: 1, connect_timeout: 1, onnotice: () => {} })
        try {
          return (await probe`select 1`).length === 1
        } finally {
          await probe.end({ timeout: 1 })
        }
      },
      { timeout: 20_000, what: 'the private PostgreSQL answering' },
    )
  }

  afterAll(async () => {
    for (const handle of handles) await handle.close()
    // SIGQUIT: immediate shutdown, then the directory goes.
    if (server && server.exitCode === null) {
      process.kill(postmasterPid(), 'SIGQUIT')
      await server.exited
    }
    if (dir) rmSync(dir, { recursive: true, force: true })
  }, 30_000)

  if (runnable) {
    run([`${BIN}/initdb`, '-D', data, '-A', 'trust', '-U', 'postgres', '--no-sync'])
    await start()
  }

  const failure = async (run: () => Promise<unknown>) => {
    try {
      await run()
    } catch (error) {
      return error as { cause?: { code?: string; severity?: string } }
    }
    throw new Error('expected a failure')
  }

  async function pool() {
    const handle = await openPostgres(url, { max: 2, connectTimeoutSeconds: 1 })
    handles.push(handle)
    await handle.db.execute(sql`select 1`)
    return handle.db
  }

  test('a server shutting down (57P03): new connections fail at once as an outage; after a restart the pool serves again', async () => {
    const db = await pool()
    // A session the smart shutdown (SIGTERM) waits for: the server stays up, refusing new connections.
    const holder = postgres(url, { max: 1, onnotice: () => {} })
    await holder`select 1`
    const stopped = server!.exited
    process.kill(postmasterPid(), 'SIGTERM')
    // The pool's own sessions would carry on too: ended, so its next queries need new connections.
    await holder`select pg_terminate_backend(pid) from pg_stat_activity where backend_type = 'client backend' and pid <> pg_backend_pid()`
    const refused = await eventually(
      async () => {
        const started = systemClock.monotonic()
        const error = await failure(() => db.execute(sql`select 1`))
        // Before the connection guard this hung for good, the pool reconnecting in a loop.
        expect(systemClock.monotonic() - started).toBeLessThan(CUT_SHORT_MS)
        expect(isDatabaseUnavailable(error)).toBe(true)
        return error.cause?.code === '57P03' && error
      },
      { what: 'the 57P03 refusal' },
    )
    expect(refused.cause).toMatchObject({ severity: 'FATAL', message: 'the database system is shutting down' })
    await holder.end({ timeout: 1 })
    await stopped
    await start()
    await eventually(() => db.execute(sql`select 1`).then(() => true), { what: 'the pool serving again' })
  }, 60_000)

  test('a crashed backend (57P02 to the others): their queries fail as an outage; after crash recovery the pool serves again', async () => {
    const db = await pool()
    const victim = postgres(url, { max: 1, onnotice: () => {} })
    const [{ pid }] = (await victim`select pg_backend_pid() as pid`) as unknown as [{ pid: number }]
    const inFlight = failure(() => db.execute(sql`select pg_sleep(20)`))
    await eventually(async () => (await victim`select 1 from pg_stat_activity where state = 'active' and query like 'select pg_sleep(%'`).length === 1, {
      what: 'the sleep running',
    })
    // The server ends every other session (a 57P02 warning, then the close) and recovers.
    process.kill(pid, 'SIGKILL')
    const started = systemClock.monotonic()
    expect(isDatabaseUnavailable(await inFlight)).toBe(true)
    expect(systemClock.monotonic() - started).toBeLessThan(CUT_SHORT_MS)
    await victim.end({ timeout: 1 }).catch(() => {})
    await eventually(() => db.execute(sql`select 1`).then(() => true), { timeout: 20_000, what: 'the pool serving again' })
  }, 60_000)
})
