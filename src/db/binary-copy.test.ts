import { describe, expect, test } from 'bun:test'
import { sql } from 'drizzle-orm'
import { freshDatabase, selectRows } from '../../test/helpers/db'
import { TEST_DATABASE_URL } from '../../test/helpers/env'
import { eventually } from '../../test/helpers/eventually'
import { ROOT } from '../../test/helpers/process'
import { BinaryCopyDecoder, type BinaryCopyRow, BinaryCopyWriter, copyIn, copyRows } from './binary-copy'
import { openPostgres } from './client'

/** Bytes of a binary COPY stream with these rows (null: a NULL field), as PostgreSQL writes them. */
function copyBytes(rows: (Buffer | null)[][]): Buffer {
  const parts: Buffer[] = [Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1'), Buffer.alloc(8)]
  for (const row of rows) {
    const count = Buffer.alloc(2)
    count.writeInt16BE(row.length)
    parts.push(count)
    for (const field of row) {
      const length = Buffer.alloc(4)
      length.writeInt32BE(field === null ? -1 : field.length)
      parts.push(length, ...(field === null ? [] : [field]))
    }
  }
  parts.push(Buffer.from([0xff, 0xff]))
  return Buffer.concat(parts)
}

const int4 = (value: number) => {
  const bytes = Buffer.alloc(4)
  bytes.writeInt32BE(value)
  return bytes
}

const pair = (row: BinaryCopyRow): unknown[] => [row.integer(), row.text()]

describe('binary COPY decoder', () => {
  const bytes = copyBytes([
    [int4(1), Buffer.from('Normal')],
    [int4(-7), null],
    [int4(2147483647), Buffer.from('Foil ✨ "quoted"\t\n\\')],
  ])
  const expected = [
    [1, 'Normal'],
    [-7, null],
    [2147483647, 'Foil ✨ "quoted"\t\n\\'],
  ]

  test('reads every row whatever the chunking, down to one byte at a time', () => {
    for (const size of [1, 2, 3, 5, 7, 13, 19, bytes.length]) {
      const rows: unknown[] = []
      const decoder = new BinaryCopyDecoder(2, (row) => void rows.push(pair(row)))
      for (let at = 0; at < bytes.length; at += size) decoder.push(bytes.subarray(at, at + size))
      decoder.finish()
      expect(rows).toEqual(expected)
    }
  })

  test('refuses a stream cut before its trailer, data after it, a wrong field count, a wrong signature', () => {
    const cut = new BinaryCopyDecoder(2, pair)
    cut.push(bytes.subarray(0, bytes.length - 2))
    expect(() => cut.finish()).toThrow('ended before the trailer')

    expect(() => new BinaryCopyDecoder(2, pair).push(Buffer.concat([bytes, int4(0)]))).toThrow('data after the trailer')
    expect(() => new BinaryCopyDecoder(3, pair).push(bytes)).toThrow('a row of 2 fields, expected 3')
    const unsigned = Buffer.from(bytes)
    unsigned[0] = 0x51
    expect(() => new BinaryCopyDecoder(2, pair).push(unsigned)).toThrow('no PGCOPY signature')
  })

  test('refuses a decoder that reads fewer fields than the row has, and a field of the wrong size', () => {
    expect(() => new BinaryCopyDecoder(2, (row) => void row.integer()).push(bytes)).toThrow("a row's decoder read 8 of its")
    expect(() => new BinaryCopyDecoder(2, (row) => void [row.float8(), row.text()]).push(bytes)).toThrow('a float8 field of 4 bytes')
  })
})

const EDGE_VALUES = `(values
  (1::int2, (-2147483648)::int4, 0.1::float8, 'Normal'::text, '2000-01-01'::date, '2026-11-22 10:11:12.345678+00'::timestamptz),
  (-32768, 2147483647, -0::float8, '', '1999-12-31', '1999-12-31 23:59:59.9996+00'),
  (0, 0, 1e300, 'Holofoil ✨ "x"\t\\n', '2026-11-22', '2000-01-01 00:00:00+00'),
  (null, null, null, null, null, null),
  (7, 7, 5e-324, 'é', '1970-01-01', '1970-01-01 00:00:00.001+00')
) as t(small, big, money, label, day, at)`

// PGlite has no COPY stream: there copyRows answers undefined and callers SELECT (repo tests cover both).
const database = TEST_DATABASE_URL ? await freshDatabase('empty') : undefined

/**
 * Blocks this thread, event loop included, while a process of its own ends the session `gatePid`
 * (releasing its lock) and waits for backend `pid` to finish its COPY: the whole answer then waits
 * unread in the socket. Gives up after about 10 s, exiting non-zero.
 */
function holdWhileCopying(pid: number, gatePid: number) {
  const wait = `do $$ begin
    perform pg_terminate_backend(${gatePid});
    for attempt in 1..2000 loop
      perform pg_stat_clear_snapshot();
      if exists (select from pg_stat_activity where pid = ${pid} and state = 'idle in transaction' and query like 'copy (%') then return; end if;
      perform pg_sleep(0.005);
    end loop;
    raise exception 'the COPY did not finish within 10 s';
  end $$`
  const script =
    "import postgres from 'postgres'; const sql = postgres(process.env.DATABASE_URL, { max: 1 }); try { await sql.unsafe(process.env.WAIT) } finally { await sql.end() }"
  const run = Bun.spawnSync([process.execPath, '-e', script], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', DATABASE_URL: database!.url!, WAIT: wait },
    stdout: 'ignore',
    stderr: 'pipe',
  })
  return { exitCode: run.exitCode, stderr: run.stderr.toString() }
}

