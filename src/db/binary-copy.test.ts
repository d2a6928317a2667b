import { describe, expect, test } from 'bun:test'
import { sql } from 'drizzle-orm'
import { freshDatabase, selectRows } from '../../test/helpers/db'
import { TEST_DATABASE_URL } from '../../test/helpers/env'
import { BinaryCopyDecoder, type BinaryCopyRow, copyRows } from './binary-copy'

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
      const decoder = new BinaryCopyDecoder(2, pair)
      for (let at = 0; at < bytes.length; at += size) decoder.push(bytes.subarray(at, at + size))
      expect(decoder.finish()).toEqual(expected)
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
    expect(() => new BinaryCopyDecoder(2, (row) => row.integer()).push(bytes)).toThrow("a row's decoder read 8 of its")
    expect(() => new BinaryCopyDecoder(2, (row) => [row.float8(), row.text()]).push(bytes)).toThrow('a float8 field of 4 bytes')
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
    await db.transaction(async (tx) => {
      await tx.execute(sql`create temporary table copied on commit drop as select n, repeat('x', 100) as padding from generate_series(1, 650) as n`)
      const copying = copyRows(tx, 'select n, padding from copied', 2, (row) => [row.integer(), row.text()])
      // Hold the event loop while the server answers, so the whole answer is there at the next read.
      setTimeout(() => Bun.sleepSync(200), 0)
      const rows = await copying
      expect(rows).toHaveLength(650)
      expect(await selectRows(tx, sql`select 2 as two`)).toEqual([{ two: 2 }])
    })
  })
})
