import { afterAll, describe, expect, test } from 'bun:test'
import { sql } from 'drizzle-orm'
import { freshDatabase } from '../../test/helpers/db'
import { TEST_DATABASE_URL } from '../../test/helpers/env'
import { eventually } from '../../test/helpers/eventually'
import { startTcpProxy } from '../../test/helpers/tcp-proxy'
import { type DatabaseHandle, liftStatementTimeout, openPostgres, runWithoutStatementTimeout, selectRows } from '../db/client'
import { systemClock } from './clock'
import { AppError } from './errors'
import { databaseUnavailable, isDatabaseUnavailable } from './unavailable'

/** Ten times the 1 s timeouts below, for a loaded machine; a lost timeout takes 30 s (postgres.js's connect default) or hangs. */
const CUT_SHORT_MS = 10_000

// Real failures from a real PostgreSQL (through a proxy the test controls), not hand-made errors:
// what the driver and drizzle actually throw is what the error handler sees.
describe.skipIf(!TEST_DATABASE_URL)('database failures (PostgreSQL)', async () => {
  const handles: DatabaseHandle[] = []
  // Registered before freshDatabase's hook (hooks run in order): the connections end before the database is dropped.
  afterAll(async () => {
    for (const handle of handles) await handle.close()
    await proxy?.close()
  }, 30_000)
  const database = TEST_DATABASE_URL ? await freshDatabase('empty') : undefined
  const target = new URL(TEST_DATABASE_URL ?? 'postgres://localhost')
  const proxy = TEST_DATABASE_URL ? await startTcpProxy({ host: target.hostname, port: Number(target.port || 5432) }) : undefined
  const open = async (options: Parameters<typeof openPostgres>[1]) => {
    const handle = await openPostgres(proxy!.via(database!.url!), options)
    handles.push(handle)
    return handle
  }
  const failure = async (run: () => Promise<unknown>) => {
    try {
      await run()
    } catch (error) {
      return error
    }
    throw new Error('expected a failure')
  }
  /** Resolves once a backend of this database runs `select pg_sleep(...)`: the statement is in flight. */
  const sleeping = () =>
    eventually(
      async () =>
        (
          await selectRows(
            database!.db,
            sql`select 1 from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid() and state = 'active' and query like 'select pg_sleep(%'`,
          )
        ).length > 0,
      { what: 'the sleep running on the server' },
    )

  test('a statement over the statement timeout is cancelled (57014) and counts as unavailable', async () => {
    const { db } = await open({ statementTimeoutSeconds: 1 })
    const started = systemClock.monotonic()
    const error = (await failure(() => db.execute(sql`select pg_sleep(20)`))) as { cause?: { code?: string } }
    expect(systemClock.monotonic() - started).toBeLessThan(CUT_SHORT_MS)
    expect(error.cause?.code).toBe('57014')
    expect(isDatabaseUnavailable(error)).toBe(true)
  }, 30_000)

  test('a job lifts the timeout for its transaction only, or for a statement outside one', async () => {
    const { db } = await open({ max: 1, statementTimeoutSeconds: 1 })
    const rows = await db.transaction(async (tx) => {
      await liftStatementTimeout(tx)
      return selectRows<{ ok: number }>(tx, sql`select 1 as ok from pg_sleep(1.3)`)
    })
    expect(rows).toEqual([{ ok: 1 }])
    await runWithoutStatementTimeout(db, [sql`select pg_sleep(1.3)`, sql`select ${'a value'}::text`])
    // The one connection is back on the session's timeout.
    const [after] = await selectRows<{ timeout: string }>(db, sql`select current_setting('statement_timeout') as timeout`)
    expect(after!.timeout).toBe('1s')
    expect(isDatabaseUnavailable(await failure(() => db.execute(sql`select pg_sleep(3)`)))).toBe(true)
  }, 30_000)

  test('a terminated backend (57P01) and a cut connection count as unavailable', async () => {
    const { db } = await open({ max: 1 })
    const [{ pid }] = (await selectRows<{ pid: number }>(db, sql`select pg_backend_pid() as pid`)) as [{ pid: number }]
    const terminated = failure(() => db.execute(sql`select pg_sleep(20)`))
    await sleeping()
    await database!.db.execute(sql`select pg_terminate_backend(${pid})`)
    // postgres.js fails the query in flight as the connection closing, and hands the FATAL 57P01
    // the server sent to the next query: both are an outage.
    const codes = [((await terminated) as { cause?: { code?: string } }).cause?.code]
    expect(isDatabaseUnavailable(await terminated)).toBe(true)
    for (let attempt = 0; attempt < 3; attempt++) {
      const error = await db.execute(sql`select 1`).then(
        () => undefined,
        (error: unknown) => error,
      )
      if (error === undefined) break
      codes.push((error as { cause?: { code?: string } }).cause?.code)
      expect(isDatabaseUnavailable(error)).toBe(true)
    }
    expect(codes).toContain('57P01')
    const inFlight = failure(() => db.execute(sql`select pg_sleep(20)`))
    await sleeping()
    proxy!.cut()
    expect(isDatabaseUnavailable(await inFlight)).toBe(true)
    await db.execute(sql`select 1`)
  }, 30_000)

  test('refused and stalled connections fail within the connect timeout and count as unavailable', async () => {
    const { db } = await open({ connectTimeoutSeconds: 1 })
    try {
      await proxy!.refuse()
      proxy!.cut()
      let started = systemClock.monotonic()
      expect(isDatabaseUnavailable(await failure(() => db.execute(sql`select 1`)))).toBe(true)
      expect(systemClock.monotonic() - started).toBeLessThan(CUT_SHORT_MS)

      await proxy!.stall()
      // Right after the refusal the connection guard answers with it again, at once; then one attempt meets the stall.
      const stalled = await eventually(
        async () => {
          started = systemClock.monotonic()
          const error = (await failure(() => db.execute(sql`select 1`))) as { cause?: { code?: string } }
          expect(isDatabaseUnavailable(error)).toBe(true)
          expect(systemClock.monotonic() - started).toBeLessThan(CUT_SHORT_MS)
          return error.cause?.code === 'CONNECT_TIMEOUT'
        },
        { what: 'an attempt timing out on the stall' },
      )
      expect(stalled).toBe(true)
    } finally {
      await proxy!.resume()
      proxy!.cut()
    }
    // Within the guard's probe interval of the last failed attempt.
    await eventually(() => db.execute(sql`select 1`).then(() => true), { what: 'the pool serving again' })
  }, 60_000)

  test('a refused query is not an outage: a constraint violation, bad SQL, our own errors', async () => {
    const { db } = await open({})
    await db.execute(sql`insert into accounts (email, password_hash) values ('dup@example.com', 'x')`)
    const duplicate = await failure(() => db.execute(sql`insert into accounts (email, password_hash) values ('dup@example.com', 'x')`))
    expect((duplicate as { cause?: { code?: string } }).cause?.code).toBe('23505')
    expect(isDatabaseUnavailable(duplicate)).toBe(false)
    expect(isDatabaseUnavailable(await failure(() => db.execute(sql`selec 1`)))).toBe(false)
    for (const other of [new AppError('NOT_FOUND', 'x'), new Error('boom'), undefined, null, 'ECONNREFUSED', { code: 42 }]) {
      expect(isDatabaseUnavailable(other)).toBe(false)
    }
  })
})

test('the answer is 503 SERVICE_UNAVAILABLE with Retry-After, in the error envelope', () => {
  const error = databaseUnavailable()
  expect(error.status).toBe(503)
  expect(error.headers).toEqual({ 'retry-after': '5' })
  expect(error.toBody()).toEqual({ error: { code: 'SERVICE_UNAVAILABLE', message: expect.stringContaining('database') } })
})