describe.skipIf(!database)('binary COPY from PostgreSQL', () => {
  const db = database?.db!
  const EDGE_COLUMNS = `select small::int2, big, money, label, day, at from ${EDGE_VALUES}`

  test('decodes each type to what the text protocol gives, edge values included', async () => {
    const copied = await copyRows(db, EDGE_COLUMNS, 6, (row) => ({
      small: row.integer(),
      big: row.integer(),
      money: row.float8(),
      label: row.text(),
      day: row.date(),
      at: row.timestamp(),
    }))
    const selected = await selectRows<Record<string, unknown>>(
      db,
      sql`select small::int as small, big, money, label, day::text as day,
                 to_char(at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as at from ${sql.raw(EDGE_VALUES)}`,
    )
    expect(copied).toHaveLength(5)
    expect(copied).toEqual(selected as never)
    expect(copied![1]!.at).toBe('1999-12-31T23:59:59.999Z')
    expect(Object.is(copied![1]!.money, -0)).toBe(true)
  })

  test("a decoder's error rejects and leaves the session usable (the stream is drained); so do the server's", async () => {
    await db.transaction(async (tx) => {
      await expect(copyRows(tx, EDGE_COLUMNS, 6, (row) => row.float8())).rejects.toThrow('a float8 field of 2 bytes')
      expect(await selectRows(tx, sql`select 1 as one`)).toEqual([{ one: 1 }])
    })
    await expect(copyRows(db, 'select * from no_such_table', 1, (row) => row.integer())).rejects.toThrow('no_such_table')
  })

  test('a COPY that arrives whole before its stream is read leaves the session usable', async () => {
    // It fills the stream's buffer and ends in one socket read: postgres.js's socket stayed paused
    // and the next statement hung (without the fix in copyRows this test times out).
    await db.execute(sql`create table if not exists copy_gate ()`)
    const gate = await openPostgres(database!.url!, { max: 1 })
    const gateOpen = Promise.withResolvers<void>()
    const gatePid = Promise.withResolvers<number>()
    // Another session holds a lock the COPY needs before it answers anything: it is sent, and waits.
    const gateHeld = gate.db
      .transaction(async (gateTx) => {
        await gateTx.execute(sql`lock table copy_gate in access exclusive mode`)
        gatePid.resolve((await selectRows<{ pid: number }>(gateTx, sql`select pg_backend_pid() as pid`))[0]!.pid)
        await gateOpen.promise
      })
      .catch(() => {}) // its session is ended under it
    try {
      await db.transaction(async (tx) => {
        await tx.execute(sql`create temporary table copied on commit drop as select n, repeat('x', 100) as padding from generate_series(1, 650) as n`)
        const [{ pid }] = (await selectRows<{ pid: number }>(tx, sql`select pg_backend_pid() as pid`)) as [{ pid: number }]
        const held = await gatePid.promise
        const copying = copyRows(tx, 'select n, padding from copied where not exists (select from copy_gate)', 2, (row) => [row.integer(), row.text()])
        await eventually(
          async () => (await selectRows(db, sql`select 1 from pg_stat_activity where pid = ${pid} and wait_event_type = 'Lock' and query like 'copy (%'`)).length > 0,
          { what: 'the COPY waiting for the lock' },
        )
        expect(holdWhileCopying(pid, held)).toEqual({ exitCode: 0, stderr: '' })
        const rows = await copying
        expect(rows).toHaveLength(650)
        expect(await selectRows(tx, sql`select 2 as two`)).toEqual([{ two: 2 }])
      })
    } finally {
      gateOpen.resolve()
      await gateHeld
      await gate.close()
    }
  }, 30_000)
})

