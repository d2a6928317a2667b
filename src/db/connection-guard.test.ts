import { afterAll, describe, expect, test } from 'bun:test'
import { type AddressInfo, createServer, type Socket } from 'node:net'
import { sql } from 'drizzle-orm'
import { freshDatabase } from '../../test/helpers/db'
import { TEST_DATABASE_URL } from '../../test/helpers/env'
import { eventually } from '../../test/helpers/eventually'
import { startTcpProxy } from '../../test/helpers/tcp-proxy'
import { systemClock } from '../shared/clock'
import { isDatabaseUnavailable } from '../shared/unavailable'
import { type DatabaseHandle, openPostgres } from './client'
import { PROBE_INTERVAL_MS } from './connection-guard'

/** Ten times the 1 s connect timeout below, for a loaded machine; the driver's bugs hang for good. */
const CUT_SHORT_MS = 10_000

type Failure = { code?: string; severity?: string; message?: string }

/** What a query ended with: the driver's error (drizzle wraps it in `cause`), or 'ok'. */
async function outcome(run: () => Promise<unknown>): Promise<'ok' | (Failure & { unavailable: boolean })> {
  try {
    await run()
    return 'ok'
  } catch (error) {
    const cause = ((error as { cause?: unknown }).cause ?? error) as Failure
    return { code: cause.code, severity: cause.severity, message: cause.message, unavailable: isDatabaseUnavailable(error) }
  }
}

const handles: DatabaseHandle[] = []
afterAll(async () => {
  for (const handle of handles) await handle.close()
}, 30_000)

async function open(url: string, max: number) {
  const handle = await openPostgres(url, { max, connectTimeoutSeconds: 1 })
  handles.push(handle)
  return handle
}

// Every way a real PostgreSQL refuses or drops connections, on databases and a role of this test's
// own (never another test's): the queries fail at once with an error counted as an outage, the pool
// does not hammer the server meanwhile, and it serves again once the server does.
describe.skipIf(!TEST_DATABASE_URL)('connections PostgreSQL refuses or drops', async () => {
  const { default: postgres } = await import('postgres')
  const admin = TEST_DATABASE_URL ? postgres(TEST_DATABASE_URL, { max: 1, onnotice: () => {} }) : undefined
  // Registered before freshDatabase's hook (hooks run in order): the admin connection is still open when it drops.
  afterAll(() => admin?.end({ timeout: 5 }), 30_000)
  const database = TEST_DATABASE_URL ? await freshDatabase('empty') : undefined
  const name = database ? new URL(database.url!).pathname.slice(1) : ''
  const target = new URL(TEST_DATABASE_URL ?? 'postgres://localhost')
  const proxy = TEST_DATABASE_URL ? await startTcpProxy({ host: target.hostname, port: Number(target.port || 5432) }) : undefined
  afterAll(() => proxy?.close())
  const terminateBackends = (database: string) => admin!.unsafe('select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()', [database])

  test('a database that stops accepting connections (55000): every query fails at once, without a reconnect storm, until it accepts again', async () => {
    const { db } = await open(proxy!.via(database!.url!), 4)
    const sleeps = [1, 2].map(() => outcome(() => db.execute(sql`select pg_sleep(20)`)))
    await eventually(async () => (await admin!.unsafe(`select 1 from pg_stat_activity where datname = $1 and query like 'select pg_sleep(%'`, [name])).length === 2, {
      what: 'both sleeps running',
    })
    // What ALTER DATABASE … ALLOW_CONNECTIONS false followed by terminating its backends does to a service.
    await admin!.unsafe(`alter database ${name} allow_connections false`)
    try {
      await terminateBackends(name)
      for (const sleep of await Promise.all(sleeps)) expect(sleep).toMatchObject({ unavailable: true })

      const attemptsBefore = proxy!.accepted
      const started = systemClock.monotonic()
      const timed = async () => {
        const queryStarted = systemClock.monotonic()
        const failure = await outcome(() => db.execute(sql`select 1`))
        // Before the guard the first of these hung for good while the pool reconnected in a loop.
        expect(systemClock.monotonic() - queryStarted).toBeLessThan(CUT_SHORT_MS)
        return failure
      }
      const sequential = []
      for (let i = 0; i < 5; i++) sequential.push(await timed())
      const concurrent = await Promise.all(Array.from({ length: 20 }, timed))
      const elapsed = systemClock.monotonic() - started
      for (const failure of [...sequential, ...concurrent]) {
        expect(failure).toMatchObject({ code: '55000', severity: 'FATAL', unavailable: true })
        expect((failure as Failure).message).toContain('is not currently accepting connections')
      }
      // The connections open at the outage's start, then one probe per interval (thousands a second before).
      expect(proxy!.accepted - attemptsBefore).toBeLessThanOrEqual(4 + 1 + elapsed / PROBE_INTERVAL_MS)
    } finally {
      await admin!.unsafe(`alter database ${name} allow_connections true`)
    }
    await eventually(async () => (await outcome(() => db.execute(sql`select 1`))) === 'ok', { what: 'the pool serving again' })
    expect(await Promise.all(Array.from({ length: 8 }, () => outcome(() => db.execute(sql`select 1`))))).toEqual(Array(8).fill('ok'))
  }, 60_000)

  test('a database dropped for a restore (3D000) fails as an outage, and serves again once created', async () => {
    const restored = `${name}_restore`
    const url = new URL(database!.url!)
    url.pathname = `/${restored}`
    await admin!.unsafe(`create database ${restored}`)
    try {
      const { db } = await open(url.toString(), 2)
      expect(await outcome(() => db.execute(sql`select 1`))).toBe('ok')
      await admin!.unsafe(`drop database ${restored} with (force)`)
      // The first query may still meet the backend the drop terminated (57P01); the next ones the refusal.
      const refused = await eventually(
        async () => {
          const failure = await outcome(() => db.execute(sql`select 1`))
          expect(failure).toMatchObject({ unavailable: true })
          return (failure as Failure).code === '3D000' && failure
        },
        { what: 'the 3D000 refusal' },
      )
      expect(refused).toMatchObject({ severity: 'FATAL', unavailable: true })
      await admin!.unsafe(`create database ${restored}`)
      await eventually(async () => (await outcome(() => db.execute(sql`select 1`))) === 'ok', { what: 'the pool serving again' })
    } finally {
      await admin!.unsafe(`drop database if exists ${restored} with (force)`)
    }
  }, 60_000)

  test('no connection slot left (53300): a role at its connection limit fails as an outage', async () => {
    const role = `${name}_limited`
    await admin!.unsafe(`create role ${role} login connection limit 0`)
    try {
      const url = new URL(database!.url!)
      url.username = role
      const { db, close } = await openPostgres(url.toString(), { max: 2, connectTimeoutSeconds: 1 })
      try {
        const failures = await Promise.all(Array.from({ length: 5 }, () => outcome(() => db.execute(sql`select 1`))))
        for (const failure of failures) expect(failure).toMatchObject({ code: '53300', severity: 'FATAL', unavailable: true })
      } finally {
        await close()
      }
    } finally {
      await admin!.unsafe(`drop role if exists ${role}`)
    }
  }, 30_000)

  test('a backend terminated while idle: the next query fails as an outage, the one after is served, every time', async () => {
    const { db } = await open(database!.url!, 1)
    await db.execute(sql`select 1`)
    for (let round = 0; round < 3; round++) {
      await terminateBackends(name)
      // The query may be sent before the termination is read: then it is the one that hears it.
      const first = await outcome(() => db.execute(sql`select 1`))
      if (first !== 'ok') expect(first).toMatchObject({ code: '57P01', unavailable: true })
      // Before the guard the one connection was lost here for good: every later query hung or timed out.
      const started = systemClock.monotonic()
      expect(await outcome(() => db.execute(sql`select 1`))).toBe('ok')
      expect(systemClock.monotonic() - started).toBeLessThan(CUT_SHORT_MS)
    }
  }, 30_000)
})