describe.skipIf(!database)('binary COPY into PostgreSQL', () => {
  const db = database?.db!
  const TABLE = 'create temporary table landed (id int primary key, label text, money float8, day date, at timestamptz) on commit drop'
  const rows = [
    { id: -2147483648, label: 'Normal', money: 0.1, day: '2000-01-01', at: new Date('2026-11-22T10:11:12.345Z') },
    { id: 2147483647, label: 'Holofoil ✨ "x"\t\\n é', money: -1e300, day: '1999-12-31', at: new Date('1999-12-31T23:59:59.999Z') },
    { id: 0, label: null, money: null, day: null, at: null },
    { id: 7, label: 'x'.repeat(3_000_000), money: 5e-324, day: '1970-01-01', at: new Date(1) },
  ]

  test('writes each type as the server reads it back, across chunks', async () => {
    await db.transaction(async (tx) => {
      await tx.execute(sql.raw(TABLE))
      const count = await copyIn(tx, 'landed (id, label, money, day, at)', async ({ rows: out, flush }) => {
        for (const row of rows) {
          out.row(5).integer(row.id).text(row.label).float8(row.money).date(row.day).timestamp(row.at)
          await flush()
        }
      })
      expect(count).toBe(4)
      const back = await selectRows<Record<string, unknown>>(
        tx,
        sql`select id, label, money, day::text as day, at from landed order by array_position(array[-2147483648, 2147483647, 0, 7], id)`,
      )
      expect(back.map((row) => ({ ...row, at: row.at === null ? null : new Date(row.at as string) }))).toEqual(rows)
    })
  })

  test("the server's error after the last row rejects instead of hanging, the caller's error rejects too", async () => {
    await expect(
      db.transaction(async (tx) => {
        await tx.execute(sql.raw(TABLE))
        // The duplicate key is only found once the server has the final rows.
        await copyIn(tx, 'landed (id)', ({ rows: out }) => {
          out.row(1).integer(1)
          out.row(1).integer(1)
        })
      }),
    ).rejects.toThrow('duplicate key')
    await db.transaction(async (tx) => {
      await tx.execute(sql.raw(TABLE))
      await expect(
        copyIn(tx, 'landed (id)', async ({ rows: out, flush }) => {
          out.row(1).integer(1)
          await flush()
          throw new Error('source failed')
        }),
      ).rejects.toThrow('source failed')
    })
    expect(await selectRows(db, sql`select 1 as one`)).toEqual([{ one: 1 }])
    expect(() => new BinaryCopyWriter().integer(2 ** 31)).toThrow('no int4')
    expect(() => new BinaryCopyWriter().date('2026-13-45')).toThrow('no date')
  })
})