/**
 * A TCP server that reads a client's startup message and answers it as `answer` says: an
 * ErrorResponse with that SQLSTATE (then closes), or a close without a word. Counts connections.
 */
async function startupRefuser(answer: { sqlstate: string } | 'close') {
  let connections = 0
  const sockets = new Set<Socket>()
  const server = createServer((socket) => {
    connections++
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
    socket.on('error', () => {})
    let received: Buffer = Buffer.alloc(0)
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk])
      if (received.length < 4 || received.length < received.readInt32BE(0)) return
      if (answer === 'close') return void socket.end()
      const fields = Buffer.from(`SFATAL\0VFATAL\0C${answer.sqlstate}\0Mrefused by the test\0\0`)
      const header = Buffer.alloc(5)
      header.write('E')
      header.writeInt32BE(4 + fields.length, 1)
      socket.end(Buffer.concat([header, fields]))
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    url: `postgres://postgres@127.0.0.1:${(server.address() as AddressInfo).port}/none`,
    get connections() {
      return connections
    },
    close() {
      for (const socket of sockets) socket.destroy()
      server.close()
    },
  }
}

describe('a server that refuses the startup', () => {
  test('with a connection exception (class 08): the query fails with it, as an outage', async () => {
    const server = await startupRefuser({ sqlstate: '08006' })
    try {
      const { db } = await open(server.url, 2)
      for (let i = 0; i < 3; i++) expect(await outcome(() => db.execute(sql`select 1`))).toMatchObject({ code: '08006', unavailable: true })
    } finally {
      server.close()
    }
  })

  test('by closing without a word: the query fails at once, as an outage, without a reconnect loop', async () => {
    const server = await startupRefuser('close')
    try {
      const { db } = await open(server.url, 2)
      const started = systemClock.monotonic()
      // Before the guard the query hung for good, reconnecting without a pause (porsager/postgres#1193).
      const failures = await Promise.all(Array.from({ length: 5 }, () => outcome(() => db.execute(sql`select 1`))))
      const elapsed = systemClock.monotonic() - started
      expect(elapsed).toBeLessThan(CUT_SHORT_MS)
      for (const failure of failures) expect(failure).toMatchObject({ code: 'CONNECTION_CLOSED', unavailable: true })
      expect(server.connections).toBeLessThanOrEqual(2 + 1 + elapsed / PROBE_INTERVAL_MS)
    } finally {
      server.close()
    }
  })
})
